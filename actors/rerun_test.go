package actors

import (
	"testing"
	"time"

	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// TestRerunCountedOnce: a pass that falls back is orchestrated again inside
// its open graph_upload span, and the shells feed the clock readings to the
// pass's stages.PhaseClock, whose arithmetic (a rerun counted once, in
// host_orch) the pass scripts pin with explicit times (testdata/pass/clock).
// This checks the wiring, with no sleep: the rerun's own duration, read
// inside it, is in host_orch, the control plane is within the wall the
// caller waited, and each phase the clock sets is measured.
func TestRerunCountedOnce(t *testing.T) {
	nested := func(o stages.Submitter, b *stages.Boundary) error {
		rowBody(o, b)
		if b.Scalars[0].Value == 1 {
			// A nested Graph over z, which the body neither received nor
			// allocated: no child Definition can bind it (unsupported).
			z := stages.Arg{Tag: stages.TagInput, View: stages.NewView(2, 0, stages.FP32, 16)}
			o.Graph(&stages.GraphCall{Key: "inner", Boundary: []stages.Arg{z, b.Tensors[1]}, Scalars: []uint64{7}, Body: rowBody})
		}
		return nil
	}
	orch := keysModel{keys: 2, calls: 1, body: nested}.orchestration("rerun-once")
	run, runs := orch.Run, 0
	var rerunNs int64
	orch.Run = func(o stages.Submitter) error {
		runs++
		t0 := trace.Now()
		err := run(o)
		if runs == 2 {
			rerunNs = trace.Now() - t0
		}
		return err
	}
	rt := newRuntime(t, Config{}, nil)
	t0 := time.Now()
	res := runPass(t, rt, orch, 0)
	wall := time.Since(t0)
	if runs != 2 || res.Counts.FallbackCalls == 0 {
		t.Fatalf("orchestrated %d times, counts %+v: want one rerun", runs, res.Counts)
	}
	for _, ph := range []trace.Phase{trace.PhaseArgs, trace.PhaseHostOrch, trace.PhaseGraphUpload, trace.PhaseArenaH2D} {
		if !res.Pass.Has(ph) {
			t.Errorf("%v not measured", ph)
		}
	}
	if orchNs, _ := res.Phase(trace.PhaseHostOrch); orchNs < time.Duration(rerunNs) {
		t.Errorf("host_orch %v, want the rerun's %v in it", orchNs, time.Duration(rerunNs))
	}
	if cp := res.ControlPlane(); cp > wall {
		t.Errorf("control plane %v is more than the pass's wall %v", cp, wall)
	}
}
