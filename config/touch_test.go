package config_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// touchModel has one expert matmul kernel at three sites: two declare the
// same hints (in the two forms, ARG[..] and dim0[..]), one declares none.
const touchModel = `model: touchy
entry:
  tensors:
    - {name: w, dtype: int8, shape: [4, 8, 16]}
    - {name: x, dtype: fp32, shape: [32, 16]}
    - {name: y, dtype: fp32, shape: [8], out: true}
kernels:
  - {name: emm, core: aic, sig: iix}
  - {name: act, core: aiv, sig: x}
program:
  body:
    - loop: {var: e, to: 4}
      body:
        - {k: emm, args: ["in w", "in x as [4, 128]", "inout y"], scalars: [e], touch: {w: "w[e:+1]", x: "dim0[e]"}}
    - {k: emm, args: ["in w", "in x as [4, 128]", "inout y"], scalars: [0], touch: {x: "dim0[0:+1]", w: "w[3]"}}
    - {k: emm, args: ["in w", "in x as [4, 128]", "inout y"], scalars: [1]}
    - {id: last, k: act, args: ["inout y"]}
forms:
  eager: {}
`

func TestTouchBecomesKernelHint(t *testing.T) {
	m, err := config.Parse("touchy.yaml", []byte(touchModel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Validate(m); err != nil {
		t.Fatal(err)
	}
	ks := m.Kernels()
	if want := []stages.Touch{{Arg: 0, Rows: 1}, {Arg: 1, Rows: 1}}; !slices.Equal(ks[0].Touch, want) {
		t.Fatalf("emm hints %+v, want %+v", ks[0].Touch, want)
	}
	if ks[1].Touch != nil {
		t.Fatalf("act hints %+v, want none", ks[1].Touch)
	}
}

// TestTouchErrors: a hint that cannot be one (or two sites of one kernel
// that disagree) is a *config.Error naming file:line, the key and the value.
func TestTouchErrors(t *testing.T) {
	const second = `touch: {x: "dim0[0:+1]", w: "w[3]"}`
	for _, tc := range []struct {
		name     string
		old, new string
		at       string   // text on the line the error must name
		want     []string // substrings of the message
	}{
		{name: "two sites, different rows", old: second, new: `touch: {x: "dim0[0:+1]", w: "w[0:+2]"}`, at: `w: "w[0:+2]"`,
			want: []string{`touch.w "w[0:+2]"`, "kernel emm", "2 rows of argument 0 here, 1 row at line 14", "every op that declares one must declare the same"}},
		{name: "two sites, different arguments", old: second, new: `touch: {w: "w[3]"}`, at: `touch: {w: "w[3]"}`,
			want: []string{`touch "argument 1"`, "kernel emm", "no hint of argument 1 here, 1 row at line 14"}},
		{name: "two sites, an extra argument", old: second, new: second[:len(second)-1] + `, y: "y[0:+4]"}`, at: `y: "y[0:+4]"`,
			want: []string{`touch.y "y[0:+4]"`, "4 rows of argument 2 here, no hint at line 14"}},
		{name: "not an argument", old: second, new: `touch: {w: "w[3]", z: "z[0]"}`, at: `z: "z[0]"`, want: []string{`touch "z"`, "unknown tensor"}},
		{name: "a tensor the task does not take", old: `{id: last, k: act, args: ["inout y"]}`, new: `{id: last, k: act, args: ["inout y"], touch: {w: "w[0]"}}`, at: "id: last",
			want: []string{`touch "w"`, "not an argument of this task"}},
		{name: "row count not a constant", old: second, new: `touch: {x: "dim0[0:+1]", w: "w[0:+e]"}`, at: `w: "w[0:+e]"`, want: []string{`touch.w "w[0:+e]"`, "undefined name"}},
		{name: "row count not positive", old: second, new: `touch: {x: "dim0[0:+1]", w: "w[0:+0]"}`, at: `w: "w[0:+0]"`, want: []string{`touch.w "w[0:+0]"`, "positive constant"}},
		{name: "whole view", old: second, new: `touch: {x: "dim0[0:+1]", w: "w"}`, at: `w: "w"}`, want: []string{`touch.w "w"`, "want w[start:+ROWS]"}},
		{name: "reshaped argument in tensor rows", old: second, new: `touch: {x: "x[0:+8]", w: "w[3]"}`, at: `x: "x[0:+8]"`, want: []string{`touch.x "x[0:+8]"`, "drops or reshapes x's dim 0", "dim0[start:+ROWS]"}},
		{name: "more rows than the argument", old: second, new: `touch: {x: "dim0[0:+5]", w: "w[3]"}`, at: `x: "dim0[0:+5]"`, want: []string{`touch.x "dim0[0:+5]"`, "reads 5 rows of an argument of 4"}},
		{name: "another tensor", old: second, new: `touch: {x: "dim0[0:+1]", w: "x[3]"}`, at: `w: "x[3]"`, want: []string{`touch.w "x[3]"`, "must view w"}},
		{name: "dummy", old: `{id: last, k: act, args: ["inout y"]}`, new: `{dummy: true, touch: {y: "y[0]"}}`, at: "dummy: true", want: []string{"touch", "no kernel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(touchModel, tc.old) {
				t.Fatalf("test case does not apply: %q not in the model", tc.old)
			}
			src := strings.Replace(touchModel, tc.old, tc.new, 1)
			_, err := config.Parse("touchy.yaml", []byte(src))
			wantConfigError(t, err, "touchy.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}

// TestDSv4RoutedExpertHints: in every MoE variant (hash-routed peeled,
// hash or sort, sort) the routed-expert kernels carry their hints: the
// matmuls read one expert of the 32 in their weight view (and the gate/up
// matmuls 16 rows of the 512 received tokens), the activations one expert's
// weight scales. Besides them, the 8-group output projection's matmuls
// read their group (proj_a_mm one of wo_a's 8 [1024, 4096] slices, 8 of
// the 64 packed head rows and its 1024 columns of o_r_pad; proj_b_mm its
// 1024 of wo_b's and o_r_i8_pad's 8192 columns and its 4096 of the
// partials'), the KV-cache writebacks and kv_touch the 8 token rows of
// their layer's cache, and pack_x_hc the 8 embedding rows its token ids
// pick (issue 30: without them the step simulated at twice upstream's
// wall). No other kernel is hinted.
func TestDSv4RoutedExpertHints(t *testing.T) {
	m := loadModel(t)
	want := map[string][]stages.Touch{
		"exp_gate_mm":     {{Arg: 1, Rows: 16}, {Arg: 2, Rows: 1}},
		"exp_up_mm":       {{Arg: 1, Rows: 16}, {Arg: 2, Rows: 1}},
		"exp_w2_mm":       {{Arg: 2, Rows: 1}},
		"exp_gate_up_act": {{Arg: 4, Rows: 1}, {Arg: 5, Rows: 1}},
		"exp_w2_act":      {{Arg: 4, Rows: 1}},
	}
	others := map[string]struct {
		touch  []stages.Touch
		copies int
	}{
		"proj_a_mm":                   {[]stages.Touch{{Arg: 0, Rows: 8}, {Arg: 1, Rows: 1}, {Arg: 2, Cols: 1024}}, 5},
		"proj_b_mm":                   {[]stages.Touch{{Arg: 0, Cols: 4096}, {Arg: 1, Cols: 1024}, {Arg: 2, Cols: 1024}}, 5},
		"swa_cache_insert_valid_bias": {[]stages.Touch{{Arg: 0, Rows: 8}}, 2},
		"csa_cache_writeback":         {[]stages.Touch{{Arg: 0, Rows: 8}}, 2},
		"hca_cache_writeback":         {[]stages.Touch{{Arg: 0, Rows: 8}}, 1},
		"kv_touch":                    {[]stages.Touch{{Arg: 0, Rows: 8}}, 2},
		"pack_x_hc":                   {[]stages.Touch{{Arg: 2, Rows: 8}}, 1},
	}
	seen := map[string]int{}
	// Upstream's per-block kernel copies: the hash-routed peeled block
	// uses BASE and BASE_0, the CSA MoE (hash or sort) BASE_1, the HCA MoE
	// (sort) BASE_2 and BASE_3.
	hinted := 0
	for _, k := range m.Kernels() {
		base := k.Name
		for _, suf := range []string{"_0", "_1", "_2", "_3"} {
			base = strings.TrimSuffix(base, suf)
		}
		if o, ok := others[base]; ok {
			seen[base]++
			if !slices.Equal(k.Touch, o.touch) {
				t.Errorf("kernel %s has hints %+v, want %+v", k.Name, k.Touch, o.touch)
			}
			continue
		}
		w, ok := want[base]
		if !ok {
			if k.Touch != nil {
				t.Errorf("kernel %s has hints %+v, want none", k.Name, k.Touch)
			}
			continue
		}
		hinted++
		if !slices.Equal(k.Touch, w) {
			t.Errorf("kernel %s has hints %+v, want %+v", k.Name, k.Touch, w)
		}
	}
	if hinted != 5*len(want) {
		t.Errorf("%d routed-expert kernels, want %d (5 copies of %d)", hinted, 5*len(want), len(want))
	}
	for base, o := range others {
		if seen[base] != o.copies {
			t.Errorf("%d copies of %s, want %d", seen[base], base, o.copies)
		}
	}
}

// tileModel reads 2-D tiles of a weight matrix: a K-split × N-tile matmul
// (rows and columns), a column strip, and a tile of a reshaped argument.
const tileModel = `model: tiles
entry:
  tensors:
    - {name: w, dtype: bf16, shape: [64, 96]}
    - {name: x, dtype: fp32, shape: [16, 64]}
    - {name: y, dtype: fp32, shape: [16, 96]}
kernels:
  - {name: mm, core: aic, sig: iix}
  - {name: strip, core: aic, sig: iix}
  - {name: flat, core: aiv, sig: ix}
program:
  body:
    - loop: {var: k, to: 4}
      body:
        - loop: {var: n, to: 3}
          body:
            - {k: mm, args: ["in x", "in w", "inout y"], scalars: [k, n], touch: {w: "w[k*16:+16, n*32:+32]"}}
    - {k: strip, args: ["in x", "in w", "inout y"], touch: {w: "w[:, 8:+32]", x: "x[3, :]"}}
    - {k: flat, args: ["in w as [2, 32, 96]", "inout y"], touch: {w: "dim0[1, min(2, 5)]"}}
forms:
  eager: {}
`

// TestTouchTileSyntax: ARG[ROWS, COLS] compiles to a hint of rows and
// columns (":" for all of a dim; a single index is 1).
func TestTouchTileSyntax(t *testing.T) {
	m, err := config.Parse("tiles.yaml", []byte(tileModel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Validate(m); err != nil {
		t.Fatal(err)
	}
	want := map[string][]stages.Touch{
		"mm":    {{Arg: 1, Rows: 16, Cols: 32}},
		"strip": {{Arg: 0, Rows: 1}, {Arg: 1, Cols: 32}},
		"flat":  {{Arg: 0, Rows: 1, Cols: 1}},
	}
	for _, k := range m.Kernels() {
		if !slices.Equal(k.Touch, want[k.Name]) {
			t.Errorf("kernel %s: hints %+v, want %+v", k.Name, k.Touch, want[k.Name])
		}
	}
}

// TestTouchTileErrors: each mistake in a tile hint names file:line, the key
// and the value.
func TestTouchTileErrors(t *testing.T) {
	const mm = `touch: {w: "w[k*16:+16, n*32:+32]"}`
	for _, tc := range []struct {
		name     string
		old, new string
		want     []string
	}{
		{"column count not a constant", mm, `touch: {w: "w[k*16:+16, n*32:+n]"}`, []string{`touch.w "w[k*16:+16, n*32:+n]"`, "column count must be a positive constant"}},
		{"column count not positive", mm, `touch: {w: "w[k*16:+16, 0:+0]"}`, []string{`touch.w "w[k*16:+16, 0:+0]"`, "column count must be a positive constant"}},
		{"columns undefined name", mm, `touch: {w: "w[k*16:+16, z:+4]"}`, []string{`touch.w "w[k*16:+16, z:+4]"`, "undefined name"}},
		{"columns bad form", mm, `touch: {w: "w[k*16:+16, 0:4]"}`, []string{`touch.w "w[k*16:+16, 0:4]"`, "start:+COLS"}},
		{"columns trailing", mm, `touch: {w: "w[k*16:+16, 0:+4 5]"}`, []string{`touch.w "w[k*16:+16, 0:+4 5]"`, "after the columns"}},
		{"nothing narrowed", mm, `touch: {w: "w[:, :]"}`, []string{`touch.w "w[:, :]"`, "must narrow something"}},
		{"rows part still checked", mm, `touch: {w: "w[0:+0, 0:+4]"}`, []string{`touch.w "w[0:+0, 0:+4]"`, "row count must be a positive constant"}},
		{"more columns than a reshaped argument", `touch: {w: "dim0[1, min(2, 5)]"}`, `touch: {w: "dim0[1, 0:+97]"}`, []string{`touch.w "dim0[1, 0:+97]"`, "reads 97 columns of an argument whose last dim is 96"}},
		{"two sites, different tiles", `- {k: strip,`, `- {k: mm, args: ["in x", "in w", "inout y"], touch: {w: "w[0:+16, 0:+64]"}}
    - {k: strip,`, []string{`touch.w "w[0:+16, 0:+64]"`, "kernel mm: 16 rows × 64 columns of argument 1 here, 16 rows × 32 columns at line 17"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tileModel, tc.old) {
				t.Fatalf("test case does not apply: %q not in the model", tc.old)
			}
			src := strings.Replace(tileModel, tc.old, tc.new, 1)
			_, err := config.Parse("tiles.yaml", []byte(src))
			at := tc.new
			if i := strings.LastIndexByte(at, '\n'); i >= 0 {
				at = at[:i]
			}
			wantConfigError(t, err, "tiles.yaml", lineOf(src, at), tc.want)
		})
	}
}

// FuzzTouch: no touch value makes the loader panic, and one it accepts
// compiles to non-negative counts on the argument it names.
func FuzzTouch(f *testing.F) {
	for _, s := range []string{"w[k*16:+16, n*32:+32]", "w[:, 8:+32]", "w[3, :]", "w[0:+1]", "w[:, :]", "w[min(1, 2), (3)]", "w[1, 2, 3]", "w[, ]", "w[1,", "dim0[0:+2, 0:+96]"} {
		f.Add(s)
	}
	const site = `touch: {w: "w[k*16:+16, n*32:+32]"}`
	f.Fuzz(func(t *testing.T, v string) {
		src := strings.Replace(tileModel, site, "touch: {w: "+strconv.Quote(v)+"}", 1)
		m, err := config.Parse("tiles.yaml", []byte(src))
		if err != nil {
			return
		}
		for _, k := range m.Kernels() {
			for _, h := range k.Touch {
				if h.Rows < 0 || h.Cols < 0 || h.Rows == 0 && h.Cols == 0 {
					t.Fatalf("%q: kernel %s hint %+v", v, k.Name, h)
				}
			}
		}
	})
}
