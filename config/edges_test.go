package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// edgeBomb is issue 34's model at a size a test runs: n tasks that each
// write a row of x, then n that each read all of x: n² dependency edges
// from a model of a few lines.
func edgeBomb(n string) string {
	return strings.ReplaceAll(`model: edge_bomb
entry:
  tensors:
    - {name: x, dtype: fp32, shape: [N, 16], role: activation}
    - {name: y, dtype: fp32, shape: [N, 16], role: output, out: true}
kernels:
  - {name: w, core: aiv, sig: ix}
  - {name: r, core: aiv, sig: ix}
program:
  body:
    - loop: {var: i, to: N}
      body:
        - {k: w, args: ["in y[i]", "inout x[i]"]}
    - loop: {var: j, to: N}
      body:
        - {k: r, args: ["in x", "inout y[j]"]}
forms:
  eager: {}
`, "N", n)
}

// TestEdgeBoundRefused: a pass past its bound on dependency edges is
// refused as it is expanded on the host (validate, and every run, which
// validates first), naming the task op that crossed it, with
// stages.ErrTooManyEdges; validate reports the edges of a pass within it.
// On the code before, validate said ok and the pass built n² edges.
func TestEdgeBoundRefused(t *testing.T) {
	src := edgeBomb("300") // 90,000 edges
	m, err := config.Parse("bomb.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := config.Validate(m)
	if err != nil {
		t.Fatal(err)
	}
	if e := sum.Forms[0].Edges; e < 300*300 || e > 300*300+600 {
		t.Fatalf("validate counted %d edges, want about 90,000", e)
	}
	for name, limit := range map[string]func(*config.Model){
		"the user's bound": func(m *config.Model) { m.LimitEdges(50_000) },
		"the model's own":  nil,
	} {
		src := src
		if limit == nil {
			src = strings.Replace(src, "entry:", "max_edges: 50000\nentry:", 1)
		}
		m, err := config.Parse("bomb.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if limit != nil {
			limit(m)
		}
		_, err = config.Validate(m)
		if !errors.Is(err, stages.ErrTooManyEdges) {
			t.Fatalf("%s: %v, want ErrTooManyEdges", name, err)
		}
		wantConfigError(t, err, "bomb.yaml", lineOf(src, `{k: r, args: ["in x"`), []string{`max_edges "50000"`, "form eager", "past the bound of 50000", "--max-edges"})
	}
}

// TestModelBoundsOnlyLower: a model's max_tasks and max_edges lower the
// process's bounds but never raise them (a node's rule, locally too): a
// model that allows itself 10^12 tasks gets the default, a command's flag
// (LimitTasks, LimitEdges) the value it says.
func TestModelBoundsOnlyLower(t *testing.T) {
	src := strings.Replace(edgeBomb("4"), "entry:", "max_tasks: 1000000000000\nmax_edges: 1000000000000\nentry:", 1)
	m, err := config.Parse("b.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.MaxTasks(); got != config.DefaultMaxTasks {
		t.Errorf("max_tasks: 10^12 gives a bound of %d, want the default %d", got, config.DefaultMaxTasks)
	}
	if got := m.MaxEdges(); got != stages.DefaultMaxEdges {
		t.Errorf("max_edges: 10^12 gives a bound of %d, want the default %d", got, stages.DefaultMaxEdges)
	}
	m.LimitTasks(1 << 30)
	m.LimitEdges(1 << 30)
	if m.MaxTasks() != 1<<30 || m.MaxEdges() != 1<<30 {
		t.Errorf("a command's bounds: %d tasks, %d edges, want 2^30 each", m.MaxTasks(), m.MaxEdges())
	}
	for _, bad := range []string{"0", "-3", "x"} {
		_, err := config.Parse("b.yaml", []byte(strings.Replace(edgeBomb("4"), "entry:", "max_edges: "+bad+"\nentry:", 1)))
		if err == nil || !strings.Contains(err.Error(), "max_edges") {
			t.Errorf("max_edges: %s: %v, want an error naming max_edges", bad, err)
		}
	}
}
