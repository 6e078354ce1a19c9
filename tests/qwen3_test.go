package tests

import (
	"testing"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
)

const qwen3 = "../config/models/qwen3_14b_decode.yaml"

// TestQwen3GraphForm runs upstream's Graph form of Qwen3-14B decode, five
// passes on one rank (as `hbgrun run ... --form graph --rounds 5`). Four
// body tasks of every layer wait on x_gamma0, a task before the first call:
// the calls pass it as an external dependency, so every call replays the
// one Definition (the reference README's figures: 7 ordinary + 40 Graph
// submissions, 11087 device tasks, a 277-node layer), recorded once; and
// the simulated device takes about as long as upstream's board did.
func TestQwen3GraphForm(t *testing.T) {
	m, err := config.Load(qwen3)
	if err != nil {
		t.Fatal(err)
	}
	rt := startRuntime(t, actors.Config{})
	passes := runPasses(t, rt, orchestration(m, "graph"), 5)
	recorded, nodes := 0, 0
	for i, p := range passes {
		c := p.Counts
		if c.HostSubmissions != 47 || c.OrdinaryTasks != 7 || c.GraphSubmissions != 40 || p.Device.Tasks != 11087 || c.Definitions != 1 {
			t.Errorf("round %d: host submissions %d (ordinary %d, Graph %d), device tasks %d, Definitions %d; want 47 (7, 40), 11087, 1",
				i, c.HostSubmissions, c.OrdinaryTasks, c.GraphSubmissions, p.Device.Tasks, c.Definitions)
		}
		if c.Demoted != 0 || c.BoundaryMismatches != 0 || c.FallbackCalls != 0 || len(p.Warnings) != 0 {
			t.Errorf("round %d: demoted %d, boundary mismatches %d, fallback calls %d, warnings %q", i, c.Demoted, c.BoundaryMismatches, c.FallbackCalls, p.Warnings)
		}
		recorded += p.Pass.BuiltDefinitions
		nodes += p.Pass.RecordedNodes
	}
	if recorded != 1 || nodes != 277 {
		t.Errorf("recorded %d Definitions of %d nodes over 5 rounds, want 1 of 277", recorded, nodes)
	}
	// The cost model's defaults are calibrated against upstream's measured
	// device wall for this step (BENCHMARKS.md, "Cost model calibration").
	const upstreamWallNs = 39.3e6
	if w := float64(passes[0].Device.SimNs); w < 0.75*upstreamWallNs || w > 1.25*upstreamWallNs {
		t.Errorf("simulated device wall %.2f ms, want within 25%% of upstream's measured %.1f ms", w/1e6, upstreamWallNs/1e6)
	}
}
