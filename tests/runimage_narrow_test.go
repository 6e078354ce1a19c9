package tests

import (
	"bytes"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// TestWarmRunImageBytes: the run image the Host builds for a warm DSv4 full
// pass, its Graph boundaries kept narrow (RunImage.Bound), encodes to the
// bytes of the image stored from an earlier build, which kept every
// boundary as a full argument: the stored image re-encoded (all its
// arguments in one pool) with today's full_keys and Definition hashes,
// which follow the model file's hash and the Definition encoding; the
// stored keys map one to one onto today's. The stored image kept every
// fanin edge; reduced in one batch (RunImage.ReduceFanin) it must ship
// what the Host's incremental reduction ships.
func TestWarmRunImageBytes(t *testing.T) {
	img := warmRunImage(t)
	if !img.Narrow() || img.NumBound() != 2962 {
		t.Fatalf("warm image narrow %v with %d boundary args, want narrow with 2962", img.Narrow(), img.NumBound())
	}
	got := stages.EncodeRunImage(img)
	stored, err := stages.DecodeRunImage(readImage(t, goodRunImage))
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Graphs) != len(img.Graphs) {
		t.Fatalf("stored image has %d Graph submissions, the warm pass %d", len(stored.Graphs), len(img.Graphs))
	}
	keys, back := map[uint64]uint64{}, map[uint64]uint64{}
	for i := range stored.Graphs {
		s, g := &stored.Graphs[i], &img.Graphs[i]
		if k, ok := keys[s.FullKey]; ok && k != g.FullKey || back[g.FullKey] != 0 && back[g.FullKey] != s.FullKey {
			t.Fatalf("Graph submission %d replays full_key %#016x, stored %#016x: the keys do not map one to one", i, g.FullKey, s.FullKey)
		}
		keys[s.FullKey], back[g.FullKey] = g.FullKey, s.FullKey
		s.FullKey, s.DefHash = g.FullKey, g.DefHash
	}
	stored.ReduceFanin()
	if want := stages.EncodeRunImage(stored); !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the warm pass's run image (%d bytes) differs from the stored one (%d bytes) at byte %d", len(got), len(want), i)
	}
}
