package tests

import (
	"reflect"
	"slices"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// TestDecodeDefinitionHostModels: on every Definition of every form of the
// shipped models, the host's decode (what a load from the store on disk
// keeps) agrees with the full decode on every field it fills, leaves the
// pools and the boundary signature out, and finds the same written slots.
func TestDecodeDefinitionHostModels(t *testing.T) {
	for _, file := range []string{dsv4, "../config/models/qwen3_14b_decode.yaml"} {
		m, err := config.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, form := range m.Forms() {
			// Every Definition that records: a body that cannot (an
			// unsupported construct) has no image to decode.
			o := &collector{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots()), seen: map[uint64]bool{}}
			if err := m.Run(o, form); err != nil {
				t.Fatal(err)
			}
			if o.err != nil {
				t.Logf("%s %s: %v", file, form, o.err)
			}
			for _, img := range o.images {
				n++
				full, err := stages.DecodeDefinition(img)
				if err != nil {
					t.Fatalf("%s %s: %v", file, form, err)
				}
				host, written, err := stages.DecodeDefinitionHost(img)
				if err != nil {
					t.Fatalf("%s %s %q: the host decode refuses what the full decode accepts: %v", file, form, full.Key, err)
				}
				want := *full
				want.Tensors, want.Scalars, want.Fanin, want.Roots, want.Preds, want.Boundary = nil, nil, nil, nil, nil, nil
				if !reflect.DeepEqual(&want, host) {
					t.Errorf("%s %s %q: the host decode differs from the full decode", file, form, full.Key)
				}
				if w := full.WrittenSlots(); !slices.Equal(written, w) {
					t.Errorf("%s %s %q: written slots %v, want %v", file, form, full.Key, written, w)
				}
			}
		}
		if n == 0 {
			t.Fatalf("%s: no Definition", file)
		}
		t.Logf("%s: %d Definitions agree", file, n)
	}
}
