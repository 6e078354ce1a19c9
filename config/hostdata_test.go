package config_test

import (
	"reflect"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
)

const hostDataModel = "testdata/api/host_data.yaml"

// TestHostData: set_tensor_data (write:), get_tensor_data of an allocated
// or float tensor (read:), set_initial_value (initial), each traced as
// upstream's event in order with the tasks, which keep their numbers: the
// host's waits (wait_for_tensor_ready) are no tasks of the trace, and no
// task's fanin names one.
func TestHostData(t *testing.T) {
	m, err := config.Load(hostDataModel)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		Ev, Root string
		Idx      []int64
		Value    int64
	}
	var host []ev
	var ids []int
	var fanin [][]int
	for _, e := range expand(t, m, "eager") {
		switch e.Ev {
		case "get_tensor_data", "set_tensor_data":
			host = append(host, ev{e.Ev, e.Root, e.Idx, e.Value})
		case "task":
			ids = append(ids, e.ID)
			fanin = append(fanin, e.Fanin)
		}
	}
	want := []ev{
		{"get_tensor_data", "scalar", []int64{0}, 77}, {"set_tensor_data", "check", []int64{2}, 77},
		{"set_tensor_data", "scalar", []int64{0}, 42}, {"get_tensor_data", "scalar", []int64{0}, 42}, {"set_tensor_data", "check", []int64{5}, 42},
		{"set_tensor_data", "check", []int64{4}, 119},
		{"set_tensor_data", "d", []int64{0}, 10},
		{"set_tensor_data", "b", []int64{0}, 55}, {"get_tensor_data", "b", []int64{0}, 55}, {"set_tensor_data", "check", []int64{8}, 55},
		{"set_tensor_data", "b", []int64{0}, 0},
	}
	if !reflect.DeepEqual(host, want) {
		t.Errorf("host events\n%v, want\n%v", host, want)
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6}; !reflect.DeepEqual(ids, want) {
		t.Errorf("task ids %v, want %v (no host wait among them)", ids, want)
	}
	if want := [][]int{{}, {0}, {}, {2}, {}, {}, {4, 5}}; !reflect.DeepEqual(fanin, want) {
		t.Errorf("fanin %v, want %v (upstream's edges, no host wait)", fanin, want)
	}
	if _, err := config.Validate(m); err != nil {
		t.Fatal(err)
	}
}

// TestHostDataErrors: what the host cannot know, or cannot do where it is
// written, is an error at its line.
func TestHostDataErrors(t *testing.T) {
	hdr := `model: e
entry:
  tensors:
    - {name: x, dtype: fp32, shape: [8]}
    - {name: lens, dtype: int32, shape: [2], data: [3, 4]}
kernels:
  - {name: up, core: aiv, sig: x}
  - {name: use, core: aiv, sig: i}
`
	for _, tc := range []struct {
		name, src, at string
		want          []string
	}{
		{"a value a kernel wrote", `blocks: {}
program:
  body:
    - alloc: ["s fp32[2] initial 1"]
    - {k: up, args: ["inout s"]}
    - read: {v: "s[0]"}
forms: {eager: {}}
`, `read: {v:`, []string{`read.v "s[0]"`, "the host knows no value there"}},
		{"a local of a read value as a count", `program:
  body:
    - alloc: ["s fp32[2] initial 1"]
    - read: {v: "s[0]"}
    - local: {w: "v * 2"}
    - write: {"x[0]": w}
    - if: "w > 1"
      body:
        - {k: up, args: ["inout x"]}
forms: {eager: {}}
`, `if: "w > 1"`, []string{"read.v", "may set a value, not a count"}},
		{"a read value as a count", `program:
  body:
    - alloc: ["s fp32[2] initial 1"]
    - read: {v: "s[0]"}
    - loop: {var: i, to: v}
      body:
        - {k: up, args: ["inout x"]}
forms: {eager: {}}
`, `loop: {var: i, to: v}`, []string{"read.v", "may set a value, not a count"}},
		{"a write in a Graph body", `blocks:
  g:
    boundary: [{name: x, tag: inout}]
    body:
      - write: {"x[0]": 1}
program:
  body:
    - call: g
forms: {graph: {graphs: {g: {key: g}}}}
`, `write: {"x[0]": 1}`, []string{"a host write inside the Graph body of g"}},
		{"a read in a Graph body", `blocks:
  g:
    boundary: [{name: x, tag: inout}]
    body:
      - read: {v: "x[0]"}
program:
  body:
    - write: {"x[0]": 1}
    - call: g
forms: {graph: {graphs: {g: {key: g}}}}
`, `read: {v: "x[0]"}`, []string{"a host read inside the Graph body of g"}},
		{"a write of entry data in a block", `blocks:
  b:
    boundary: [{name: l, tag: inout, view: lens}]
    body:
      - write: {"l[0]": 1}
program:
  body:
    - call: b
forms: {eager: {}}
`, `write: {"l[0]": 1}`, []string{"write it in the program body, by its name"}},
		{"a predicate on entry data the host wrote", `program:
  body:
    - write: {"lens[0]": 0}
    - {k: up, args: ["inout x"], pred: "lens[0] > 0"}
forms: {eager: {}}
`, `pred: "lens[0] > 0"`, []string{"the host wrote that entry tensor's data"}},
		{"an index outside", `program:
  body:
    - write: {"x[8]": 1}
forms: {eager: {}}
`, `write: {"x[8]": 1}`, []string{"index 0 is 8, outside [0, 8)"}},
		{"a non-constant initial value", `program:
  body:
    - local: {n: 3}
    - alloc: ["s fp32[2] initial n"]
forms: {eager: {}}
`, `initial n`, []string{"want a constant initial value"}},
		{"an unknown tensor", `program:
  body:
    - write: {"nope[0]": 1}
forms: {eager: {}}
`, `nope[0]`, []string{`unknown tensor "nope"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := hdr + tc.src
			m, err := config.Parse("e.yaml", []byte(src))
			if err == nil {
				_, err = config.Validate(m)
			}
			wantConfigError(t, err, "e.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}

// TestHostWritesOfEntryData: a write of an entry tensor's data is what a
// later read sees, in the run and in the sizer's count (validate).
func TestHostWritesOfEntryData(t *testing.T) {
	src := dataHeader + `program:
  body:
    - write: {"context_lens[1]": 2}
    - read: {n: "context_lens[1]"}
    - loop: {var: i, to: n}
      body:
        - {k: up, args: ["inout out[0]"]}
forms: {eager: {}}
`
	m, err := config.Parse("data.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reftrace.Tasks(expand(t, m, "eager"))); n != 2 {
		t.Errorf("%d tasks, want the written 2", n)
	}
	sum, err := config.Validate(m)
	if err != nil {
		t.Fatal(err)
	}
	if n := sum.Forms[0].Tasks; n != 2 {
		t.Errorf("validate counts %d tasks, want 2", n)
	}
}
