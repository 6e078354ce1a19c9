package actors

import (
	"testing"
	"time"

	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// TestRerunCountedOnce: a pass that falls back is orchestrated again inside
// its open graph_upload span; the rerun's time is host_orch's, so the
// control plane (host_orch + graph_upload + arena_h2d) counts it once and
// never exceeds the wall the caller waited. The rerun is made slow (a
// sleep inside the orchestration, not a wait for an actor) so that a
// double count cannot hide in the noise.
func TestRerunCountedOnce(t *testing.T) {
	const slow = 150 * time.Millisecond
	nested := func(o stages.Submitter, b *stages.Boundary) error {
		rowBody(o, b)
		if b.Scalars[0].Value == 1 {
			o.Graph(&stages.GraphCall{Key: "inner", Boundary: b.Tensors, Scalars: []uint64{7}, Body: rowBody})
		}
		return nil
	}
	orch := keysModel{keys: 2, calls: 1, body: nested}.orchestration("rerun-once")
	run, runs := orch.Run, 0
	orch.Run = func(o stages.Submitter) error {
		if runs++; runs == 2 {
			time.Sleep(slow) // the rerun
		}
		return run(o)
	}
	rt := newRuntime(t, Config{}, nil)
	t0 := time.Now()
	res := runPass(t, rt, orch, 0)
	wall := time.Since(t0)
	if runs != 2 || res.Counts.FallbackCalls == 0 {
		t.Fatalf("orchestrated %d times, counts %+v: want one rerun", runs, res.Counts)
	}
	orchNs, _ := res.Phase(trace.PhaseHostOrch)
	upload, _ := res.Phase(trace.PhaseGraphUpload)
	if orchNs < slow {
		t.Errorf("host_orch %v, want the rerun's %v in it", orchNs, slow)
	}
	if upload >= slow {
		t.Errorf("graph_upload %v holds the rerun's %v too", upload, slow)
	}
	if cp := res.ControlPlane(); cp > wall {
		t.Errorf("control plane %v (host_orch %v + graph_upload %v + arena_h2d) is more than the pass's wall %v", cp, orchNs, upload, wall)
	}
}
