package imagefmt

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// UvarintLen is the size of x as a uvarint.
func UvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// VarintLen is the size of x as a (zig-zag) varint.
func VarintLen(x int64) int { return UvarintLen(uint64(x<<1) ^ uint64(x>>63)) }

// Align8 rounds n up to a multiple of 8.
func Align8(n int) int { return (n + 7) &^ 7 }

// Writer appends an image's fields to B.
type Writer struct{ B []byte }

func (w *Writer) U8(x uint8)   { w.B = append(w.B, x) }
func (w *Writer) U16(x uint16) { w.B = binary.LittleEndian.AppendUint16(w.B, x) }
func (w *Writer) U32(x uint32) { w.B = binary.LittleEndian.AppendUint32(w.B, x) }
func (w *Writer) U64(x uint64) { w.B = binary.LittleEndian.AppendUint64(w.B, x) }

// Uvarint appends x as a uvarint; the one-byte case, most of an image's
// varints, is inlined.
func (w *Writer) Uvarint(x uint64) {
	if x < 0x80 {
		w.B = append(w.B, byte(x))
		return
	}
	w.B = binary.AppendUvarint(w.B, x)
}

// Varint appends x zig-zag mapped as a uvarint.
func (w *Writer) Varint(x int64) { w.Uvarint(uint64(x<<1) ^ uint64(x>>63)) }

// Pad8 appends zero bytes up to a multiple of 8.
func (w *Writer) Pad8() {
	for len(w.B)&7 != 0 {
		w.B = append(w.B, 0)
	}
}

// Reader reads one section, B, with a sticky error: after the first failure
// every read returns zero and Err holds the failure, so decoders check Err
// once per record. Section names the section in errors.
type Reader struct {
	B       []byte
	Off     int
	Err     error
	Section string
}

// Fail records a failure at the current offset unless one is recorded.
func (r *Reader) Fail(format string, args ...any) {
	if r.Err == nil {
		r.Err = fmt.Errorf("%w: %s section at byte %d: %s", ErrBadImage, r.Section, r.Off, fmt.Sprintf(format, args...))
	}
}

// Need reports whether n more bytes can be read, failing if not.
func (r *Reader) Need(n int) bool {
	if r.Err != nil {
		return false
	}
	if n > len(r.B)-r.Off {
		r.Fail("truncated (need %d bytes, %d left)", n, len(r.B)-r.Off)
		return false
	}
	return true
}

func (r *Reader) U8() uint8 {
	if !r.Need(1) {
		return 0
	}
	r.Off++
	return r.B[r.Off-1]
}

func (r *Reader) U32() uint32 {
	if !r.Need(4) {
		return 0
	}
	r.Off += 4
	return binary.LittleEndian.Uint32(r.B[r.Off-4:])
}

func (r *Reader) U64() uint64 {
	if !r.Need(8) {
		return 0
	}
	r.Off += 8
	return binary.LittleEndian.Uint64(r.B[r.Off-8:])
}

func (r *Reader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.B[r.Off:])
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.Off += n
	return x
}

// Varint reads a uvarint and undoes its zig-zag mapping, as
// encoding/binary.Varint does.
func (r *Reader) Varint() int64 {
	ux := r.Uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

// Int32 reads a varint that must fit an int32.
func (r *Reader) Int32() int32 {
	x := r.Varint()
	if x < math.MinInt32 || x > math.MaxInt32 {
		r.Fail("value %d out of int32 range", x)
		return 0
	}
	return int32(x)
}

// Uint32 reads a uvarint that must fit a uint32.
func (r *Reader) Uint32() uint32 {
	x := r.Uvarint()
	if x > math.MaxUint32 {
		r.Fail("value %d out of uint32 range", x)
		return 0
	}
	return uint32(x)
}

// Nonneg reads a uvarint that must fit a non-negative int64.
func (r *Reader) Nonneg() int64 {
	x := r.Uvarint()
	if x > math.MaxInt64 {
		r.Fail("value %d out of range", x)
		return 0
	}
	return int64(x)
}

// SkipVarint steps over one varint, failing as Uvarint does on a bad one.
func (r *Reader) SkipVarint() {
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if r.Off+i >= len(r.B) {
			break
		}
		if r.B[r.Off+i] < 0x80 {
			if i == binary.MaxVarintLen64-1 && r.B[r.Off+i] > 1 {
				break // overflows 64 bits
			}
			r.Off += i + 1
			return
		}
	}
	r.Fail("bad varint")
}

// Done fails if the section has bytes left.
func (r *Reader) Done() {
	if r.Err == nil && r.Off != len(r.B) {
		r.Fail("%d trailing bytes", len(r.B)-r.Off)
	}
}
