package stages

import (
	"bytes"
	"testing"
)

// FuzzDiffRunImage: the ranges, copied from next over prev, give next;
// they are in order, apart by more than diffGap, inside the image, and
// cover nothing when the images are equal.
func FuzzDiffRunImage(f *testing.F) {
	f.Add([]byte("abcdefgh"), uint16(0), uint16(3), byte(1))
	f.Add(bytes.Repeat([]byte{7}, 1000), uint16(500), uint16(700), byte(9))
	f.Add(bytes.Repeat([]byte{1}, 4096), uint16(63), uint16(64), byte(2))
	f.Add(bytes.Repeat([]byte{3}, 3*diffChunk+100), uint16(diffChunk-1), uint16(diffChunk), byte(4))
	f.Fuzz(func(t *testing.T, prev []byte, at, stride uint16, x byte) {
		next := bytes.Clone(prev)
		for i := int(at); stride > 0 && i < len(next); i += int(stride) {
			next[i] ^= x
		}
		rs, ok := DiffRunImage(nil, prev, next)
		if !ok {
			t.Fatal("equal lengths refused")
		}
		got := bytes.Clone(prev)
		end := -diffGap - 1
		for _, r := range rs {
			if r.Len <= 0 || r.Off < 0 || r.Off+r.Len > len(next) || r.Off-end <= diffGap {
				t.Fatalf("range %+v after one ending at %d, image %d bytes", r, end, len(next))
			}
			copy(got[r.Off:r.Off+r.Len], next[r.Off:r.Off+r.Len])
			end = r.Off + r.Len
		}
		if !bytes.Equal(got, next) {
			t.Fatalf("patched image differs from next (ranges %v)", rs)
		}
		if bytes.Equal(prev, next) != (len(rs) == 0) {
			t.Fatalf("equal %v, but %d ranges", bytes.Equal(prev, next), len(rs))
		}
		if _, ok := DiffRunImage(nil, prev, append(next, 0)); ok {
			t.Fatal("a longer image patched over a shorter one")
		}
	})
}
