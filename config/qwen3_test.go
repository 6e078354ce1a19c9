package config_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
)

const (
	qwen3Path   = "models/qwen3_14b_decode.yaml"
	qwen3RefDir = "testdata/qwen3_14b_decode"
)

func loadQwen3(t testing.TB) *config.Model { t.Helper(); return mustLoad(t, qwen3Path) }

// TestQwen3GraphMatchesReference expands upstream's Graph form of Qwen3-14B
// decode and compares it with the reference trace: every task (kind,
// kernel, block_num, arguments by root identity, scalars, explicit deps in
// order, predicate) and all 23563 fanin edges from stages' own TensorMap;
// the 40 Graph calls with their key and 26 boundary slots; every scope.
// (The reference numbers an argument's boundary slot only where upstream
// passes the boundary tensor itself, not an arena view of it, so bslot is
// not compared here.)
func TestQwen3GraphMatchesReference(t *testing.T) {
	gotEv := expandFile(t, qwen3Path, "graph")
	wantEv := readTrace(t, filepath.Join(qwen3RefDir, "graph.jsonl.gz"))
	compareTasks(t, reftrace.Tasks(gotEv), reftrace.Tasks(wantEv), 23563)
	compareEvents(t, gotEv, wantEv)
	compareGraphCalls(t, gotEv, wantEv, 40, 1)
	for _, e := range graphCalls(gotEv) {
		if len(e.Boundary) != 26 || len(e.Scalars) != 0 {
			t.Fatalf("call %s#%d: %d boundary tensors and %d scalars, want 26 and none", e.Key, e.Inst, len(e.Boundary), len(e.Scalars))
		}
	}
	if n := len(reftrace.Events(gotEv, "scope_begin")); n != 84 {
		t.Errorf("%d scopes, want 84", n)
	}
}

// TestQwen3EagerMatchesReference: the form with no Graph submits the same
// tasks with the same edges (the inline twin of the graph form).
func TestQwen3EagerMatchesReference(t *testing.T) {
	gotEv := expandFile(t, qwen3Path, "eager")
	wantEv := readTrace(t, filepath.Join(qwen3RefDir, "graph.jsonl.gz"))
	compareTasks(t, reftrace.Tasks(gotEv), reftrace.Tasks(wantEv), 23563)
	if n := len(graphCalls(gotEv)); n != 0 {
		t.Errorf("%d Graph calls in the eager form", n)
	}
}

// TestQwen3Validates: validate's summary of every form, and no Graph check
// error (the layer body's structure depends on nothing outside its key).
func TestQwen3Validates(t *testing.T) {
	m := loadQwen3(t)
	sum, err := config.Validate(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []config.FormSummary{
		{Name: "eager", Tasks: 11087, Edges: 23563, HostSubmits: 11087},
		// The step: one Graph call, the layers its children.
		{Name: "step", Tasks: 11087, Edges: 23563, HostSubmits: 1, GraphCalls: 1},
		{Name: "graph", Tasks: 11087, Edges: 23563, HostSubmits: 47, GraphCalls: 40},
	}
	for i, w := range want {
		if sum.Forms[i] != w {
			t.Errorf("form %d: %+v, want %+v", i, sum.Forms[i], w)
		}
	}
}

// TestQwen3FileIsTheSizeOfTheProblem: the model file is at most 300 lines,
// and no run of more than four ops differs only in a number (a loop says
// it, as upstream's source does).
func TestQwen3FileIsTheSizeOfTheProblem(t *testing.T) {
	lines := strings.Split(readFile(t, qwen3Path), "\n")
	if len(lines) > 300 {
		t.Errorf("%d lines, want at most 300", len(lines))
	}
	digits := regexp.MustCompile(`[0-9]+`)
	inOps := false
	run, prev := 0, ""
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "blocks:") || strings.HasPrefix(l, "program:"):
			inOps = true
		case strings.HasPrefix(l, "forms:") || strings.HasPrefix(l, "kernels:"):
			inOps = false
		}
		n := digits.ReplaceAllString(strings.TrimSpace(l), "#")
		if !inOps || !strings.HasPrefix(n, "- ") || n != prev {
			run, prev = 1, n
			continue
		}
		if run++; run > 4 {
			t.Errorf("line %d: %d ops in a row that differ only in a number: %s", i+1, run, strings.TrimSpace(l))
		}
	}
}
