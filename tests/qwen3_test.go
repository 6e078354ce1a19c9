package tests

import (
	"encoding/json"
	"slices"
	"strings"
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
	// device wall for this step (docs/benchmarks-history.md, "Cost model calibration").
	const upstreamWallNs = 39.3e6
	if w := float64(passes[0].Device.SimNs); w < 0.75*upstreamWallNs || w > 1.25*upstreamWallNs {
		t.Errorf("simulated device wall %.2f ms, want within 25%% of upstream's measured %.1f ms", w/1e6, upstreamWallNs/1e6)
	}
}

// TestDefaultForms: without --form, run takes the model's own default (its
// form named full, else its last: Qwen3's graph), and compare without
// --forms every form of the model, in its order; DSv4's defaults are
// unchanged (full; eager, pair, blocks, full).
func TestDefaultForms(t *testing.T) {
	for _, tc := range []struct {
		model string
		run   string
		forms []string
	}{
		{qwen3, "graph", []string{"eager", "step", "graph"}},
		{dsv4, "full", []string{"eager", "pair", "blocks", "full", "step"}},
	} {
		out, stderr, code := runCLI(t, "run", tc.model, "--rounds", "1", "--skip-device", "--store", "off")
		if code != 0 || !strings.Contains(out, ", form "+tc.run+",") {
			t.Errorf("run %s: exit %d, stderr %q; want form %s in %q", tc.model, code, stderr, tc.run, firstLine(out))
		}
		out, stderr, code = runCLI(t, "compare", tc.model, "--rounds", "1", "--skip-device", "--store", "off", "--json")
		if code != 0 {
			t.Fatalf("compare %s: exit %d, stderr %q", tc.model, code, stderr)
		}
		var doc struct {
			Forms []struct {
				Form string `json:"form"`
			} `json:"forms"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range doc.Forms {
			got = append(got, f.Form)
		}
		if !slices.Equal(got, tc.forms) {
			t.Errorf("compare %s: forms %v, want %v", tc.model, got, tc.forms)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
