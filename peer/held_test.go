package peer

import (
	"slices"
	"testing"
)

// TestHeldImagesBounded: images past the bound go least recently served
// first; one image over the bound alone stays.
func TestHeldImagesBounded(t *testing.T) {
	img := func(n int) held { return held{image: make([]byte, n)} }
	for _, tc := range []struct {
		name string
		do   func(hs *heldImages)
		want []uint64 // held, any order
		size int64
	}{
		{"within", func(hs *heldImages) { hs.put(1, img(40)); hs.put(2, img(60)) }, []uint64{1, 2}, 100},
		{"oldest goes", func(hs *heldImages) { hs.put(1, img(40)); hs.put(2, img(40)); hs.put(3, img(40)) }, []uint64{2, 3}, 80},
		{"served stays", func(hs *heldImages) {
			hs.put(1, img(40))
			hs.put(2, img(40))
			hs.get(1)
			hs.put(3, img(40))
		}, []uint64{1, 3}, 80},
		{"has does not serve", func(hs *heldImages) {
			hs.put(1, img(40))
			hs.put(2, img(40))
			hs.has(1)
			hs.put(3, img(40))
		}, []uint64{2, 3}, 80},
		{"one over the bound stays alone", func(hs *heldImages) { hs.put(1, img(40)); hs.put(2, img(500)) }, []uint64{2}, 500},
		{"put again replaces", func(hs *heldImages) { hs.put(1, img(40)); hs.put(1, img(70)) }, []uint64{1}, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHeldImages(100)
			tc.do(hs)
			var got []uint64
			for fk := range hs.byKey {
				got = append(got, fk)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) || hs.bytes != tc.size || hs.order.Len() != len(got) {
				t.Fatalf("held %v (%d bytes, %d in order), want %v (%d bytes)", got, hs.bytes, hs.order.Len(), tc.want, tc.size)
			}
		})
	}
}
