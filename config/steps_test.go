package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// stepsModel is a model whose steps change: a layer whose loop count (its
// chunks, from the longest context) is in its Graph key.
const stepsModel = `model: stepping
constants: {block: 64}
entry:
  tensors:
    - {name: x, dtype: fp32, shape: [16]}
kernels:
  - {name: act, core: aiv}
blocks:
  layer:
    params: [chunks]
    tensors: [h]
    boundary:
      - {name: h, tag: inout, dtype: fp32, shape: [16]}
    body:
      - loop: {var: c, to: chunks}
        body:
          - {k: act, args: ["inout h"], scalars: [c]}
program:
  params: {chunks: 8, bucketed: 0}
  body:
    - alloc: ["hid fp32[16]"]
    - call: layer
      with: {chunks: chunks, h: hid}
steps:
  seed: 7
  requests: {slots: 4, batch: [1, 2, 4], context: [10, 400], decode: [2, 20]}
  params:
    chunks: "bucketed ? ((max_context + 255) / 256 * 4) : (max_context + block - 1) / block"
forms:
  eager: {}
  graph:
    graphs:
      layer: {key: "layer_c{chunks}"}
  bucketed:
    params: {bucketed: 1}
    graphs:
      layer: {key: "layer_c{chunks}"}
`

// keySubmitter runs a pass on the ordinary path, noting each Graph call's key.
type keySubmitter struct {
	*stages.OrdinaryPath
	keys []string
}

func (k *keySubmitter) Graph(call *stages.GraphCall) stages.TaskID {
	k.keys = append(k.keys, call.Key)
	return k.OrdinaryPath.Graph(call)
}

// roundKeys runs rounds of form and returns each round's Graph keys.
func roundKeys(t *testing.T, m *config.Model, form string, rounds int) []string {
	t.Helper()
	orch, err := m.Orchestration(form)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for r := range rounds {
		o := orch.Round(r)
		if o.Name != orch.Name {
			t.Fatalf("round %d: orchestration %q, want the model's %q (its full_keys)", r, o.Name, orch.Name)
		}
		k := &keySubmitter{OrdinaryPath: stages.NewOrdinaryPath(o.Entry)}
		if err := o.Run(k); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		out = append(out, strings.Join(k.keys, ","))
	}
	return out
}

func TestStepsChangeKeys(t *testing.T) {
	m, err := config.Parse("stepping.yaml", []byte(stepsModel))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Steps() {
		t.Fatal("Steps() = false for a model with steps:")
	}
	exact := roundKeys(t, m, "graph", 200)
	again, err := config.Parse("stepping.yaml", []byte(stepsModel))
	if err != nil {
		t.Fatal(err)
	}
	if b := roundKeys(t, again, "graph", 200); strings.Join(b, " ") != strings.Join(exact, " ") {
		t.Fatal("two loads of one model draw other rounds: the schedule is not seeded")
	}
	distinct := func(ks []string) int {
		seen := map[string]bool{}
		for _, k := range ks {
			seen[k] = true
		}
		return len(seen)
	}
	bucketed := roundKeys(t, m, "bucketed", 200)
	ne, nb := distinct(exact), distinct(bucketed)
	if ne < 3 {
		t.Errorf("form graph met %d keys over 200 rounds, want at least 3 (contexts that grow and requests that start short change the chunk count)", ne)
	}
	if nb >= ne || nb < 1 {
		t.Errorf("form bucketed met %d keys, form graph %d: want fewer keys, a key per bucket", nb, ne)
	}
	for r, k := range bucketed {
		var c int
		if _, err := fmt.Sscanf(k, "layer_c%d", &c); err != nil || c%4 != 0 {
			t.Fatalf("round %d: bucketed key %q, want a chunk count that is a multiple of 4", r, k)
		}
	}
	// Round r's params are the round's: the max context of its batch.
	p0, err := m.StepParams("graph", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("layer_c%d", p0["chunks"]); exact[0] != want {
		t.Errorf("round 0 key %q, want %q from StepParams", exact[0], want)
	}
	// Run (no round) runs round 0.
	orch, _ := m.Orchestration("graph")
	k := &keySubmitter{OrdinaryPath: stages.NewOrdinaryPath(orch.Entry)}
	if err := orch.Run(k); err != nil || k.keys[0] != exact[0] {
		t.Errorf("Run: keys %v, err %v; want round 0's %q", k.keys, err, exact[0])
	}
}

func TestStepsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, at string
		want               []string
	}{
		{"unknown steps key", "  seed: 7", "  seed: 7\n  sede: 8", "sede: 8", []string{`steps "sede"`, "unknown key"}},
		{"missing requests", "  requests: {slots: 4, batch: [1, 2, 4], context: [10, 400], decode: [2, 20]}\n", "", "  seed: 7", []string{"steps.requests", "missing"}},
		{"batch past the slots", "batch: [1, 2, 4]", "batch: [1, 2, 5]", "batch: [1, 2, 5]", []string{`steps.requests.batch "5"`, "want a batch size of 1 to slots (4)"}},
		{"context backwards", "context: [10, 400]", "context: [400, 10]", "context: [400, 10]", []string{"steps.requests.context", "want [min, max]"}},
		{"decode not a pair", "decode: [2, 20]", "decode: [2]", "decode: [2]", []string{"steps.requests.decode", "want [min, max]"}},
		{"zero slots", "slots: 4,", "slots: 0,", "slots: 0,", []string{`steps.requests.slots "0"`, "want 1 to"}},
		{"not a program param", "    chunks: \"bucketed", "    chunk: \"bucketed", "chunk: \"bucketed", []string{`steps.params "chunk"`, "not a program param", "chunks, bucketed"}},
		{"unknown name", "(max_context + block - 1) / block\"", "(max_ctx + block - 1) / block\"", "max_ctx", []string{"steps.params.chunks", `undefined name "max_ctx"`, "max_context"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(stepsModel, tc.old) {
				t.Fatalf("test case: %q not in the model", tc.old)
			}
			src := strings.Replace(stepsModel, tc.old, tc.new, 1)
			_, err := config.Parse("stepping.yaml", []byte(src))
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse: %v, want a *config.Error", err)
			}
			line := strings.Count(src[:strings.Index(src, tc.at)], "\n") + 1
			if ce.Line != line {
				t.Errorf("error at line %d, want %d (%q): %v", ce.Line, line, tc.at, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestServingModels runs the shipped serving models' rounds: each form
// meets new keys as the rounds go, the bucketed form fewer.
func TestServingModels(t *testing.T) {
	for _, tc := range []struct {
		file, exact string
		minExact    int
	}{
		{"models/qwen3_14b_decode_serving.yaml", "graph", 3},
		{"models/dsv4_flash_decode_serving.yaml", "full", 3},
	} {
		m, err := config.Load(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.Validate(m); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		keys := map[string]map[string]bool{}
		for _, form := range []string{tc.exact, "bucketed"} {
			keys[form] = map[string]bool{}
			for r := 0; r < 300; r++ {
				ps, err := m.StepParams(form, r)
				if err != nil {
					t.Fatal(err)
				}
				keys[form][fmt.Sprint(ps)] = true
			}
		}
		if n := len(keys[tc.exact]); n < tc.minExact {
			t.Errorf("%s form %s: %d distinct rounds' params over 300 rounds, want at least %d", tc.file, tc.exact, n, tc.minExact)
		}
		if len(keys["bucketed"]) >= len(keys[tc.exact]) {
			t.Errorf("%s: bucketed %d distinct params, %s %d: want fewer", tc.file, len(keys["bucketed"]), tc.exact, len(keys[tc.exact]))
		}
	}
}
