package config_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
	"github.com/hbg-dev/hbg/stages"
)

// langHeader is the entry and kernel table of the language tests' models.
const langHeader = `model: lang
constants: {N: 4}
entry:
  tensors:
    - {name: w, dtype: fp32, shape: [8, 16]}
    - {name: x, dtype: fp32, shape: [16]}
kernels:
  - {name: mm, core: aic, sig: iix}
  - {name: mm_0, core: aic, sig: iix}
  - {name: mm_1, core: aic, sig: iix}
  - {name: act, core: aiv}
`

// langTask is what a case checks of one task: its kernel name, its
// explicit deps (task ids), and its arguments as "tag root@offset[shape]".
type langTask struct {
	name string
	deps []int
	args []string
}

func summarize(evs []refEvent) []langTask {
	var out []langTask
	for _, e := range reftrace.Tasks(evs) {
		lt := langTask{name: e.Name, deps: nzi(e.Deps)}
		for _, a := range e.Args {
			lt.args = append(lt.args, fmt.Sprintf("%s %s#%d@%d%v", a.Tag, a.Root, a.RID, a.Off, a.Shape))
		}
		out = append(out, lt)
	}
	return out
}

// TestLanguage runs one small model per construct and checks the tasks it
// submits.
func TestLanguage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string // blocks: and program: (after the header)
		form  string
		check func(t *testing.T, tasks []langTask, evs []refEvent)
	}{
		{
			name: "task list indexed by expression",
			src: `program:
  body:
    - tasks: {gate: 3}
    - loop: {var: i, to: 3}
      body:
        - {id: "gate[i]", k: act, args: ["inout x"]}
    - {k: act, args: ["in x"], deps: ["gate[1]", "gate[0:+2]", gate]}
forms: {eager: {}}
`,
			check: func(t *testing.T, tasks []langTask, _ []refEvent) {
				if got := tasks[3].deps; !reflect.DeepEqual(got, []int{1, 0, 1, 0, 1, 2}) {
					t.Errorf("deps %v, want [1 0 1 0 1 2] (gate[1], gate[0:+2], all of gate)", got)
				}
			},
		},
		{
			name: "set and a slice id fill a task list",
			src: `program:
  body:
    - tasks: {out: 6}
    - {id: "out[0:+4]", k: act, args: ["inout x"]}
    - {id: last, k: act, args: ["inout x"]}
    - loop: {var: j, from: 4, to: 6}
      body:
        - set: {"out[j]": last}
    - {k: act, args: ["in x"], deps: [out]}
forms: {eager: {}}
`,
			check: func(t *testing.T, tasks []langTask, _ []refEvent) {
				if got := tasks[2].deps; !reflect.DeepEqual(got, []int{0, 0, 0, 0, 1, 1}) {
					t.Errorf("deps %v, want [0 0 0 0 1 1]", got)
				}
			},
		},
		{
			name: "a block depends on a task its caller made",
			src: `blocks:
  layer:
    params: [l]
    tensors: [h]
    tasks: [before]
    boundary:
      - {name: h, tag: inout}
    body:
      - {id: first, k: act, args: ["inout h"], deps: [before]}
      - {k: act, args: ["inout h"], deps: [first, before]}
program:
  body:
    - tasks: {seed: 2}
    - {id: "seed[0]", k: act, args: ["inout x"]}
    - {id: "seed[1]", k: act, args: ["inout x"]}
    - loop: {var: i, to: 2}
      body:
        - call: layer
          with: {l: i, h: x, before: ["seed[1]", "seed[0]"]}
forms:
  graph: {graphs: {layer: {key: layer}}}
`,
			form: "graph",
			check: func(t *testing.T, tasks []langTask, _ []refEvent) {
				if got := tasks[2].deps; !reflect.DeepEqual(got, []int{1, 0}) {
					t.Errorf("first body task: deps %v, want [1 0]", got)
				}
				if got := tasks[5].deps; !reflect.DeepEqual(got, []int{4, 1, 0}) {
					t.Errorf("second call's second task: deps %v, want [4 1 0]", got)
				}
			},
		},
		{
			name: "tensor list chosen by a loop var",
			src: `program:
  body:
    - alloc: ["h[1] fp32[16]", "g fp32[16]", "h[0] fp32[16]"]
    - loop: {var: i, to: 3}
      body:
        - {k: act, args: ["inout h[i % 2]"]}
forms: {eager: {}}
`,
			check: func(t *testing.T, tasks []langTask, evs []refEvent) {
				// The alloc makes h[1] first: RootIDs 2 (h[1]), 3 (g), 4 (h[0]).
				for i, want := range []string{"x h#4@0[16]", "x h#2@0[16]", "x h#4@0[16]"} {
					if got := tasks[1+i].args[0]; got != want {
						t.Errorf("task %d: %s, want %s", 1+i, got, want)
					}
				}
			},
		},
		{
			name: "let names a view and rebinds a name",
			src: `program:
  body:
    - alloc: ["arena fp32[64]", "cur fp32[16]"]
    - let:
        a: "arena @ 16 as [4, 4]"
        b: "a[1:+2]"
    - {k: act, args: ["inout a", "in b", "in cur"]}
    - let: {cur: "arena @ 32 as [16]"}
    - {k: act, args: ["in cur"]}
forms: {eager: {}}
`,
			check: func(t *testing.T, tasks []langTask, _ []refEvent) {
				want := []string{"x arena#2@16[4 4]", "i arena#2@20[2 4]", "i cur#3@0[16]"}
				if !reflect.DeepEqual(tasks[1].args, want) {
					t.Errorf("args %v, want %v", tasks[1].args, want)
				}
				if got := tasks[2].args[0]; got != "i arena#2@32[16]" {
					t.Errorf("rebound cur: %s, want i arena#2@32[16]", got)
				}
			},
		},
		{
			name: "let list indexed by expression",
			src: `program:
  body:
    - let: {rows: ["w[0:+2]", "w[4:+2]"]}
    - loop: {var: i, to: 2}
      body:
        - {k: act, args: ["in rows[1 - i]"]}
forms: {eager: {}}
`,
			check: func(t *testing.T, tasks []langTask, _ []refEvent) {
				if tasks[0].args[0] != "i w#0@64[2 16]" || tasks[1].args[0] != "i w#0@0[2 16]" {
					t.Errorf("args %v %v, want rows 4 then 0", tasks[0].args, tasks[1].args)
				}
			},
		},
		{
			name: "kernel chosen by expression",
			src: `program:
  body:
    - alloc: ["acc fp32[16]"]
    - loop: {var: k, to: 3}
      body:
        - {k: "[mm, mm_0, mm_1][k]", args: ["in w", "in x", "inout acc"]}
forms: {eager: {}}
`,
			check: func(t *testing.T, tasks []langTask, _ []refEvent) {
				var got []string
				for _, tk := range tasks[1:] {
					got = append(got, tk.name)
				}
				if !reflect.DeepEqual(got, []string{"mm", "mm_0", "mm_1"}) {
					t.Errorf("kernels %v, want mm, mm_0, mm_1", got)
				}
			},
		},
		{
			name: "boundary scalar named alone",
			src: `blocks:
  layer:
    params: [l]
    tensors: [h]
    boundary:
      - {name: h, tag: inout}
    scalars: [N, {name: twice, value: "2 * N"}]
    body:
      - {k: act, args: ["inout h"], scalars: [N, twice]}
program:
  body:
    - call: layer
      with: {l: 0, h: x}
forms:
  graph: {graphs: {layer: {key: layer}}}
`,
			form: "graph",
			check: func(t *testing.T, _ []langTask, evs []refEvent) {
				g := graphCalls(evs)
				if len(g) != 1 || !reflect.DeepEqual(g[0].Scalars, []uint64{4, 8}) {
					t.Errorf("Graph call scalars %v, want [4 8]", g)
				}
				if tk := reftrace.Tasks(evs); len(tk) != 1 || !reflect.DeepEqual(tk[0].Scalars, []uint64{4, 8}) {
					t.Errorf("task scalars %+v, want [4 8]", tk)
				}
			},
		},
		{
			name: "loop step and min",
			src: `program:
  body:
    - loop: {var: i, from: 1, to: 16, step: 5}
      body:
        - {k: act, args: ["in w[min(i, 7)]"]}
forms: {eager: {}}
`,
			check: func(t *testing.T, tasks []langTask, _ []refEvent) {
				var got []string
				for _, tk := range tasks {
					got = append(got, tk.args[0])
				}
				want := []string{"i w#0@16[16]", "i w#0@96[16]", "i w#0@112[16]"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("args %v, want %v (rows 1, 6, min(11, 7))", got, want)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := config.Parse("lang.yaml", []byte(langHeader+tc.src))
			if err != nil {
				t.Fatal(err)
			}
			form := tc.form
			if form == "" {
				form = "eager"
			}
			evs := expand(t, m, form)
			tc.check(t, summarize(evs), evs)
		})
	}
}

// extDepOrch records the Graph calls' external dependencies.
type extDepOrch struct {
	nopOrch
	ext [][]stages.TaskID
}

func (o *extDepOrch) Graph(c *stages.GraphCall) stages.TaskID {
	o.ext = append(o.ext, append([]stages.TaskID(nil), c.ExtDeps...))
	return o.nopOrch.Graph(c)
}

// TestGraphCallExtDeps: a Graph call's external dependencies are its task
// params' tasks, in order, so that a replay can take them from its call
// site.
func TestGraphCallExtDeps(t *testing.T) {
	src := langHeader + `blocks:
  layer:
    params: [l]
    tensors: [h]
    tasks: [a, b]
    boundary:
      - {name: h, tag: inout}
    body:
      - {k: act, args: ["inout h"], deps: [b, a]}
program:
  body:
    - tasks: {seed: 3}
    - loop: {var: i, to: 3}
      body:
        - {id: "seed[i]", k: act, args: ["inout x"]}
    - loop: {var: i, to: 2}
      body:
        - call: layer
          with: {l: i, h: x, a: "seed[i]", b: "seed[1:+2]"}
forms:
  graph: {graphs: {layer: {key: layer}}}
`
	m, err := config.Parse("ext.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	o := &extDepOrch{}
	if err := m.Run(o, "graph"); err != nil {
		t.Fatal(err)
	}
	want := [][]stages.TaskID{{0, 1, 2}, {1, 1, 2}}
	if !reflect.DeepEqual(o.ext, want) {
		t.Fatalf("ExtDeps %v, want %v", o.ext, want)
	}
}

// TestLanguageRunTimeErrors: an index a task list or tensor list does not
// have, or a task list element no op stored, is an error naming the line.
func TestLanguageRunTimeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, at string
		want          []string
	}{
		{name: "unset task list element", at: `deps: ["gate[2]"]`, want: []string{`deps "gate[2]"`, "element 2 of task list gate is not set"}, src: `program:
  body:
    - tasks: {gate: 3}
    - {id: "gate[0]", k: act, args: ["inout x"]}
    - {k: act, args: ["in x"], deps: ["gate[2]"]}
forms: {eager: {}}
`},
		{name: "task list index out of range", at: `id: "gate[i]"`, want: []string{`id "gate[i]"`, "elements [3, 4) of task list gate, which has 3"}, src: `program:
  body:
    - tasks: {gate: 3}
    - loop: {var: i, to: 4}
      body:
        - {id: "gate[i]", k: act, args: ["inout x"]}
forms: {eager: {}}
`},
		{name: "task list slice past int64", at: `deps: ["gate[9223372036854775807:+2]"]`, want: []string{`deps "gate[9223372036854775807:+2]"`, "elements [9223372036854775807, +2) of task list gate, which has 3"}, src: `program:
  body:
    - tasks: {gate: 3}
    - {id: "gate[0]", k: act, args: ["inout x"]}
    - {k: act, args: ["in x"], deps: ["gate[9223372036854775807:+2]"]}
forms: {eager: {}}
`},
		{name: "task list store past int64", at: `set: {"gate[9223372036854775806:+3]"`, want: []string{`set "gate[9223372036854775806:+3]"`, "elements [9223372036854775806, +3) of task list gate, which has 3"}, src: `program:
  body:
    - tasks: {gate: 3}
    - {id: "g", k: act, args: ["inout x"]}
    - set: {"gate[9223372036854775806:+3]": g}
forms: {eager: {}}
`},
		{name: "tensor list index out of range", at: `"inout h[i]"`, want: []string{`view "h[i]"`, "element 2 of a tensor list of 2"}, src: `program:
  body:
    - alloc: ["h[0] fp32[16]", "h[1] fp32[16]"]
    - loop: {var: i, to: 3}
      body:
        - {k: act, args: ["inout h[i]"]}
forms: {eager: {}}
`},
		{name: "kernel list index out of range", at: `k: "[mm, mm_0][k]"`, want: []string{`k "[mm, mm_0][k]"`, "kernel 2 of a list of 2"}, src: `program:
  body:
    - alloc: ["acc fp32[16]"]
    - loop: {var: k, to: 3}
      body:
        - {k: "[mm, mm_0][k]", args: ["in w", "in x", "inout acc"]}
forms: {eager: {}}
`},
		{name: "zero loop step", at: `step: "1 - N / 4 + p"`, want: []string{`loop.step "1 - N / 4 + p"`, "loop step 0"}, src: `program:
  params: {p: 0}
  body:
    - loop: {var: i, to: 3, step: "1 - N / 4 + p"}
      body:
        - {k: act, args: ["in x"]}
forms: {eager: {}}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := langHeader + tc.src
			m, err := config.Parse("lang.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			err = m.Run(&nopOrch{}, "eager")
			wantConfigError(t, err, "lang.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}

// TestSizeMatchesRun: a pass's size, computed without running it, is the
// number of device tasks the run submits, for every form of both models.
func TestSizeMatchesRun(t *testing.T) {
	for _, m := range []*config.Model{loadModel(t), loadQwen3(t)} {
		sum, err := config.Validate(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range sum.Forms {
			n, err := m.Size(f.Name, config.DefaultMaxTasks)
			if err != nil || n != int64(f.Tasks) {
				t.Errorf("%s/%s: size %d (%v), the run submits %d", m.Name, f.Name, n, err, f.Tasks)
			}
		}
	}
}

// TestMaxTasksBound: the model's bound, SetMaxTasks and LimitTasks (the
// command's --max-tasks) each decide whether a pass runs.
func TestMaxTasksBound(t *testing.T) {
	m, err := config.Parse("tiny.yaml", []byte(tinyModel))
	if err != nil {
		t.Fatal(err)
	}
	run := func() error { return m.Run(&nopOrch{}, "eager") }
	if err := run(); err != nil {
		t.Fatal(err)
	}
	m.SetMaxTasks(16)
	if err := run(); err == nil || !strings.Contains(err.Error(), "more than 16 tasks") {
		t.Fatalf("17 tasks under a bound of 16: %v", err)
	}
	m.LimitTasks(17)
	if err := run(); err != nil {
		t.Fatalf("the override raises the model's bound: %v", err)
	}
	if m.MaxTasks() != 17 {
		t.Fatalf("MaxTasks %d, want 17", m.MaxTasks())
	}
	// The limit is the model's: another model of the process keeps its own
	// bound.
	m.LimitTasks(8)
	other, err := config.Parse("tiny.yaml", []byte(tinyModel))
	if err != nil {
		t.Fatal(err)
	}
	if err := run(); err == nil || !strings.Contains(err.Error(), "more than 8 tasks") {
		t.Fatalf("17 tasks under a limit of 8: %v", err)
	}
	if err := other.Run(&nopOrch{}, "eager"); err != nil || other.MaxTasks() != config.DefaultMaxTasks {
		t.Fatalf("another model under the first's limit: %v (bound %d)", err, other.MaxTasks())
	}
}

// FuzzParse checks that no model text makes the loader, the size
// computation or the interpreter panic; seeds are the small models of the
// tests above and the key findings' (Graph keys that meet).
// parseSeeds is the small models FuzzParse starts from, which
// FuzzSizeMatchesRun mutates too.
func parseSeeds(tb testing.TB) []string {
	return []string{tinyModel,
		readFile(tb, "testdata/keys/shared_key.yaml"),
		readFile(tb, "testdata/keys/interpolated_key.yaml"),
		readFile(tb, "testdata/api/manual_dep.yaml"),
		readFile(tb, "testdata/api/mixed_kernels.yaml"),
		readFile(tb, "testdata/api/host_data.yaml"),
		readFile(tb, "testdata/exprs/cover.yaml"),
		langHeader + `blocks:
  layer:
    params: [l]
    tensors: [h]
    tasks: [before]
    boundary:
      - {name: h, tag: inout}
    body:
      - let: {a: "h @ 0 as [4, 4]", r: ["h @ 0 as [8]", "h @ 8 as [8]"]}
      - tasks: {t: 2}
      - {id: "t[0]", k: act, args: ["inout a", "in r[l % 2]"], deps: [before]}
      - {id: "t[1]", k: "[mm, mm_0][l % 2]", args: ["in w", "in x", "inout h"], deps: ["t[0:+1]"]}
      - set: {"t[0]": "t[1]"}
program:
  body:
    - alloc: ["h[0] fp32[16]", "h[1] fp32[16]"]
    - tasks: {seed: 1}
    - {id: "seed[0]", k: act, args: ["inout x"]}
    - loop: {var: i, to: 3, step: 2}
      body:
        - call: layer
          with: {l: "min(i, 1)", h: "h[i % 2]", before: "seed[0]"}
forms:
  eager: {}
  graph: {graphs: {layer: {key: layer}}}
`,
		// Issue 25's constructs: host reads, data, strided views, per-variant
		// scalars, launch flags, alloc ids and conditional deps, source.
		dataHeader + `blocks:
  kv:
    params: [v, f]
    variants: [a, b]
    tensors: [k]
    boundary:
      - {name: k, tag: in}
      - {name: out, tag: inout, view: "out[0]"}
    scalars:
      a: [{name: s, value: "f + 1"}, {name: t, value: v}]
      b: [{name: t, value: v}]
    body:
      - {k: qk, args: ["in k[:, 0:+v]", "inout out"], early: true, b: {sync_start: true}}
      - {k: up, args: ["inout out"], scalars: [t]}
program:
  body:
    - loop: {var: b, to: 3}
      body:
        - read: {cur: "context_lens[b]"}
        - scope: manual
          body:
            - alloc: ["acc fp32[16]"]
              id: al
            - loop: {var: bn, to: "(cur + BS - 1) / BS"}
              body:
                - read: {blk: "block_table[b, bn]"}
                - {id: u, k: up, args: ["inout acc"], deps: ["al if bn == 0"], scalars: ["scalar(0)", blk]}
        - call: kv
          with: {v: "min(BS, cur)", f: b, variant: a, k: "kc[b * BS:+BS]"}
forms:
  eager: {}
  graph: {graphs: {kv: {key: "kv{variant}{v}"}}}
`,
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		m, err := config.Parse("fuzz.yaml", []byte(src))
		if err != nil {
			return
		}
		m.SetMaxTasks(4096)
		for _, form := range m.Forms() {
			_ = m.Run(&nopOrch{}, form)
		}
	})
}

// TestIdleGraphs: a form's Graph entry that no call makes a Graph (every
// call of it runs inside another Graph's body, or none runs in the form) is
// a warning of Validate and ValidateForm, with its line; the form still
// runs.
func TestIdleGraphs(t *testing.T) {
	src := langHeader + `blocks:
  inner:
    tensors: [h]
    boundary:
      - {name: h, tag: inout}
    body:
      - {k: act, args: ["inout h"]}
  outer:
    tensors: [h]
    boundary: auto
    body:
      - call: inner
        with: {h: h}
program:
  params: {direct: 0, use: 1}
  body:
    - alloc: ["h fp32[16]"]
    - if: use
      body:
        - call: outer
          with: {h: h}
    - if: direct
      body:
        - call: inner
          with: {h: h}
forms:
  nested: {graphs: {outer: {key: outer}, inner: {key: inner}}}
  direct: {params: {direct: 1}, graphs: {outer: {key: outer}, inner: {key: inner}}}
  uncalled:
    params: {use: 0}
    graphs: {inner: {key: inner}}
`
	m, err := config.Parse("idle.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := config.Validate(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("idle.yaml:%d: form uncalled: graphs.inner has no effect: no call of it runs in this form", lineOf(src, "graphs: {inner:")),
	}
	if len(sum.Warnings) != len(want) {
		t.Fatalf("warnings %q, want %d", sum.Warnings, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(sum.Warnings[i], w) {
			t.Errorf("warning %q, want %q", sum.Warnings[i], w)
		}
	}
	for form, n := range map[string]int{"nested": 0, "direct": 0, "uncalled": 1} {
		ws, err := config.ValidateForm(m, form)
		if err != nil || len(ws) != n {
			t.Errorf("ValidateForm %s: %q, %v; want %d warnings", form, ws, err, n)
		}
	}
}

// TestLayoutWarnings: a Graph block's boundary slot whose layout (a row
// count, a reshape) depends on a param outside the key is a warning of
// Validate and ValidateForm at the slot's line: calls with another value
// mismatch the recorded Definition and run on the ordinary path, correctly
// but slowly, and the runtime's warning named no line (the outside
// tester's F10). What moves a slot (a row start or index, an @ offset) is
// not layout; a param in the key or config is not outside it. A block with
// boundary: auto has its calls' slots, through the params and tensors its
// calls pass.
func TestLayoutWarnings(t *testing.T) {
	const leaf = `blocks:
  b:
    params: [i, j]
    boundary:
      - {name: w, tag: in, view: "VIEW"}
      - {name: x, tag: inout}
    body:
      - {k: mm, args: ["in w", "in x", "inout x"]}
program:
  body:
    - loop: {var: i, to: 4}
      body:
        - call: b
          with: {i: i, j: 0}
forms:
  g: {graphs: {b: GRAPH}}
`
	const auto = `blocks:
  inner:
    params: [n]
    tensors: [t]
    boundary:
      - {name: t, tag: in, view: "INNER"}
      - {name: x, tag: inout}
    body:
      - {k: mm, args: ["in t", "in x", "inout x"]}
  outer:
    params: [i]
    tensors: [src]
    boundary: auto
    body:
      - call: inner
        with: {n: "N_ARG", t: "T_ARG"}
program:
  body:
    - loop: {var: i, to: 4}
      body:
        - call: outer
          with: {i: i, src: w}
forms:
  g: {graphs: {outer: GRAPH}}
`
	for _, tc := range []struct {
		name, src, graph string
		sub              map[string]string
		at               string // the warned slot's line; "" for no warning
		want             string
	}{
		{name: "row count", src: leaf, graph: "{key: b}", sub: map[string]string{"VIEW": "w[0:+i % 3 + 1]"}, at: "name: w, tag: in",
			want: "form g: boundary slot w of b: its layout depends on i, not in the key of b: calls with another i mismatch the Definition and run on the ordinary path (add i to the form's config for b)"},
		{name: "reshape", src: leaf, graph: "{key: b}", sub: map[string]string{"VIEW": "w @ 0 as [i + 1, 2]"}, at: "name: w, tag: in", want: "its layout depends on i, not in the key of b"},
		{name: "row count in the key", src: leaf, graph: `{key: "b{i}"}`, sub: map[string]string{"VIEW": "w[0:+i % 3 + 1]"}},
		{name: "row count in config", src: leaf, graph: "{key: b, config: [i]}", sub: map[string]string{"VIEW": "w[0:+i % 3 + 1]"}},
		{name: "row start moves the slot", src: leaf, graph: "{key: b}", sub: map[string]string{"VIEW": "w[i:+2]"}},
		{name: "row index moves the slot", src: leaf, graph: "{key: b}", sub: map[string]string{"VIEW": "w[i] as [4, 4]"}},
		{name: "offset moves the slot", src: leaf, graph: "{key: b}", sub: map[string]string{"VIEW": "w @ 16 * i as [2, 8]"}},
		{name: "a param that is constant here", src: leaf, graph: `{key: "b{i}"}`, sub: map[string]string{"VIEW": "w[0:+j + 1]"}, at: "name: w, tag: in", want: "its layout depends on j, not in the key of b"},
		{name: "auto: a callee's row count by a param", src: auto, graph: "{key: outer}", sub: map[string]string{"INNER": "t[0:+n]", "N_ARG": "i % 2 + 1", "T_ARG": "src"}, at: "name: t, tag: in",
			want: "form g: boundary slot t of inner (called by outer at line 26): its layout depends on i, not in the key of outer"},
		{name: "auto: a tensor arg's row count", src: auto, graph: "{key: outer}", sub: map[string]string{"INNER": "t", "N_ARG": "1", "T_ARG": "src[0:+i % 2 + 1]"}, at: "name: t, tag: in", want: "boundary slot t of inner (called by outer at line 26): its layout depends on i"},
		{name: "auto: in the key", src: auto, graph: `{key: "outer{i}"}`, sub: map[string]string{"INNER": "t[0:+n]", "N_ARG": "i % 2 + 1", "T_ARG": "src"}},
		{name: "auto: the callee's param constant", src: auto, graph: "{key: outer}", sub: map[string]string{"INNER": "t[0:+n]", "N_ARG": "2", "T_ARG": "src[i:+4]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := langHeader + strings.Replace(tc.src, "GRAPH", tc.graph, 1)
			for k, v := range tc.sub {
				src = strings.Replace(src, k, v, 1)
			}
			m, err := config.Parse("layout.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			sum, err := config.Validate(m)
			if err != nil {
				t.Fatal(err)
			}
			form, err := config.ValidateForm(m, "g")
			if err != nil {
				t.Fatal(err)
			}
			if tc.at == "" {
				if len(sum.Warnings) != 0 || len(form) != 0 {
					t.Fatalf("warnings %q, %q; want none", sum.Warnings, form)
				}
				return
			}
			prefix := fmt.Sprintf("layout.yaml:%d: ", lineOf(src, tc.at))
			for _, ws := range [][]string{sum.Warnings, form} {
				if len(ws) != 1 || !strings.HasPrefix(ws[0], prefix) || !strings.Contains(ws[0], tc.want) {
					t.Errorf("warnings %q, want one starting %q containing %q", ws, prefix, tc.want)
				}
			}
		})
	}
}

// TestModelsHaveNoLayoutWarnings: the shipped models' Graph boundaries keep
// their layout across calls (no slot's layout reads a param outside its
// key), so no form of them warns.
func TestModelsHaveNoLayoutWarnings(t *testing.T) {
	for _, path := range []string{"models/dsv4_flash_decode.yaml", "models/qwen3_14b_decode.yaml"} {
		m, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := config.Validate(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range sum.Warnings {
			if strings.Contains(w, "layout") {
				t.Errorf("%s: %s", path, w)
			}
		}
	}
}

// TestNestedKeyChecked: a Graph called inside a Graph body is a child
// Definition, whose full_key is in the parent's: a param of the parent
// that feeds the child's key is structure of the parent, a StructureError
// at the call's line unless the parent's key holds it; with it in the key,
// the form passes. The child's own structure does not depend on it.
func TestNestedKeyChecked(t *testing.T) {
	src := langHeader + `blocks:
  inner:
    params: [n]
    tensors: [h]
    boundary:
      - {name: h, tag: inout}
    body:
      - {k: act, args: ["inout h"]}
  outer:
    params: [v]
    tensors: [h]
    boundary: auto
    body:
      - call: inner
        with: {n: v, h: h}
program:
  body:
    - alloc: ["h fp32[16]"]
    - call: outer
      with: {v: 3, h: h}
forms:
  open: {graphs: {outer: {key: outer}, inner: {key: inner, config: [n]}}}
  closed: {graphs: {outer: {key: outer, config: [v]}, inner: {key: inner, config: [n]}}}
`
	m, err := config.Parse("nested.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	errs := m.FormChecks("open")
	var se *config.StructureError
	if len(errs) != 1 || !errors.As(errs[0], &se) || se.Block != "outer" || se.Param != "v" || se.Line != lineOf(src, "- call: inner") {
		t.Fatalf("open: %v, want a StructureError of outer's v at the call of inner (line %d)", errs, lineOf(src, "- call: inner"))
	}
	if errs := m.FormChecks("closed"); len(errs) != 0 {
		t.Fatalf("closed: %v, want none", errs)
	}
}
