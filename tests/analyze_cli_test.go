package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/trace"
)

// runAuto runs a model's form auto (hbgrun analyze's proposal, calibrated
// on this machine first) with the device on and returns its report.
func runAuto(t *testing.T, model string, rounds string) *trace.Report {
	t.Helper()
	out, stderr, code := runCLI(t, "run", model, "--form", "auto", "--rounds", rounds, "--store", "off", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "hbgrun: form auto: ") {
		t.Errorf("stderr does not say what auto chose: %s", stderr)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

// TestAutoDSv4: DSv4's form auto ends with its inline twin's and eager's
// digest, with at most the 129 host submissions of the hand-written full
// form (43 layers covered, 8 Definitions).
func TestAutoDSv4(t *testing.T) {
	rep := runAuto(t, dsv4, "3")
	g := rep.Golden
	if g == nil || !g.Match || !g.EagerMatch {
		t.Fatalf("golden %+v: want a match with the inline twin and eager", g)
	}
	if n := rep.Counts.HostSubmissions; n > 129 || rep.Counts.DeviceTasks != 15972 {
		t.Errorf("%d host submissions, %d device tasks; want at most 129, and 15972", n, rep.Counts.DeviceTasks)
	}
	if rep.Counts.BoundaryMismatches != 0 || rep.Counts.Demoted != 0 {
		t.Errorf("%d boundary mismatches, %d demoted: a class the analysis calls shareable was refused (a bug of the analysis)", rep.Counts.BoundaryMismatches, rep.Counts.Demoted)
	}
}

// TestAutoQwen3: on Qwen3, auto finds the layer body: one Definition, 40
// replays a pass, 47 host submissions, and its inline twin's digest
// (Qwen3's eager form races on purpose, so only the twin is compared).
func TestAutoQwen3(t *testing.T) {
	rep := runAuto(t, qwen3, "2")
	c := rep.Counts
	if c.Definitions != 1 || c.GraphSubmissions != 40 || c.HostSubmissions != 47 {
		t.Errorf("%d Definitions, %d Graph calls and %d host submissions a pass; want 1, 40, 47", c.Definitions, c.GraphSubmissions, c.HostSubmissions)
	}
	if g := rep.Golden; g == nil || !g.Match {
		t.Errorf("golden %+v: want the inline twin's digest", g)
	}
}

// TestAutoTestModels: on every model of testdata/models, the auto form
// matches golden (its twin and eager).
func TestAutoTestModels(t *testing.T) {
	paths, err := filepath.Glob("testdata/models/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatal(paths, err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			rep := runAuto(t, p, "2")
			if g := rep.Golden; g == nil || !g.Match || !g.EagerMatch {
				t.Errorf("golden %+v: want a match with the inline twin and eager", g)
			}
			if rep.Counts.BoundaryMismatches != 0 {
				t.Errorf("%d boundary mismatches: a bug of the analysis", rep.Counts.BoundaryMismatches)
			}
		})
	}
}

// TestAnalyzeCLI: analyze prints the seed's table; --json is the same map;
// --emit-form prints a forms: entry the model file accepts once pasted; a
// step where nothing repeats gets no Graph, saying why; expand and
// validate take --form auto.
func TestAnalyzeCLI(t *testing.T) {
	out, stderr, code := runCLI(t, "analyze", dsv4)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"block         occurrences  static sites  nodes  boundary  can share one Definition?",
		"hash_moe      2            2             291    30+10     no: 2 classes (1+1), told apart by variant",
		"cost model (ns): submit_task ",
		"calibrated on this machine",
		"  auto:\n    params: {l1_shares_l0: 1, l42_replays: 1}\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("analyze's output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runCLI(t, "analyze", dsv4, "--json", "--no-calibrate")
	var doc struct {
		Tasks  int `json:"tasks"`
		Blocks []struct {
			Block       string `json:"block"`
			Occurrences int    `json:"occurrences"`
			Shareable   bool   `json:"shareable"`
		} `json:"blocks"`
		Proposal any `json:"proposal"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if doc.Tasks != 15971 || len(doc.Blocks) != 7 || doc.Blocks[2].Block != "csa_attn" || doc.Blocks[2].Occurrences != 21 || !doc.Blocks[2].Shareable || doc.Proposal != nil {
		t.Errorf("--json: %+v", doc)
	}

	emit, stderr, code := runCLI(t, "analyze", dsv4, "--emit-form", "mine")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	src, err := os.ReadFile(dsv4)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(src, []byte("\nforms:\n"))
	edited := append(append(append([]byte{}, src[:i+len("\nforms:\n")]...), emit...), src[i+len("\nforms:\n"):]...)
	m, err := config.Parse("edited.yaml", edited)
	if err != nil {
		t.Fatalf("the emitted form does not load pasted under forms: %v\n%s", err, emit)
	}
	if errs := m.FormChecks("mine"); len(errs) > 0 {
		t.Errorf("the emitted form fails the static checks: %v", errs)
	}

	// With measured costs a one-task block's saving is noise around zero
	// (TestNothingRepeats decides on fixed ones): amortised over one pass,
	// no recording pays on any machine.
	out, _, code = runCLI(t, "analyze", "../analyze/testdata/once.yaml", "--horizon", "1")
	if code != 0 || !strings.Contains(out, "proposed form (recordings amortised over 1 passes): no Graph") || strings.Count(out, "break-even not reached") < 3 {
		t.Errorf("exit %d; a step where nothing repeats:\n%s", code, out)
	}

	out, stderr, code = runCLI(t, "expand", probeModel, "--form", "auto")
	if code != 0 || !strings.Contains(out, `"ev":"summary"`) {
		t.Errorf("expand --form auto: exit %d: %s", code, stderr)
	}
	out, stderr, code = runCLI(t, "validate", probeModel, "--form", "auto")
	if code != 0 || !strings.Contains(out, "auto ") {
		t.Errorf("validate --form auto: exit %d: %s%s", code, out, stderr)
	}
	if _, _, code = runCLI(t, "validate", probeModel, "--form", "full"); code != 2 {
		t.Errorf("validate --form full: exit %d, want 2", code)
	}
}
