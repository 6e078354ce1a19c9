package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
	"github.com/hbg-dev/hbg/internal/refwriter"
	"github.com/hbg-dev/hbg/trace"
)

// The two upstream orchestrations written as models for issue 25, chosen
// for what the language had no word for: host reads that set loop counts
// and view offsets, a strided view, manual scopes with conditional
// explicit dependencies.
const (
	pagedAttention       = "testdata/models/paged_attention.yaml"
	pagedAttentionManual = "testdata/models/paged_attention_manual_scope.yaml"
)

// TestUpstreamModelForms: every form of both models, on two ranks, ends
// with its inline twin's digest and eager's, and all forms of a model on
// one digest; the Graph form records one Definition per valid length (7,
// 16 and 4 tokens: three) and replays the rest with patched boundary
// views.
func TestUpstreamModelForms(t *testing.T) {
	for _, tc := range []struct {
		path  string
		forms []string
		defs  []int64
	}{
		{pagedAttention, []string{"eager", "graph"}, []int64{0, 3}},
		{pagedAttentionManual, []string{"eager"}, []int64{0}},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			for i, r := range compareForms(t, tc.path, tc.forms) {
				if r.Counts.Definitions != tc.defs[i] || r.Counts.BoundaryMismatches != 0 {
					t.Errorf("%s: %d Definitions, %d boundary mismatches; want %d and none", r.Form, r.Counts.Definitions, r.Counts.BoundaryMismatches, tc.defs[i])
				}
			}
		})
	}
}

// TestUpstreamModelsExpand compares each model's expansion with a trace
// derived from upstream's C++ without the interpreter: pagedAttentionTrace
// follows paged_attention_orch.cpp (and its manual-scope sibling) loop by
// loop, reading the same context lengths and block table, and writes each
// host read, scope and task (kernel, arguments by root, offset, shape and
// strides, scalars and, in manual scopes, explicit dependencies).
func TestUpstreamModelsExpand(t *testing.T) {
	for _, tc := range []struct {
		path, form string
		manual     bool
	}{
		{pagedAttention, "eager", false},
		{pagedAttention, "graph", false},
		{pagedAttentionManual, "eager", true},
	} {
		t.Run(filepath.Base(tc.path)+"/"+tc.form, func(t *testing.T) {
			m, err := config.Load(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w := refwriter.New(&buf, m.EntryRoots(), m.Kernels())
			if err := m.Run(w, tc.form); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var e reftrace.Line
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatal(err)
				}
				if s := traceLine(&e, tc.manual); s != "" {
					got = append(got, s)
				}
			}
			want := pagedAttentionTrace(m.EntryRoots()[3].Data, tc.manual)
			if len(got) != len(want) {
				t.Errorf("%d events, the C++ makes %d", len(got), len(want))
			}
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("event %d:\n got %s\nwant %s", i, got[i], want[i])
				}
			}
		})
	}
}

// traceLine is one trace event as pagedAttentionTrace writes it ("" for
// the events it does not derive: Graph calls, the summary).
func traceLine(e *reftrace.Line, manual bool) string {
	switch e.Ev {
	case "get_tensor_data":
		return fmt.Sprintf("read %s%v = %d", e.Root, e.Idx, e.Value)
	case "scope_begin":
		return fmt.Sprintf("scope %d", e.Mode)
	case "scope_end":
		return "end"
	case "task":
		var b strings.Builder
		fmt.Fprintf(&b, "%d %s", e.ID, e.Name)
		for _, a := range e.Args {
			fmt.Fprintf(&b, " %s %s@%d%v", a.Tag, a.Root, a.Off, a.Shape)
			if a.Strides != nil {
				fmt.Fprintf(&b, "/%v", a.Strides)
			}
		}
		if len(e.Scalars) > 0 {
			fmt.Fprintf(&b, " scalars %v", e.Scalars)
		}
		if manual && len(e.Deps) > 0 {
			fmt.Fprintf(&b, " deps %v", e.Deps)
		}
		return b.String()
	}
	return ""
}

// pagedAttentionTrace is upstream's paged attention orchestration at
// CaseSmall1's sizes (16 heads of head_dim 16, block_size 16, q_tile 16,
// so q_loop 1), over three requests of 7, 16 and 100 tokens and the
// model's block table, written as its events. manual is the manual-scope
// variant's: each (request, q tile) scope is manual, and SF, PV and UP
// name their dependencies.
func pagedAttentionTrace(blockTable []int64, manual bool) []string {
	const (
		numHeads, headDim, blockSize, blockNum = 16, 16, 16, 8
		qTile, qLoop                           = 16, 1
		scaleValue                             = 1048576000 // fp32 0.25
	)
	contextLens := []int64{7, 16, 100}
	var out []string
	id := 0
	task := func(s string, a ...any) int {
		out = append(out, fmt.Sprintf("%d ", id)+fmt.Sprintf(s, a...))
		id++
		return id - 1
	}
	mode := 0
	if manual {
		mode = 1
	}
	for bIdx := int64(0); bIdx < 3; bIdx++ {
		curSeq := contextLens[bIdx]
		out = append(out, fmt.Sprintf("read context_lens[%d] = %d", bIdx, curSeq))
		bnThisBatch := (curSeq + blockSize - 1) / blockSize
		for qIdx := int64(0); qIdx < qLoop; qIdx++ {
			out = append(out, fmt.Sprintf("scope %d", mode))
			curOffset := bIdx*numHeads + qIdx*qTile
			qi := fmt.Sprintf("query@%d[%d %d]", curOffset*headDim, qTile, headDim)
			outView := fmt.Sprintf("out@%d[%d %d]", curOffset*headDim, qTile, headDim)
			allocTask := task("alloc o oi@0[%d %d] o li_update@0[%d] o mi_update@0[%d]", qTile, headDim, qTile, qTile)
			prevUpdate := -1
			for bn := int64(0); bn < bnThisBatch; bn++ {
				if !manual {
					out = append(out, "scope 0")
				}
				blk := blockTable[bIdx*blockNum+bn]
				out = append(out, fmt.Sprintf("read block_table[%d %d] = %d", bIdx, bn, blk))
				validLen := min(blockSize, curSeq-bn*blockSize)
				kj := fmt.Sprintf("key_cache@%d[%d %d]", blk*blockSize*headDim, blockSize, headDim)
				vj := fmt.Sprintf("value_cache@%d[%d %d]", blk*blockSize*headDim, blockSize, headDim)
				qk := task("QK i %s i %s o sij@0[%d %d]", qi, kj, qTile, blockSize)
				sijValid := fmt.Sprintf("sij@0[%d %d]", qTile, validLen)
				if validLen < blockSize {
					sijValid += fmt.Sprintf("/[%d 1]", blockSize)
				}
				deps := func(d ...int) string {
					if !manual {
						return ""
					}
					return fmt.Sprintf(" deps %v", d)
				}
				sf := task("SF i %s o pij_f16@0[%d %d] o mi@0[%d] o li@0[%d] scalars [%d]%s", sijValid, qTile, blockSize, qTile, qTile, scaleValue, deps(qk))
				pv := task("PV i pij_f16@0[%d %d] i %s o oi_tmp@0[%d %d]%s", qTile, blockSize, vj, qTile, headDim, deps(sf))
				isFirst, isLast := b2u(bn == 0), b2u(bn == bnThisBatch-1)
				upDeps := []int{pv}
				if prevUpdate >= 0 {
					upDeps = append(upDeps, prevUpdate)
				}
				if isLast == 1 {
					upDeps = append(upDeps, allocTask)
				}
				prevUpdate = task("UP i mi@0[%d] i li@0[%d] i oi_tmp@0[%d %d] x mi_update@0[%d] x li_update@0[%d] x oi@0[%d %d] x %s scalars [%d %d]%s",
					qTile, qTile, qTile, headDim, qTile, qTile, qTile, headDim, outView, isFirst, isLast, deps(upDeps...))
				if !manual {
					out = append(out, "end")
				}
			}
			out = append(out, "end")
		}
	}
	return out
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestPagedAttentionKeyHonest: the valid length a host read makes shapes
// the Graph body (the scores' view), so a form whose key leaves it out is a
// StructureError, while the block table's values, which only move the
// boundary's key and value views, need no key.
func TestPagedAttentionKeyHonest(t *testing.T) {
	b, err := os.ReadFile(pagedAttention)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	bad := strings.Replace(src, `kv_block: {key: "kv_block:{valid_len}"}`, `kv_block: {key: "kv_block"}`, 1)
	if bad == src {
		t.Fatal("the model's key changed")
	}
	m, err := config.Parse("pa.yaml", []byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	var se *config.StructureError
	if _, err := config.Validate(m); !errors.As(err, &se) || se.Param != "valid_len" || se.Block != "kv_block" {
		t.Fatalf("Validate: %v, want a StructureError on valid_len of kv_block", err)
	}
	m, err = config.Parse("pa.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if errs := m.GraphChecks(); len(errs) != 0 {
		t.Fatalf("GraphChecks of the shipped form: %v", errs)
	}
}

// TestPredicateOnModelData: a predicate over an entry tensor the model
// gives contents runs on those values on the device, in every form: of
// eight expert tasks gated on counts [0 3 0 1 0 0 2 0] > 0, three run.
func TestPredicateOnModelData(t *testing.T) {
	src := `model: gated
entry:
  tensors:
    - {name: counts, dtype: int32, shape: [8], data: [0, 3, 0, 1, 0, 0, 2, 0]}
    - {name: x, dtype: fp32, shape: [8, 16]}
kernels:
  - {name: expert, core: aiv, sig: ix}
blocks:
  e:
    params: [i]
    boundary:
      - {name: counts, tag: in}
      - {name: row, tag: inout, view: "x[i]"}
    body:
      - {k: expert, args: ["in counts", "inout row"], pred: "counts[i] > 0"}
program:
  body:
    - loop: {var: i, to: 8}
      body:
        - call: e
          with: {i: i}
forms:
  eager: {}
  graph: {graphs: {e: {key: "e{i}"}}}
`
	path := filepath.Join(t.TempDir(), "gated.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{"eager", "graph"} {
		out, stderr, code := runCLI(t, "run", path, "--form", form, "--rounds", "1", "--store", "off", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", form, code, stderr)
		}
		var rep trace.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Sim == nil {
			t.Fatalf("%s: no device run in %s", form, out)
		}
		if d := rep.Sim; d.Kernels != 3 || d.Skipped != 5 {
			t.Errorf("%s: %d kernels ran, %d predicated off; want 3 and 5", form, d.Kernels, d.Skipped)
		}
	}
}
