package imagefmt

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestVarints: every value reads back as written, takes the bytes its Len
// says, and SkipVarint steps over exactly what Uvarint reads.
func TestVarints(t *testing.T) {
	us := []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MaxUint64}
	ss := []int64{0, 1, -1, 63, -64, 64, -65, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64}
	for _, x := range us {
		var w Writer
		w.Uvarint(x)
		if len(w.B) != UvarintLen(x) {
			t.Errorf("uvarint %d: %d bytes, UvarintLen says %d", x, len(w.B), UvarintLen(x))
		}
		r := Reader{B: w.B}
		if got := r.Uvarint(); got != x || r.Err != nil {
			t.Errorf("uvarint %d read back as %d (%v)", x, got, r.Err)
		}
		r.Done()
		s := Reader{B: w.B}
		s.SkipVarint()
		if s.Off != len(w.B) || s.Err != nil {
			t.Errorf("uvarint %d: SkipVarint stepped %d of %d bytes (%v)", x, s.Off, len(w.B), s.Err)
		}
	}
	for _, x := range ss {
		var w Writer
		w.Varint(x)
		if len(w.B) != VarintLen(x) {
			t.Errorf("varint %d: %d bytes, VarintLen says %d", x, len(w.B), VarintLen(x))
		}
		r := Reader{B: w.B}
		if got := r.Varint(); got != x || r.Err != nil {
			t.Errorf("varint %d read back as %d (%v)", x, got, r.Err)
		}
	}
}

// TestReaderRefuses: each bad read fails with ErrBadImage naming the
// section and byte, and the error sticks.
func TestReaderRefuses(t *testing.T) {
	over := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02} // past 64 bits
	cases := []struct {
		name string
		b    []byte
		read func(r *Reader)
		want string
	}{
		{"truncated u32", []byte{1, 2, 3}, func(r *Reader) { r.U32() }, "truncated (need 4 bytes, 3 left)"},
		{"unterminated varint", []byte{0x80, 0x80}, func(r *Reader) { r.Uvarint() }, "bad varint"},
		{"varint past 64 bits", over, func(r *Reader) { r.Uvarint() }, "bad varint"},
		{"skip past 64 bits", over, func(r *Reader) { r.SkipVarint() }, "bad varint"},
		{"int32 range", func() []byte { var w Writer; w.Varint(math.MaxInt32 + 1); return w.B }(), func(r *Reader) { r.Int32() }, "out of int32 range"},
		{"uint32 range", func() []byte { var w Writer; w.Uvarint(math.MaxUint32 + 1); return w.B }(), func(r *Reader) { r.Uint32() }, "out of uint32 range"},
		{"nonneg range", func() []byte { var w Writer; w.Uvarint(math.MaxInt64 + 1); return w.B }(), func(r *Reader) { r.Nonneg() }, "out of range"},
		{"trailing", []byte{1, 2}, func(r *Reader) { r.U8(); r.Done() }, "1 trailing bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Reader{B: c.b, Section: "test"}
			c.read(&r)
			if !errors.Is(r.Err, ErrBadImage) || !strings.Contains(r.Err.Error(), c.want) || !strings.Contains(r.Err.Error(), "test section at byte") {
				t.Fatalf("err = %v, want ErrBadImage naming the section and %q", r.Err, c.want)
			}
			first := r.Err
			if r.U8() != 0 || r.Err != first {
				t.Fatal("a read after a failure returned data or replaced the error")
			}
		})
	}
}

// TestCheckHeader: an image with a good header passes; each header field
// that is wrong is named.
func TestCheckHeader(t *testing.T) {
	good := func() []byte {
		var w Writer
		w.B = append(w.B, RunImageMagic...)
		w.U16(RunImageVersion)
		w.U16(RunHeaderSize)
		w.U64(0)
		w.U64(0)
		w.U32(RunHeaderSize)
		for len(w.B) < RunHeaderSize {
			w.U8(0)
		}
		h := Hash(w.B, RunHashAt)
		for i := 0; i < 8; i++ {
			w.B[RunHashAt+i] = byte(h >> (8 * i))
		}
		return w.B
	}
	check := func(b []byte) error {
		return CheckHeader(b, RunImageMagic, RunImageVersion, RunHeaderSize, RunTotalAt, RunHashAt, "run")
	}
	if err := check(good()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		f    func(b []byte) []byte
		want string
	}{
		{"short", func(b []byte) []byte { return b[:10] }, "shorter than its 80-byte header"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, `magic "XBGR"`},
		{"version", func(b []byte) []byte { b[VersionAt] = 9; return b }, "version 9"},
		{"header size", func(b []byte) []byte { b[HeaderSizeAt] = 7; return b }, "header size 7"},
		{"total", func(b []byte) []byte { return append(b, 0) }, "says 80 bytes, got 81"},
		{"hash", func(b []byte) []byte { b[RunHeapAt] = 1; return b }, "does not verify"},
	}
	for _, c := range cases {
		if err := check(c.f(good())); !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}
