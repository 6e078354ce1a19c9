package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
	"github.com/hbg-dev/hbg/internal/refwriter"
	"github.com/hbg-dev/hbg/stages"
)

const hostDataModel = "../config/testdata/api/host_data.yaml"

// TestHostDataOnTheDevice: a program whose two out_existing writers of b
// are ordered only by the host's waits between them (set_tensor_data,
// get_tensor_data) runs to golden on two ranks with no race; without the
// host's accesses the same two writers are a write-write race.
func TestHostDataOnTheDevice(t *testing.T) {
	for _, r := range compareForms(t, hostDataModel, []string{"eager"}) {
		if g := r.Golden; g.Races != 0 || g.ReferenceRaces != 0 {
			t.Errorf("%s: %d races (reference %d), want none", r.Form, g.Races, g.ReferenceRaces)
		}
	}
	src, err := os.ReadFile(hostDataModel)
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Replace(string(src), `    - write: {"b[0]": 55}
    - read: {ext_war: "b[0]"}
    - write: {"check[8]": ext_war}
`, "", 1)
	if cut == string(src) {
		t.Fatal("the model's host accesses between the writers are not where the test cuts")
	}
	p := filepath.Join(t.TempDir(), "no_host.yaml")
	if err := os.WriteFile(p, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "run", p, "--rounds", "1", "--store", "off")
	if code == 0 || !strings.Contains(out+stderr, "write-write") {
		t.Errorf("without the host's waits: exit %d, want a write-write race:\n%s%s", code, out, stderr)
	}
}

// TestAvailableAicoreCounts: upstream's available_aicore_counts
// orchestration, written from its C++, expands to what the C++ submits:
// one MIX task of its three kernels (ids 0, 1, 2), block_num the die's
// cluster count, sync_start, over blocks; then the two counts written into
// shape (set_tensor_data, no wait: shape has no producer); and runs to
// golden.
func TestAvailableAicoreCounts(t *testing.T) {
	const path = "testdata/models/available_aicore_counts.yaml"
	m, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := refwriter.New(&buf, m.EntryRoots(), m.Kernels())
	if err := m.Run(w, "eager"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e reftrace.Line
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		switch e.Ev {
		case "task":
			got = append(got, fmt.Sprintf("%s k%v bn%d sync%d %s %s", e.Kind, e.K, e.BlockNum, e.Sync, e.Args[0].Tag, e.Args[0].Root))
		case "set_tensor_data":
			got = append(got, fmt.Sprintf("set %s%v=%d", e.Root, e.Idx, e.Value))
		}
	}
	c := stages.A2A3Clusters
	want := []string{fmt.Sprintf("mix k[0 1 2] bn%d sync1 x blocks", c), fmt.Sprintf("set shape[0]=%d", c), fmt.Sprintf("set shape[1]=%d", c*stages.A2A3AIVPerCluster)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expansion\n%v, want\n%v", got, want)
	}
	compareForms(t, path, []string{"eager"})
}

// TestManualDepForms: an output tracked by hand through manual_dep views
// (a Graph boundary slot among them) runs to golden in every form, its
// Definitions recorded once and replayed with the flag in their layouts.
func TestManualDepForms(t *testing.T) {
	reps := compareForms(t, "../config/testdata/api/manual_dep.yaml", []string{"eager", "graph"})
	if c := reps[1].Counts; c.Definitions != 1 || c.BoundaryMismatches != 0 {
		t.Errorf("graph: %d Definitions, %d boundary mismatches; want 1 and none", c.Definitions, c.BoundaryMismatches)
	}
	for _, r := range reps {
		if r.Golden.Races != 0 {
			t.Errorf("%s: %d races, want none", r.Form, r.Golden.Races)
		}
	}
}

// TestMixedKernelForms: MIX tasks of three different kernels, of AIV0 +
// AIV1 without an AIC, and of AIC + AIV0 alone run on the device to golden
// in every form.
func TestMixedKernelForms(t *testing.T) {
	compareForms(t, "../config/testdata/api/mixed_kernels.yaml", []string{"eager", "graph"})
}

// hostDataGraphs writes b between two calls of a block whose tasks write b
// with out_existing: only the host's wait orders the second call after
// the first, as a Graph replay (and its outer task) and inline alike.
const hostDataGraphs = `model: host_data_graphs
entry:
  tensors:
    - {name: b, dtype: fp32, shape: [64]}
kernels:
  - {name: fill, core: aiv, sig: o}
blocks:
  g:
    params: [c]
    boundary: [{name: t, tag: out_existing, view: "b[c * 16:+32]"}]
    body:
      - {k: fill, args: ["out_existing t"]}
program:
  body:
    - loop: {var: i, to: 3}
      body:
        - call: g
          with: {c: 1}
        - write: {"b[20]": i}
        - read: {v: "b[20]"}
forms:
  eager: {}
  graph: {graphs: {g: {key: g}}}
`

// TestHostDataGraphForms: host accesses between Graph calls order them on
// the device in every form: no race, golden, one Definition replayed.
func TestHostDataGraphForms(t *testing.T) {
	p := filepath.Join(t.TempDir(), "host_data_graphs.yaml")
	if err := os.WriteFile(p, []byte(hostDataGraphs), 0o644); err != nil {
		t.Fatal(err)
	}
	reps := compareForms(t, p, []string{"eager", "graph"})
	for _, r := range reps {
		if r.Golden.Races != 0 {
			t.Errorf("%s: %d races, want none", r.Form, r.Golden.Races)
		}
	}
	if c := reps[1].Counts; c.Definitions != 1 || c.BoundaryMismatches != 0 {
		t.Errorf("graph: %d Definitions, %d mismatches; want 1 and none", c.Definitions, c.BoundaryMismatches)
	}
	cut := strings.Replace(hostDataGraphs, "        - write: {\"b[20]\": i}\n        - read: {v: \"b[20]\"}\n", "", 1)
	if err := os.WriteFile(p, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "run", p, "--form", "graph", "--rounds", "1", "--store", "off")
	if code == 0 || !strings.Contains(out+stderr, "write-write") {
		t.Errorf("without the host's accesses: exit %d, want a write-write race:\n%s%s", code, out, stderr)
	}
}
