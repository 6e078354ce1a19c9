package config_test

import (
	"reflect"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
	"github.com/hbg-dev/hbg/stages"
)

// TestHostExpressions: what upstream's host code computes with besides
// its args: constant arrays (static const int32_t ids[] = {...}; ids[i]),
// dims from an entry tensor's metadata (orch_args.tensor(i).ref().shapes[d]
// is shape(TENSOR, d)), and the die's core counts
// (rt_available_cluster_count(), rt_available_aiv_count()).
func TestHostExpressions(t *testing.T) {
	src := `model: hostexpr
constants: {ids: [3, 1, 4, 1, 5], TILE: 4}
entry:
  tensors:
    - {name: x, dtype: fp32, shape: [6, 16]}
kernels:
  - {name: up, core: aiv, sig: x}
program:
  body:
    - local: {rows: "shape(x, 0)", cols: "shape(x, TILE / 4)"}
    - loop: {var: i, to: 2}
      body:
        - {k: up, args: ["inout x[ids[i + 1]]"], scalars: ["ids[i]", rows, cols, "rt_available_cluster_count()", "rt_available_aiv_count()", "ids[ids[1]]"]}
    - {k: up, args: ["inout x"], bn: "rt_available_cluster_count()"}
forms: {eager: {}}
`
	m, err := config.Parse("hostexpr.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tasks := reftrace.Tasks(expand(t, m, "eager"))
	var sc [][]uint64
	var off []int64
	for _, tk := range tasks[:2] {
		sc = append(sc, tk.Scalars)
		off = append(off, tk.Args[0].Off)
	}
	c := uint64(stages.A2A3Clusters)
	if want := [][]uint64{{3, 6, 16, c, 2 * c, 1}, {1, 6, 16, c, 2 * c, 1}}; !reflect.DeepEqual(sc, want) {
		t.Errorf("scalars %v, want %v", sc, want)
	}
	if want := []int64{16, 64}; !reflect.DeepEqual(off, want) {
		t.Errorf("offsets %v, want rows ids[1] and ids[2]", off)
	}
	if bn := tasks[2].BlockNum; bn != stages.A2A3Clusters {
		t.Errorf("block_num %d, want the die's %d clusters", bn, stages.A2A3Clusters)
	}
}

// TestHostExpressionErrors: a lookup outside its table, or a name that is
// not one, is an error at its line.
func TestHostExpressionErrors(t *testing.T) {
	hdr := "model: e\nconstants: {ids: [3, 1]}\nentry:\n  tensors:\n    - {name: x, dtype: fp32, shape: [6, 16]}\nkernels:\n  - {name: up, core: aiv, sig: x}\n"
	op := func(s string) string { return hdr + "program:\n  body:\n    - " + s + "\nforms: {eager: {}}\n" }
	for _, tc := range []struct {
		name, src, at string
		want          []string
	}{
		{"constant index outside", op(`{k: up, args: ["inout x"], scalars: ["ids[2]"]}`), "ids[2]", []string{"ids[2]: want an index from 0 to 1"}},
		{"run-time index outside", op("loop: {var: i, to: 3}\n      body:\n        - {k: up, args: [\"inout x\"], scalars: [\"ids[i]\"]}"), `"ids[i]"`, []string{"ids[2]", "want an index from 0 to 1"}},
		{"shape of a non-entry", op(`{k: up, args: ["inout x"], scalars: ["shape(y, 0)"]}`), "shape(y", []string{`"y" is not an entry tensor`}},
		{"shape dim outside", op(`{k: up, args: ["inout x"], scalars: ["shape(x, 2)"]}`), "shape(x, 2)", []string{"shape(x, 2): want an index from 0 to 1"}},
		{"rt_available with an argument", op(`{k: up, args: ["inout x"], scalars: ["rt_available_cluster_count(1)"]}`), "rt_available", []string{"takes no arguments"}},
		{"an empty constant array", "model: e\nconstants: {ids: []}\nentry:\n  tensors:\n    - {name: x, dtype: fp32, shape: [6]}\nkernels: []\nprogram: {body: []}\nforms: {eager: {}}\n", "ids: []", []string{"1 to 65536 values"}},
		{"a constant array named scalar", "model: e\nconstants: {scalar: [1]}\nentry:\n  tensors:\n    - {name: x, dtype: fp32, shape: [6]}\nkernels: []\nprogram: {body: []}\nforms: {eager: {}}\n", "scalar: [1]", []string{"a lookup of its own"}},
		{"an array used bare", op(`{k: up, args: ["inout x"], scalars: ["ids"]}`), `["ids"]`, []string{`undefined name "ids"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := config.Parse("e.yaml", []byte(tc.src))
			if err == nil {
				_, err = config.Validate(m)
			}
			wantConfigError(t, err, "e.yaml", lineOf(tc.src, tc.at), tc.want)
		})
	}
}

// TestEntryTensorByIndex: tensor(EXPR) is upstream's orch_args.tensor(i)
// with a computed i, in the program body; a block names its tensors.
func TestEntryTensorByIndex(t *testing.T) {
	src := `model: byindex
entry:
  tensors:
    - {name: a, dtype: fp32, shape: [16]}
    - {name: b, dtype: fp32, shape: [16]}
    - {name: c, dtype: fp32, shape: [8]}
kernels:
  - {name: up, core: aiv, sig: x}
program:
  body:
    - loop: {var: i, to: 3}
      body:
        - {k: up, args: ["inout tensor(2 - i)[0:+4]"]}
forms: {eager: {}}
`
	m, err := config.Parse("byindex.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var roots []string
	for _, tk := range reftrace.Tasks(expand(t, m, "eager")) {
		roots = append(roots, tk.Args[0].Root)
	}
	if want := []string{"c", "b", "a"}; !reflect.DeepEqual(roots, want) {
		t.Errorf("roots %v, want %v", roots, want)
	}
	for _, tc := range []struct{ old, new, at, want string }{
		{`"inout tensor(2 - i)[0:+4]"`, `"inout tensor(3)"`, "tensor(3)", "tensor(3): want an index from 0 to 2"},
		{`"inout tensor(2 - i)[0:+4]"`, `"inout tensor(3 - i)"`, "tensor(3 - i)", "tensor(3): the model has 3 entry tensors"},
	} {
		s := replaceOnce(src, tc.old, tc.new)
		m, err := config.Parse("byindex.yaml", []byte(s))
		if err == nil {
			_, err = config.Validate(m)
		}
		wantConfigError(t, err, "byindex.yaml", lineOf(s, tc.at), []string{tc.want})
	}
	blk := replaceOnce(src, "program:\n", "blocks:\n  b1:\n    boundary: [{name: a, tag: inout}]\n    body:\n      - {k: up, args: [\"inout tensor(0)\"]}\nprogram:\n")
	_, err = config.Parse("byindex.yaml", []byte(blk))
	wantConfigError(t, err, "byindex.yaml", lineOf(blk, `"inout tensor(0)"`), []string{"only the program body names one"})
}
