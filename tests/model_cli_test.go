package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/trace"
)

// probeModel is a small model written from config/doc.go alone, not from
// the shipped models: two layers, a task list filled in a loop with step,
// a predicate, a let, ifs on a param, task params, and forms that make the
// layers, the tiles or both Graphs.
const probeModel = "testdata/models/probe_mlp_decode.yaml"

// Every form of the probe model runs to eager's digest, on two ranks.
func TestProbeModelForms(t *testing.T) {
	if _, stderr, code := runCLI(t, "validate", probeModel); code != 0 {
		t.Fatalf("validate: exit %d: %s", code, stderr)
	}
	for _, form := range []string{"eager", "layer", "tile", "all", "one_layer"} {
		out, stderr, code := runCLI(t, "run", probeModel, "--form", form, "--rounds", "3", "--ranks", "2", "--store", "off", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", form, code, stderr)
		}
		var rep trace.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		if rep.Golden == nil || !rep.Golden.Match || !rep.Golden.EagerMatch {
			t.Fatalf("%s: golden %+v; want a match with the inline twin and eager", form, rep.Golden)
		}
	}
}

// TestOutsideModels: models an outside tester wrote from the README and
// config/doc.go alone, to break hbg (a 12-stage pipeline with variants,
// zero-trip and nested loops, manual scopes with explicit deps, nested auto
// blocks, a 1-element and a 2^30-element tensor; 48 Definitions with
// external task deps, MIX tasks, predicates and touch hints). Every form,
// on two ranks, ends with its inline twin's digest and eager's, and all
// forms of a model end on one digest.
func TestOutsideModels(t *testing.T) {
	for _, tc := range []struct {
		path  string
		forms []string
	}{
		{"testdata/models/outside_pipe.yaml", []string{"eager", "per_stage", "by_kind", "quads", "nested"}},
		{"testdata/models/outside_routed.yaml", []string{"eager", "each", "by_heavy", "huge_count"}},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			compareForms(t, tc.path, tc.forms)
		})
	}
}

// compareForms runs `hbgrun compare` on two ranks over the model at path
// and checks that it reports exactly forms, in order, each ending with its
// inline twin's digest and eager's, all on the first form's digest. It
// returns the forms' reports for the caller's own checks.
func compareForms(t *testing.T, path string, forms []string) []trace.Report {
	t.Helper()
	out, stderr, code := runCLI(t, "compare", path, "--rounds", "2", "--ranks", "2", "--store", "off", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Forms []trace.Report `json:"forms"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Forms) != len(forms) {
		t.Fatalf("%d forms, want %v", len(doc.Forms), forms)
	}
	for i, r := range doc.Forms {
		g := r.Golden
		switch {
		case r.Form != forms[i]:
			t.Errorf("form %d is %s, want %s", i, r.Form, forms[i])
		case g == nil || !g.Match || !g.EagerMatch:
			t.Errorf("%s: golden %+v; want a match with the inline twin and eager", r.Form, g)
		case g.Digest != doc.Forms[0].Golden.Digest:
			t.Errorf("%s: digest %016x, eager's %016x", r.Form, g.Digest, doc.Forms[0].Golden.Digest)
		}
	}
	return doc.Forms
}

// A model whose program fails where it is interpreted (here a loop's
// task-list slice past the list's end, in a Graph body) is a user's
// mistake, reported before any pass as validate reports it: exit 2, one
// line naming file:line and the value, whatever the form.
func TestRunBadProgramIsUsageError(t *testing.T) {
	src, err := os.ReadFile(probeModel)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "{var: t, from: 0, to: tiles, step: 2}", "{var: t, from: 1, to: tiles, step: 2}", 1)
	if bad == string(src) {
		t.Fatal("the probe model changed: no loop to break")
	}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	want := path + `:61: deps "ups[t:+2]": elements [3, 5) of task list ups, which has 4`
	for _, args := range [][]string{
		{"validate", path},
		{"run", path, "--form", "layer", "--rounds", "1", "--store", "off"},
		{"run", path, "--form", "eager", "--rounds", "1", "--store", "off"},
		{"compare", path, "--forms", "eager,all", "--rounds", "1", "--store", "off"},
	} {
		out, stderr, code := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %q", args, code, out, stderr, want)
		}
	}
}
