package config_test

import (
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// recordingOrch runs the ordinary path but records the body of the first
// call of every key with stages' Recorder, as the Graph pipeline would.
type recordingOrch struct {
	*stages.OrdinaryPath
	t       *testing.T
	defs    map[string]*stages.Definition
	defects map[string][]stages.Defect
}

func (o *recordingOrch) Graph(call *stages.GraphCall) stages.TaskID {
	if _, ok := o.defs[call.Key]; !ok {
		var r stages.Recorder
		d, err := r.Record(call.Key, stages.FullKey("dsv4", call.Key, call.Config), call.Boundary, o.BoundaryRoots(call.Boundary), call.Scalars, call.ExtDeps, call.Body)
		if err != nil {
			o.t.Fatalf("recording %s: %v", call.Key, err)
		}
		o.defs[call.Key] = d
		o.defects[call.Key] = append([]stages.Defect(nil), r.Defects...)
	}
	return o.OrdinaryPath.Graph(call)
}

// TestFormsRecord records every Definition of every Graph form with stages'
// Recorder: each body records without an unsupported construct, has the
// published node count, passes its per-call values as patchable boundary
// scalars, and shows no defect. (The pair's auto boundary keeps upstream's
// 118 slots, where the running hidden state is two slots, input to the CSA
// attention and inout to the HCA MoE; both are tagged inout, or the recorder
// would report the body's write through the input twin.)
func TestFormsRecord(t *testing.T) {
	m := loadModel(t)
	for _, tc := range []struct {
		form  string
		nodes map[string]int
	}{
		{"pair", map[string]int{"csa_hca_layer:1": 743, "csa_hca_layer:0": 743}},
		{"blocks", map[string]int{"csa_attn_block": 88, "csa_moe_block:1": 291, "csa_moe_block:0": 291, "hca_attn_block": 72, "hca_moe_block": 291}},
		{"full", map[string]int{"swa_attn_block": 64, "hash_moe_l0_block": 291, "hash_moe_l1_block": 291, "csa_attn_block": 88, "csa_moe_block:1": 291, "csa_moe_block:0": 291, "hca_attn_block": 72, "hca_moe_block": 291}},
	} {
		t.Run(tc.form, func(t *testing.T) {
			o := &recordingOrch{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots()), t: t, defs: map[string]*stages.Definition{}, defects: map[string][]stages.Defect{}}
			if err := m.Run(o, tc.form); err != nil {
				t.Fatal(err)
			}
			if len(o.defs) != len(tc.nodes) {
				t.Errorf("%d Definitions, want %d", len(o.defs), len(tc.nodes))
			}
			for k, d := range o.defs {
				if want, ok := tc.nodes[k]; !ok || len(d.Nodes) != want {
					t.Errorf("%s: %d nodes, want %d", k, len(d.Nodes), want)
				}
				bs := 0
				for _, s := range d.Scalars {
					if s.Boundary {
						bs++
					}
				}
				if d.BoundaryScalars > 0 && bs == 0 {
					t.Errorf("%s: no node reads a boundary scalar", k)
				}
				for _, df := range o.defects[k] {
					t.Errorf("%s: %v", k, df)
				}
			}
		})
	}
}
