package stages

import (
	"encoding/binary"
	"reflect"
	"slices"
	"testing"
)

// HostAgrees reports how DecodeDefinitionHost's result differs from the
// full decode of the same image ("" if it does not): every field it fills
// equal, the pools and the boundary signature it leaves out nil, and the
// written slots those of the full Definition.
func HostAgrees(full, host *Definition, written []int32) string {
	want := *full
	want.Tensors, want.Scalars, want.Fanin, want.Roots, want.Preds, want.Boundary = nil, nil, nil, nil, nil, nil
	if len(want.Nodes) == 0 {
		want.Nodes = host.Nodes // nil and empty alike
	}
	switch {
	case !reflect.DeepEqual(&want, host):
		return "the decoded fields differ from the full decode's"
	case !slices.Equal(written, full.WrittenSlots()):
		return "the written slots differ from the full decode's"
	}
	return ""
}

func TestDecodeDefinitionHost(t *testing.T) {
	for name, d := range map[string]*Definition{
		"every section": codecDef(),
		"empty":         {Key: "empty"},
		"dsv4-like":     dsv4LikeDefinition(291),
	} {
		t.Run(name, func(t *testing.T) {
			img := EncodeDefinition(d)
			full, err := DecodeDefinition(img)
			if err != nil {
				t.Fatal(err)
			}
			host, written, err := DecodeDefinitionHost(img)
			if err != nil {
				t.Fatal(err)
			}
			if msg := HostAgrees(full, host, written); msg != "" {
				t.Fatal(msg)
			}
			if name == "every section" && len(written) == 0 {
				t.Fatal("no written slot found in a Definition that writes two")
			}
		})
	}
}

// TestDecodeDefinitionHostRejects checks that what the host still checks
// is checked: the header, the hash, the section table.
func TestDecodeDefinitionHostRejects(t *testing.T) {
	good := EncodeDefinition(codecDef())
	rehash := func(b []byte) []byte {
		binary.LittleEndian.PutUint64(b[hashOff:], imageHash(b, hashOff))
		return b
	}
	for name, b := range map[string][]byte{
		"truncated":    good[:len(good)-1],
		"flipped byte": func() []byte { c := slices.Clone(good); c[len(c)/2] ^= 1; return c }(),
		"version":      rehash(func() []byte { c := slices.Clone(good); c[4]++; return c }()),
		"section order": rehash(func() []byte {
			c := slices.Clone(good)
			binary.LittleEndian.PutUint32(c[defSecAt+4*dsTensors:], 0)
			return c
		}()),
		"boundary slot":  rehash(func() []byte { c := slices.Clone(good); binary.LittleEndian.PutUint32(c[56:], 1); return c }()),
		"header too big": append(slices.Clone(good[:8]), 0),
	} {
		if _, _, err := DecodeDefinitionHost(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzDecodeDefinitionHost: never panics, and on every image the full
// decode accepts (the hash fixed up, so the structure is what is fuzzed)
// it accepts and agrees.
func FuzzDecodeDefinitionHost(f *testing.F) {
	f.Add(EncodeDefinition(codecDef()))
	f.Add(EncodeDefinition(&Definition{Key: "empty"}))
	f.Add(EncodeDefinition(dsv4LikeDefinition(7)))
	addImageSeeds(f, "def")
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = DecodeDefinitionHost(b)
		if len(b) < defHeaderSize {
			return
		}
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint64(c[hashOff:], imageHash(c, hashOff))
		full, err := DecodeDefinition(c)
		if err != nil {
			_, _, _ = DecodeDefinitionHost(c)
			return
		}
		host, written, err := DecodeDefinitionHost(c)
		if err != nil {
			t.Fatalf("the full decode accepts an image the host decode refuses: %v", err)
		}
		if msg := HostAgrees(full, host, written); msg != "" {
			t.Fatal(msg)
		}
	})
}

func BenchmarkDecodeDefinitionHost(b *testing.B) {
	img := EncodeDefinition(dsv4LikeDefinition(743))
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeDefinitionHost(img); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzScanTensors: the tensor records' fast scan and the checked one
// accept the same sections (the fast one's refusals are explained by the
// checked one, which panics if it accepts what the fast one refused).
func FuzzScanTensors(f *testing.F) {
	d := codecDef()
	img := EncodeDefinition(d)
	h, sec, err := defLayout(img)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(img[sec[dsTensors]:sec[dsScalars]], uint16(h.ntens), uint16(h.nbound), uint16(h.nroots))
	f.Add([]byte{0x11, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0, 0, 0}, uint16(1), uint16(1), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, ntens, nbound, nroots uint16) {
		h := defCounts{ntens: int(ntens), nbound: int(nbound), nroots: int(nroots)}
		fast := h.scanTensors(b, make([]uint64, (h.nbound+63)/64))
		checked := h.scanTensorsCheckedOK(b)
		if fast != checked {
			t.Fatalf("fast scan %v, checked scan %v", fast, checked)
		}
	})
}

// scanTensorsCheckedOK is scanTensorsChecked's verdict, without its panic.
func (h *defCounts) scanTensorsCheckedOK(b []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = true
		}
	}()
	return h.scanTensorsChecked(b) == nil
}
