package config_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
)

// upstreamHeader is the entry and kernel table of the tests of the
// constructs that say what upstream's orchestration API says (issue 25).
const upstreamHeader = `model: upstream
source: {repo: hw-native-sys/simpler, commit: 6ebaf7715, path: src/a2a3/runtime/tensormap_and_ringbuffer/orchestration/pto_orchestration_api.h}
entry:
  tensors:
    - {name: x, dtype: fp32, shape: [16]}
    - {name: gate, dtype: int32, shape: [2, 8]}
  scalars: [{name: s0, value: 3}, {name: s1, value: 5}, {name: s2, value: 7}]
kernels:
  - {name: act, core: aiv, sig: io}
  - {name: use, core: aiv, sig: ii}
  - {name: upd, core: aiv, sig: x}
`

// TestUpstreamConstructs runs one small model per construct and checks the
// trace it expands to.
func TestUpstreamConstructs(t *testing.T) {
	for _, tc := range []struct {
		name, src, form string
		check           func(t *testing.T, evs []refEvent)
	}{
		{
			// A root an out argument makes is named in the trace, where it
			// is made and where a later op or a predicate names it.
			name: "named kernel-allocated output",
			src: `program:
  body:
    - {k: act, args: ["in x", "out y fp32[8]"]}
    - {k: use, args: ["in y", "in x"], pred: "y[3] > 0"}
forms: {eager: {}}
`,
			check: func(t *testing.T, evs []refEvent) {
				tasks := reftrace.Tasks(evs)
				if got := tasks[0].Args[1].Root; got != "y" {
					t.Errorf("out arg's root %q, want y", got)
				}
				if got := tasks[1].Args[0].Root; got != "y" {
					t.Errorf("later use's root %q, want y", got)
				}
				if p := tasks[1].Pred; p == nil || p.Root != "y" {
					t.Errorf("predicate %+v, want on root y", p)
				}
			},
		},
		{
			// orch_args.scalar(i) in a loop.
			name: "entry scalars by index",
			src: `program:
  body:
    - loop: {var: i, to: 3}
      body:
        - {k: upd, args: ["inout x[0:+scalar(i) - 2]"], scalars: ["scalar(i)", "scalar(2 - i) * 2"]}
forms: {eager: {}}
`,
			check: func(t *testing.T, evs []refEvent) {
				var sc [][]uint64
				var rows []int64
				for _, tk := range reftrace.Tasks(evs) {
					sc = append(sc, tk.Scalars)
					rows = append(rows, tk.Args[0].Shape[0])
				}
				if want := [][]uint64{{3, 14}, {5, 10}, {7, 6}}; !reflect.DeepEqual(sc, want) {
					t.Errorf("scalars %v, want %v", sc, want)
				}
				if want := []int64{1, 3, 5}; !reflect.DeepEqual(rows, want) {
					t.Errorf("rows %v, want %v", rows, want)
				}
			},
		},
		{
			// if (variant == 0) add_scalar(a, b, c) else add_scalar(b).
			name: "per-variant boundary scalars",
			src: `blocks:
  b:
    params: [l]
    variants: [full, tail]
    boundary:
      - {name: x, tag: inout}
    scalars:
      full: [{name: a, value: "l + 1"}, {name: bb, value: "l * 2"}, {name: c, value: 9}]
      tail: [{name: bb, value: "l * 2"}]
    body:
      - {k: upd, args: ["inout x"], scalars: [bb]}
      - {k: upd, args: ["inout x"], scalars: [a, c], tail: {scalars: [bb]}}
program:
  body:
    - loop: {var: i, from: 1, to: 3}
      body:
        - call: b
          with: {l: i, variant: full}
        - call: b
          with: {l: i, variant: tail}
forms:
  graph: {graphs: {b: {key: "b_{variant}"}}}
`,
			form: "graph",
			check: func(t *testing.T, evs []refEvent) {
				var keys []string
				var sc [][]uint64
				for _, e := range reftrace.Events(evs, "graph_begin") {
					keys = append(keys, e.Key)
					sc = append(sc, e.Scalars)
				}
				if want := []string{"b_full", "b_tail", "b_full", "b_tail"}; !reflect.DeepEqual(keys, want) {
					t.Errorf("keys %v, want %v", keys, want)
				}
				if want := [][]uint64{{2, 2, 9}, {2}, {3, 4, 9}, {4}}; !reflect.DeepEqual(sc, want) {
					t.Errorf("boundary scalars %v, want %v", sc, want)
				}
				var task [][]uint64
				for _, tk := range reftrace.Tasks(evs) {
					task = append(task, tk.Scalars)
				}
				if want := [][]uint64{{2}, {2, 9}, {2}, {2}, {4}, {3, 9}, {4}, {4}}; !reflect.DeepEqual(task, want) {
					t.Errorf("task scalars %v, want %v", task, want)
				}
			},
		},
		{
			// The trace's idx is an element of the root, not of the view.
			name: "predicate idx relative to the root",
			src: `program:
  body:
    - let: {gate_view: "gate @ 4 as [4]", row1: "gate[1]"}
    - {k: use, args: ["in x", "in x"], pred: "gate_view[1] > 0"}
    - {k: use, args: ["in x", "in x"], pred: "row1[2] == 1"}
forms: {eager: {}}
`,
			check: func(t *testing.T, evs []refEvent) {
				tasks := reftrace.Tasks(evs)
				if got := tasks[0].Pred.Idx; !reflect.DeepEqual(got, []int64{0, 5}) {
					t.Errorf("idx %v, want [0 5] (gate_view[1] over gate @ 4)", got)
				}
				if got := tasks[1].Pred.Idx; !reflect.DeepEqual(got, []int64{1, 2}) {
					t.Errorf("idx %v, want [1 2] (gate[1][2])", got)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := config.Parse("upstream.yaml", []byte(upstreamHeader+tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := config.Validate(m); err != nil {
				t.Fatal(err)
			}
			form := tc.form
			if form == "" {
				form = "eager"
			}
			tc.check(t, expand(t, m, form))
		})
	}
}

// TestUpstreamConstructErrors: each construct's mistakes are errors at their
// line, naming the key and the value.
func TestUpstreamConstructErrors(t *testing.T) {
	variants := `blocks:
  b:
    params: [l]
    variants: [full, tail]
    boundary:
      - {name: x, tag: inout}
    scalars:
      full: [{name: a, value: "l + 1"}]
      SCALARS
    body:
      - {k: upd, args: ["inout x"], scalars: [BODY]}
program:
  body:
    - call: b
      with: {l: 1, variant: tail}
forms:
  graph: {graphs: {b: {key: "b_{variant}"}}}
  FORM
`
	rep := func(s string, kv ...string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			s = replaceOnce(s, kv[i], kv[i+1])
		}
		return s
	}
	for _, tc := range []struct {
		name, src, at string
		want          []string
		runTime       bool
	}{
		{name: "entry scalar index out of range", at: `scalar(3)`, want: []string{`scalar(3): want an index from 0 to 2 (the model has 3)`}, src: `program:
  body:
    - {k: upd, args: ["inout x"], scalars: ["scalar(3)"]}
forms: {eager: {}}
`},
		{name: "entry scalar index out of range at run time", runTime: true, at: `scalar(i)`, want: []string{`expression "scalar(i)"`, "scalar(3) in \"scalar(i)\": want an index from 0 to 2"}, src: `program:
  body:
    - loop: {var: i, to: 4}
      body:
        - {k: upd, args: ["inout x"], scalars: ["scalar(i)"]}
forms: {eager: {}}
`},
		{name: "unknown function", at: `scalr(1)`, want: []string{`undefined function "scalr"`}, src: `program:
  body:
    - {k: upd, args: ["inout x"], scalars: ["scalr(1)"]}
forms: {eager: {}}
`},
		{name: "per-variant scalars of an unknown variant", at: "head: [", want: []string{`scalars "head"`, "not a variant of b (want one of full, tail)"},
			src: rep(variants, "SCALARS", "head: [a]", "BODY", "a", "  FORM\n", "")},
		{name: "one name, two values", at: `value: "l + 2"`, want: []string{`boundary scalar a "l + 2"`, `another variant's a at line`, `is "l + 1"`},
			src: rep(variants, "SCALARS", `tail: [{name: a, value: "l + 2"}]`, "BODY", "a", "  FORM\n", "")},
		{name: "per-variant scalars without variants", at: "full: [{name: a", want: []string{"per-variant boundary scalars", "in a block without variants"},
			src: rep(variants, "    variants: [full, tail]\n", "", "SCALARS", "", "BODY", "a", "  FORM\n", "", ", variant: tail", "", "b_{variant}", "b")},
		{name: "a scalar the variant does not pass", runTime: true, at: "scalars: [a]}", want: []string{`expression "a"`, "boundary scalar a is not one variant tail of b passes"},
			src: rep(variants, "SCALARS", "tail: []", "BODY", "a", "  FORM\n", "")},
		{name: "a bare boundary scalar that is not a param", at: "scalars: [l, q]", want: []string{`boundary scalar q "q"`, `undefined name "q"`, "not the caller's names: pass the caller's value as a param"}, src: `blocks:
  b:
    params: [l]
    boundary:
      - {name: x, tag: inout}
    scalars: [l, q]
    body:
      - {k: upd, args: ["inout x"], scalars: [l]}
program:
  params: {q: 1}
  body:
    - call: b
      with: {l: 1}
forms: {eager: {}}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := upstreamHeader + tc.src
			m, err := config.Parse("upstream.yaml", []byte(src))
			if tc.runTime {
				if err != nil {
					t.Fatal(err)
				}
				_, err = config.Validate(m)
			}
			wantConfigError(t, err, "upstream.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}

// TestPerVariantScalarsAreStructure: variants that pass different boundary
// scalars have different boundary signatures, so a key without the variant
// is a StructureError at the per-variant scalars.
func TestPerVariantScalarsAreStructure(t *testing.T) {
	src := upstreamHeader + `blocks:
  b:
    params: [l]
    variants: [full, tail]
    boundary:
      - {name: x, tag: inout}
    scalars:
      full: [{name: a, value: "l + 1"}, {name: c, value: 2}]
      tail: [{name: a, value: "l + 1"}]
    body:
      - {k: upd, args: ["inout x"], scalars: [a]}
program:
  body:
    - call: b
      with: {l: 1, variant: tail}
forms:
  bad: {graphs: {b: {key: "b"}}}
`
	m, err := config.Parse("upstream.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	_, err = config.Validate(m)
	var se *config.StructureError
	if !errors.As(err, &se) {
		t.Fatalf("Validate: %v, want a *config.StructureError", err)
	}
	if se.Param != "variant" || se.Block != "b" || se.Line != lineOf(src, "full: [{name: a") {
		t.Errorf("%+v, want variant of b at line %d", se, lineOf(src, "full: [{name: a"))
	}
}

// TestSourceKey: the top-level source key says where a model comes from,
// and is checked like every other key.
func TestSourceKey(t *testing.T) {
	body := `program:
  body:
    - {k: upd, args: ["inout x"]}
forms: {eager: {}}
`
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"missing commit", "source: {repo: hw-native-sys/simpler}", []string{"source.commit", "missing"}},
		{"not a repo", "source: {repo: simpler, commit: 6ebaf7715}", []string{`source.repo "simpler"`, "want OWNER/NAME"}},
		{"not a commit", "source: {repo: hw-native-sys/simpler, commit: main}", []string{`source.commit "main"`, "7 to 40 lowercase hex digits"}},
		{"unknown key", "source: {repo: hw-native-sys/simpler, commit: 6ebaf7715, file: x.cpp}", []string{"file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := replaceOnce(upstreamHeader, upstreamHeader[len("model: upstream\n"):len("model: upstream\n")+len(firstLine(upstreamHeader[len("model: upstream\n"):]))], tc.src) + body
			_, err := config.Parse("upstream.yaml", []byte(src))
			wantConfigError(t, err, "upstream.yaml", 2, tc.want)
		})
	}
}

func firstLine(s string) string {
	for i := range s {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	panic("replaceOnce: " + old + " not in the text")
}

// TestLaunchFlags: a task's launch flags are its op's where it gives them,
// else its kernel's (a MIX task's: its AIC kernel's), and the trace writes
// them.
func TestLaunchFlags(t *testing.T) {
	src := `model: flags
entry:
  tensors:
    - {name: x, dtype: fp32, shape: [16]}
kernels:
  - {name: plain, core: aiv, sig: x}
  - {name: eager, core: aiv, sig: x, early: true}
  - {name: attn_aic, core: aic, sig: x, early: true, sync_start: true}
  - {name: attn_aiv, core: aiv, sig: x}
blocks:
  b:
    variants: [one, two]
    boundary:
      - {name: x, tag: inout}
    body:
      - {k: plain, args: ["inout x"], two: {sync_start: true}}
program:
  body:
    - {k: plain, args: ["inout x"]}
    - {k: plain, args: ["inout x"], early: true}
    - {k: eager, args: ["inout x"]}
    - {k: eager, args: ["inout x"], early: false}
    - {mix: attn, bn: 24, args: ["inout x"]}
    - {mix: attn, bn: 24, args: ["inout x"], sync_start: false}
    - {k: "[plain, eager][1]", args: ["inout x"]}
    - call: b
      with: {variant: one}
    - call: b
      with: {variant: two}
forms:
  eager: {}
  graph: {graphs: {b: {key: "b_{variant}"}}}
`
	m, err := config.Parse("flags.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int{{0, 0}, {1, 0}, {1, 0}, {0, 0}, {1, 1}, {1, 0}, {1, 0}, {0, 0}, {0, 1}}
	for _, form := range []string{"eager", "graph"} {
		var got [][2]int
		for _, tk := range reftrace.Tasks(expand(t, m, form)) {
			got = append(got, [2]int{tk.Early, tk.Sync})
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: [early sync_start] %v, want %v", form, got, want)
		}
	}
}

// TestLaunchFlagErrors: a flag is true or false, and a dummy takes none.
func TestLaunchFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, at string
		want          []string
	}{
		{"yes is not true", `    - {k: upd, args: ["inout x"], early: yes}`, "early: yes", []string{`early "yes"`, "want true or false"}},
		{"a dummy is not launched", `    - {dummy: true, sync_start: true}`, "sync_start: true", []string{`sync_start "true"`, "a dummy task is not launched on a core"}},
		{"a kernel's flag", "", "sync_start: 1", []string{`sync_start "1"`, "want true or false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := upstreamHeader
			body := tc.src
			if body == "" {
				hdr = replaceOnce(hdr, "{name: upd, core: aiv, sig: x}", "{name: upd, core: aiv, sig: x, sync_start: 1}")
				body = `    - {k: upd, args: ["inout x"]}`
			}
			src := hdr + "program:\n  body:\n" + body + "\nforms: {eager: {}}\n"
			_, err := config.Parse("upstream.yaml", []byte(src))
			wantConfigError(t, err, "upstream.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}

// dataHeader is a paged-attention-like entry: per-request context lengths
// and a block table the host reads.
const dataHeader = `model: data
constants: {BS: 16}
entry:
  tensors:
    - {name: kc, dtype: bf16, shape: [64, 16]}
    - {name: context_lens, dtype: int32, shape: [3], data: [7, 16, 100]}
    - {name: block_table, dtype: int32, shape: [3, 8], data: {seed: 7, min: 0, max: 3}}
    - {name: out, dtype: fp32, shape: [3, 16], out: true}
  scalars: [{name: scale, value: 5}]
kernels:
  - {name: qk, core: aic, sig: ix}
  - {name: up, core: aiv, sig: x}
`

// TestHostReads: a read op binds names to elements of an entry tensor's
// contents, traced as get_tensor_data with index and value, so a loop
// count, a view offset and a scalar come from data; validate counts the
// tasks the data makes.
func TestHostReads(t *testing.T) {
	src := dataHeader + `program:
  body:
    - loop: {var: b, to: 3}
      body:
        - read: {cur: "context_lens[b]"}
        - loop: {var: bn, to: "(cur + BS - 1) / BS"}
          body:
            - read: {blk: "block_table[b, bn]"}
            - {k: qk, args: ["in kc[blk * BS:+BS]", "inout out[b]"], scalars: [cur, blk]}
forms: {eager: {}}
`
	m, err := config.Parse("data.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := config.Validate(m)
	if err != nil {
		t.Fatal(err)
	}
	// ceil(7/16) + ceil(16/16) + ceil(100/16) = 1 + 1 + 7.
	if got := sum.Forms[0].Tasks; got != 9 {
		t.Errorf("validate counts %d tasks, want 9 (1, 1 and 7 blocks for 7, 16 and 100 tokens)", got)
	}
	evs := expand(t, m, "eager")
	var reads []string
	for _, e := range reftrace.Events(evs, "get_tensor_data") {
		reads = append(reads, fmt.Sprintf("%s%v=%d", e.Root, e.Idx, e.Value))
	}
	tasks := reftrace.Tasks(evs)
	if len(tasks) != 9 || len(reads) != 12 {
		t.Fatalf("%d tasks and %d reads (%v), want 9 and 12", len(tasks), len(reads), reads)
	}
	if want := []string{"context_lens[0]=7", "block_table[0 0]="}; reads[0] != want[0] || !strings.HasPrefix(reads[1], want[1]) {
		t.Errorf("reads start %v, want %v...", reads[:2], want)
	}
	if reads[2] != "context_lens[1]=16" || reads[4] != "context_lens[2]=100" {
		t.Errorf("reads %v: want context_lens[1]=16 at 2 and [2]=100 at 4", reads)
	}
	// Each task's key view starts at block_table's value times BS, and
	// passes the two reads as its scalars.
	for i, tk := range tasks {
		blk := int64(tk.Scalars[1])
		if tk.Args[0].Off != blk*16*16 {
			t.Errorf("task %d reads kc at %d, want block %d (offset %d)", i, tk.Args[0].Off, blk, blk*256)
		}
	}
	// The generated table is the same in every load.
	m2, _ := config.Parse("data.yaml", []byte(src))
	if a, b := m.EntryRoots()[2].Data, m2.EntryRoots()[2].Data; !reflect.DeepEqual(a, b) || len(a) != 24 {
		t.Errorf("generated data differs between loads or has %d values", len(a))
	}
}

// TestHostReadErrors: data and read mistakes are errors at their line.
func TestHostReadErrors(t *testing.T) {
	prog := func(body string) string {
		return "program:\n  body:\n" + body + "\nforms: {eager: {}}\n"
	}
	for _, tc := range []struct {
		name, hdr, src, at string
		want               []string
		runTime            bool
	}{
		{name: "data of a float tensor", hdr: `{name: kc, dtype: bf16, shape: [64, 16]}`, src: `{name: kc, dtype: bf16, shape: [2], data: [1, 2]}`, at: "data: [1, 2]", want: []string{"data", "data is for integer tensors"}},
		{name: "too few values", hdr: `data: [7, 16, 100]`, src: `data: [7, 16]`, at: "data: [7, 16]", want: []string{"2 values for the 3 elements of context_lens [3]"}},
		{name: "a value past the dtype", hdr: `data: [7, 16, 100]`, src: `data: [7, 16, 3000000000]`, at: "data: [7, 16, 3000000000]", want: []string{`data "3000000000"`, "does not fit int32"}},
		{name: "a generator without max", hdr: `data: {seed: 7, min: 0, max: 3}`, src: `data: {seed: 7, min: 0}`, at: "data: {seed: 7, min: 0}", want: []string{"data.max", "missing"}},
		{name: "too large a table", hdr: `{name: kc, dtype: bf16, shape: [64, 16]}`, src: `{name: kc, dtype: int32, shape: [512, 256], data: {seed: 1, min: 0, max: 1}}`, at: "shape: [512, 256]", want: []string{"131072 elements: data takes at most 65536"}},
		{name: "read of a tensor without data", runTime: true, src: prog(`    - read: {x: "kc[0, 0]"}`), at: `read: {x:`, want: []string{`read.x "kc[0, 0]"`, "the host knows no value there"}},
		{name: "read with too few indices", src: prog(`    - read: {x: "block_table[0]"}`), at: `read: {x:`, want: []string{`read.x "block_table[0]"`, "1 indices for block_table of rank 2"}},
		{name: "read outside the table", src: prog(`    - read: {x: "context_lens[3]"}`), at: `read: {x:`, want: []string{"index 0 is 3, outside [0, 3)"}},
		{name: "read outside the table at run time", runTime: true, src: prog(`    - loop: {var: i, to: 4}
      body:
        - read: {x: "context_lens[i]"}`), at: `read: {x:`, want: []string{`read.x "context_lens[i]"`, "index 0 is 3, outside [0, 3) of context_lens [3]"}},
		{name: "a read in a Graph body", runTime: true, src: `blocks:
  attn:
    params: [b]
    boundary:
      - {name: out, tag: inout}
    body:
      - read: {cur: "context_lens[b]"}
      - {k: up, args: ["inout out"], scalars: [cur]}
program:
  body:
    - call: attn
      with: {b: 1}
forms: {graph: {graphs: {attn: {key: "attn{b}"}}}}
`, at: `read: {cur:`, want: []string{`read.cur "context_lens[b]"`, "a host read inside the Graph body of attn", "read it in the caller"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := dataHeader
			body := tc.src
			if tc.hdr != "" {
				src, body = replaceOnce(src, tc.hdr, tc.src), prog(`    - {k: up, args: ["inout out"]}`)
			}
			src += body
			m, err := config.Parse("data.yaml", []byte(src))
			if tc.runTime {
				if err != nil {
					t.Fatal(err)
				}
				_, err = config.Validate(m)
			}
			wantConfigError(t, err, "data.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}

// TestStridedViews: NAME[s0, s1] slices several dims and keeps the base's
// strides (upstream's view([rows, valid_len]) of a [rows, block] tensor has
// strides [block, 1]); an index drops its dim; expand writes the strides of
// a view that is not contiguous.
func TestStridedViews(t *testing.T) {
	src := upstreamHeader + `program:
  body:
    - alloc: ["w fp32[4, 16]"]
    - {k: act, args: ["in x", "out sij fp32[4, 16]"]}
    - let: {sv: "sij[:, 0:+5]"}
    - {k: use, args: ["in sv", "in w[1:+2, 3:+4]"]}
    - {k: use, args: ["in w[2, 3:+4]", "in sv[1:+2]"]}
    - {k: use, args: ["in w[:, 2]", "in w[1:+2, :]"]}
forms: {eager: {}}
`
	m, err := config.Parse("upstream.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		off            int64
		shape, strides []int64
	}
	var args []got
	for _, tk := range reftrace.Tasks(expand(t, m, "eager"))[2:] {
		for _, a := range tk.Args {
			args = append(args, got{a.Off, a.Shape, a.Strides})
		}
	}
	want := []got{
		{0, []int64{4, 5}, []int64{16, 1}},  // sij[:, 0:+5]
		{19, []int64{2, 4}, []int64{16, 1}}, // w[1:+2, 3:+4]
		{35, []int64{4}, nil},               // w[2, 3:+4]: contiguous
		{16, []int64{2, 5}, []int64{16, 1}}, // sv[1:+2] keeps sv's stride
		{2, []int64{4}, []int64{16}},        // w[:, 2]: a column
		{16, []int64{2, 16}, nil},           // w[1:+2, :]: whole rows
	}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("views %v, want %v", args, want)
	}
}

// TestStridedViewErrors: a slice outside its dim, more dims than the
// tensor has, and a reshape of a strided view are errors at their line.
func TestStridedViewErrors(t *testing.T) {
	for _, tc := range []struct {
		name, view string
		want       []string
	}{
		{"outside its dim", "gate[:, 6:+4]", []string{`view "gate[:, 6:+4]"`, "outside its root: [6, 10) of dim 1, which has 8"}},
		{"too many dims", "gate[0, 1, 2]", []string{`view "gate[0, 1, 2]"`, "3 dims sliced of a tensor of rank 2"}},
		{"reshape of a strided view", "gate[:, 0:+4] as [8]", []string{`view "gate[:, 0:+4] as [8]"`, "a reshape of a strided view (strides [8 1])"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := upstreamHeader + "program:\n  body:\n    - {k: use, args: [\"in " + tc.view + "\", \"in x\"]}\nforms: {eager: {}}\n"
			m, err := config.Parse("upstream.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			_, err = config.Validate(m)
			wantConfigError(t, err, "upstream.yaml", lineOf(src, tc.view), tc.want)
		})
	}
}

// TestConditionalDepsAndAllocIDs: an alloc op's id names its task
// (alloc_tensors(...).task_id()), and "TASK if EXPR" in deps adds the task
// only where EXPR holds (if (is_last) add_dep(alloc_task)).
func TestConditionalDepsAndAllocIDs(t *testing.T) {
	src := upstreamHeader + `program:
  body:
    - scope: manual
      body:
        - alloc: ["acc fp32[16]"]
          id: a
        - tasks: {prev: 1}
        - loop: {var: i, to: 3}
          body:
            - {id: "prev[0]", k: upd, args: ["inout acc"], deps: ["prev[0] if i > 0", "a if i == 2"]}
forms: {eager: {}}
`
	m, err := config.Parse("upstream.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var deps [][]int
	for _, tk := range reftrace.Tasks(expand(t, m, "eager"))[1:] {
		deps = append(deps, tk.Deps)
	}
	if want := [][]int{{}, {1}, {2, 0}}; !reflect.DeepEqual(deps, want) {
		t.Errorf("deps %v, want %v", deps, want)
	}
	for _, tc := range []struct{ bad, at, want string }{
		{`deps: ["prev[0] if i > 0", "a if i == 2"]`, `"a if"`, `unexpected "junk" after the task`},
		{`          id: a`, `id: "a[0]"`, "an alloc's id is a NAME"},
	} {
		var s string
		if tc.at == `"a if"` {
			s = replaceOnce(src, tc.bad, `deps: ["a if i == 2 junk"]`)
		} else {
			s = replaceOnce(src, tc.bad, `          id: "a[0]"`)
		}
		_, err := config.Parse("upstream.yaml", []byte(s))
		at := "a if i == 2 junk"
		if tc.at != `"a if"` {
			at = tc.at
		}
		wantConfigError(t, err, "upstream.yaml", lineOf(s, at), []string{tc.want})
	}
}

// TestUnsupportedUpstreamCalls: what upstream's orchestration API can call
// and the language has no word for (CONFORMANCE.md says why for each) is an
// error at its line, never a silent difference.
func TestUnsupportedUpstreamCalls(t *testing.T) {
	op := func(s string) string { return "program:\n  body:\n    - " + s + "\nforms: {eager: {}}\n" }
	for _, tc := range []struct {
		name, hdrOld, hdrNew, src, at string
		want                          []string
	}{
		{name: "transpose", src: op(`{k: use, args: ["in gate transpose", "in x"]}`), at: "transpose", want: []string{`unexpected "transpose" after the view`}},
		{name: "slice with a step", src: op(`{k: use, args: ["in gate[:, 0:+4:2]", "in x"]}`), at: "0:+4:2", want: []string{`expected ',' or ']'`}},
		{name: "set_task_timing_slot", src: op(`{k: upd, args: ["inout x"], timing_slot: 3}`), at: "timing_slot", want: []string{`op "timing_slot": unknown key`}},
		{name: "dump", src: op(`{k: upd, args: ["inout x"], dump: true}`), at: "dump: true", want: []string{`op "dump": unknown key`}},
		{name: "set_dependencies_with_kinds", src: "program:\n  body:\n    - {id: a, k: upd, args: [\"inout x\"]}\n    - {k: upd, args: [\"inout x\"], deps: [\"a wait\"]}\nforms: {eager: {}}\n",
			at: `"a wait"`, want: []string{`deps "a wait"`, `unexpected "wait" after the task`}},
		{name: "rt_report_fatal and LOG_*", src: op(`{log: "batch"}`), at: "log", want: []string{`op "log": unknown key`}},
		{name: "rt_graph_begin", src: op(`{graph_begin: layer}`), at: "graph_begin", want: []string{`op "graph_begin": unknown key`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := upstreamHeader
			if tc.hdrOld != "" {
				hdr = replaceOnce(hdr, tc.hdrOld, tc.hdrNew)
			}
			src := hdr + tc.src
			m, err := config.Parse("upstream.yaml", []byte(src))
			if err == nil {
				_, err = config.Validate(m)
			}
			wantConfigError(t, err, "upstream.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}
