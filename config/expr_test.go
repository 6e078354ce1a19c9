package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// testRes knows three env slots (a, b, c), a boundary scalar s and a constant K.
func testRes(name string) (int64, int, int, bool) {
	switch name {
	case "a":
		return 0, 0, -1, true
	case "b":
		return 0, 1, -1, true
	case "c":
		return 0, 2, -1, true
	case "s":
		return 0, 3, 0, true
	case "K":
		return 32, -1, -1, true
	}
	return 0, 0, 0, false
}

func TestExprEval(t *testing.T) {
	env := []int64{3, 4, -5, 7}
	for _, tc := range []struct {
		src  string
		want int64
	}{
		{"1 + 2 * 3", 7},
		{"(1 + 2) * 3", 9},
		{"2*a + 2", 8},
		{"K * a - b / 2", 94},
		{"c % 3", -2},
		{"-a + +b", 1},
		{"a < b && b < c", 0},
		{"a < b || b < c", 1},
		{"!(a == 3)", 0},
		{"2*a + 2 < 3", 0},
		{"a >= 3 ? K : 0", 32},
		{"a != 3 ? 1 : b ? 2 : 3", 2},
		{"1_000 + s", 1007},
		{"a <= 3 && b > 3 && c != 0", 1},
	} {
		e, err := parseExpr(tc.src, testRes)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		var ee evalErr
		if got := e.eval(env, &ee); got != tc.want || ee.err != nil {
			t.Errorf("%q = %d (%v), want %d", tc.src, got, ee.err, tc.want)
		}
	}
	if e, _ := parseExpr("s", testRes); e.boundaryScalar != 0 {
		t.Error("a bare boundary scalar keeps its slot")
	}
	if e, _ := parseExpr("s + 0", testRes); e.boundaryScalar != -1 {
		t.Error("a computed value loses the boundary scalar's provenance")
	}
	if e, _ := parseExpr("K * 2", testRes); !e.isConst() || e.val != 64 {
		t.Error("constants fold")
	}
}

func TestExprErrors(t *testing.T) {
	for _, src := range []string{"", "1 +", "(1", "1)", "a b", "x + 1", "1 / 0", "a ? 1", "3 $ 4", "99999999999999999999", "[1]"} {
		if _, err := parseExpr(src, testRes); err == nil {
			t.Errorf("%q parsed", src)
		}
	}
	var ee evalErr
	e, err := parseExpr("b / (a - 3)", testRes)
	if err != nil {
		t.Fatal(err)
	}
	if e.eval([]int64{3, 4, 0, 0}, &ee); ee.err == nil {
		t.Error("division by zero at run time is reported")
	}
}

// TestTokenErrors: a character the language does not take is printed as
// written, at its column counted in characters; a byte that is not UTF-8
// is said to be one.
func TestTokenErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"a + é", "unexpected character 'é' at column 5"},
		{"aé", "unexpected character 'é' at column 2"},
		{"a + 世", "unexpected character '世' at column 5"},
		{"a\xff", "unexpected byte 0xff (not UTF-8) at column 2"},
		{"a # 1", "unexpected character '#' at column 3"},
	} {
		_, err := parseExpr(tc.src, testRes)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
}

// FuzzExpr checks that no input makes the parser or the evaluator panic, that
// parsing is deterministic, and that parenthesizing an expression keeps its
// value. The seeds run as part of the normal tests.
func FuzzExpr(f *testing.F) {
	for _, s := range []string{
		"1 + 2 * 3", "2*a + 2 < 3", "a ? b : c", "-(-(-a))", "!!a", "K*a - b/2 % 3",
		"a && b || !c", "1_000", "((((a))))", "a == b != c", "s", "16*e", "c ? 1 : 2 ? 3 : 4",
		"9223372036854775807 + 1", "-9223372036854775807 - 1", "a / 0", "(a", "a)", "a ? : b",
		"24*a + 3*(b - a) - -c", "-(a*4) + 2*(3*b) - a", "(a+b)*(c+1)",
		"min(a, b)", "max(a, min(b, c)) * 2", "min(a)", "max(,)", "min(a, b, c)", "min + 1",
		"a * 4611686018427387904", "a * 9223372036854775807 - b", "-9223372036854775807 - 1 - a", "(a + 9223372036854775807) - 9223372036854775807",
		"a / -1", "c % -1",
		"scalar(0)", "scalar(a)", "scalar(a % 3) * 2 + scalar(2 - b)", "scalar(3)", "scalar(-1)", "scalar()", "scalar(a, b)", "scalr(1)",
		"min(scalar(a), scalar(b)) ? scalar(c) : 9",
		"ids[a]", "ids[ids[a % 2]]", "ids[]", "ids[1", "ids(a)", "scalar[0]", "nope[1]", "ids[a] + shape(x, 1)", "shape(x, a)", "shape(y, 0)", "shape(x)", "shape(1, 0)",
		"rt_available_cluster_count()", "rt_available_aiv_count() / 2", "rt_available_cluster_count(a)", "rt_available_cluster_count",
	} {
		f.Add(s, int64(3), int64(-2), int64(0))
	}
	f.Add("scalar(a) + scalar(b)", int64(1), int64(2), int64(0))
	f.Fuzz(func(t *testing.T, src string, a, b, c int64) {
		e, err := parseExprT(src, testRes, testTables)
		if err != nil {
			return
		}
		env := []int64{a, b, c, 7}
		var ee1, ee2 evalErr
		v1 := e.eval(env, &ee1)
		e2, err := parseExprT("("+src+")", testRes, testTables)
		if err != nil && strings.Contains(err.Error(), "nested too deeply") {
			return // the parenthesis is one level past the depth bound
		}
		if err != nil {
			t.Fatalf("%q parses but (%q) does not: %v", src, src, err)
		}
		v2 := e2.eval(env, &ee2)
		if v1 != v2 || (ee1.err == nil) != (ee2.err == nil) {
			t.Fatalf("%q = %d (%v), parenthesized %d (%v)", src, v1, ee1.err, v2, ee2.err)
		}
		// The affine fast path must agree with the tree walk.
		// Both are exact when they do not overflow; the affine form may
		// succeed where a step of the tree overflows.
		var ee3 evalErr
		if v3 := stripAffine(e).eval(env, &ee3); ee3.err == nil && (v3 != v1 || ee1.err != nil) {
			t.Fatalf("%q = %d (%v) by its affine form, %d by the tree", src, v1, ee1.err, v3)
		}
	})
}

// testTables gives scalar(i) three entry scalars, a constant array ids
// and an entry tensor x of shape [4, 8].
func testTables(name string) ([]int64, bool) {
	switch name {
	case "scalar":
		return []int64{3, 5, -7}, true
	case "ids":
		return []int64{2, 0, 9}, true
	case "shape:x":
		return []int64{4, 8}, true
	}
	return nil, false
}

// stripAffine copies e without the affine forms, so eval walks the tree.
func stripAffine(e *expr) *expr {
	if e == nil {
		return nil
	}
	c := *e
	c.aff = nil
	c.a, c.b, c.c = stripAffine(e.a), stripAffine(e.b), stripAffine(e.c)
	return &c
}

// FuzzView checks that the view grammar (boundary views; in a body, tensor
// lists and let names too), task expressions, task list targets and kernel
// lists never panic, at compile time or when evaluated.
func FuzzView(f *testing.F) {
	for _, s := range []string{"w", "w[2*l:+2]", "w[1]", "w @ 16*l as [4, 4]", "w[l] as [2, 8]", "w[:+2]", "w[1:2]", "w as []", "w @", "[", "w[1]]",
		"h[l]", "h[l % 2][1:+1]", "h", "h[5]", "a @ 4 as [2, 2]", "a[min(l, 3)]", "h[max(l, -1)] as [16]",
		"gate[l]", "gate[0:+3]", "gate*", "gate[*]", "first", "first*", "first[0]", "prev", "prev[l:+1]", "gate[-1:+2]",
		"[mm, mm][l]", "[mm][0]", "[mm, act][l]", "[mm,][", "[][l]",
		"w[:, 1:+3]", "w[1:+2, 3:+4]", "w[2, 3]", "w[:, 2] as [16]", "w[:, :]", "w[l, :, 0]", "w[:, l:+l]", "w[:,]", "w[, 1]",
		"a[:, 0:+2]", "a[1:+2, 1]", "a as [16]", "a[l] as [4]", "h[l][:, 0:+1]", "w[:, scalar(l):+2]",
		"first if l > 0", "gate[0] if l", "prev if", "gate if l == 1 junk", "prev[l:+1] if !l",
		"gate?", "gate[l]?", "first?", "prev?", "gate[0:+2]? if l", "gate??", "gate ?", "tensor(l)", "tensor(0)[1:+2]", "tensor(", "tensor(l) manual_dep",
		"w manual_dep", "w[l:+2] manual_dep", "a as [16] manual_dep", "h[l] manual_dep", "w manual_dep manual_dep", "w manual_dep[1]", "w[:, 1:+3] manual_dep"} {
		f.Add(s, int64(1))
	}
	// Row starts at and just past the last valid one (w has 16 rows).
	for _, l := range []int64{7, 8, 14, 15, 16} {
		f.Add("w[l:+2]", l)
		f.Add("w[2*l:+2] @ 16", l)
		f.Add("w[l]", l)
	}
	b := &block{name: "t", params: []string{"l"}, tensors: []string{}, variantSlot: -1}
	l := &loader{file: "fuzz", m: &Model{consts: map[string]int64{}, kernelIdx: map[string]stages.KernelID{"mm": 0, "act": 1},
		kernels: []stages.Kernel{{Name: "mm", Core: stages.KindAIC}, {Name: "act", Core: stages.KindAIV}}}}
	l.m.entry = []entryTensor{{name: "w"}}
	l.m.entryScalars = []int64{1, 2}
	// A body with a tensor w (16 x 16), a let view a, a tensor list h of
	// two, a task list gate, an op id first and a task param prev.
	body := &block{name: "body", params: []string{"l"}, variantSlot: -1, envSize: 1, structural: make([]int, 64),
		slotNames: []string{"w", "a", "h[0]", "h[1]"}, fixedSlots: 1, lists: []tensorList{{name: "h", slots: []int{2, 3}}},
		taskLists: []string{"gate"}, ids: []string{"first"}, taskParams: []string{"prev"}}
	w := stages.NewView(0, 0, stages.FP32, 16, 16)
	l.m.entryViews = []stages.View{w}
	fr := newFrame(body)
	bfr := newFrame(b)
	f.Fuzz(func(t *testing.T, src string, lv int64) {
		sc := &scope{l: l, b: b, boundary: true}
		if v, err := sc.view(src, 1); err == nil {
			// A boundary view's fast form agrees with the general path
			// whenever it accepts.
			bfr.env = []int64{lv}
			r := &runner{model: l.m, form: &form{name: "fuzz"}}
			checkFast(t, r, bfr, v)
			checkFastSlot(t, l, r, bfr, &boundSlot{name: "s", view: v, line: 1})
		}
		bs := &scope{l: l, b: body, vals: map[string]int{"l": 0}, labelDef: map[string]bool{"first": true}, allIDs: map[string]bool{"first": true}}
		r := &runner{model: l.m, form: &form{name: "fuzz"}}
		fr.env[0] = lv
		// a is a strided tile: 4 x 4 of w's rows (stride 16).
		tileA := stages.NewView(0, 16, stages.FP32, 4, 4)
		tileA.Strides[0] = 16
		fr.tensors = []stages.View{w, tileA, w, w}
		fr.taskLists = [][]stages.TaskID{{3, stages.NoTask, 5}}
		fr.idTasks = [][]stages.TaskID{{7}}
		fr.taskParams = [][]stages.TaskID{{1, 2}}
		if v, err := bs.view(src, 1); err == nil {
			var out stages.View
			r.view(fr, v, &out)
		}
		nd := &yaml.Node{Kind: yaml.ScalarNode, Value: src, Line: 1}
		if ref, err := bs.taskRef(nd, "deps"); err == nil {
			r.taskSeq(nil, fr, ref, 1)
		}
		if tt, err := bs.taskTarget(nd, "id", src); err == nil {
			r.store(fr, tt, []stages.TaskID{9}, 1)
		}
		if strings.HasPrefix(src, "[") {
			_, _ = bs.kernelList(&taskOp{kernel: [3]stages.KernelID{-1, -1, -1}}, nd)
		}
	})
}

// TestNoAliases: an alias node (which yaml.v3 only makes after its anchor,
// itself refused first) is refused with its line and key.
func TestNoAliases(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: &x [1]\nb: *x\n"), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	err := plainTree("f.yaml", root, "model config")
	if err == nil || !strings.Contains(err.Error(), `f.yaml:1: a "&x": YAML anchors are not supported`) {
		t.Fatalf("anchor: %v", err)
	}
	root.Content[1].Anchor = ""
	err = plainTree("f.yaml", root, "model config")
	if err == nil || !strings.Contains(err.Error(), `f.yaml:2: b "*x": YAML aliases are not supported`) {
		t.Fatalf("alias: %v", err)
	}
}

// TestShorten: a long text keeps its head and tail, cut on rune
// boundaries; a short one is kept whole.
func TestShorten(t *testing.T) {
	if got := shorten("a + b"); got != "a + b" {
		t.Errorf("short text changed: %q", got)
	}
	long := strings.Repeat("é", 100)
	got := shorten(long)
	if !utf8.ValidString(got) || !strings.Contains(got, " … ") || len(got) >= len(long) {
		t.Errorf("shorten(%d bytes) = %q", len(long), got)
	}
}

// checkFast: when v has a fast form and it accepts in fr's env, the general
// path accepts too, with the same view.
func checkFast(t *testing.T, r *runner, fr *frame, v *viewExpr) {
	t.Helper()
	if v.kind != baseEntry {
		return
	}
	f, ok := compileFast(v, r.model.entryViews[v.base])
	if !ok {
		return
	}
	var fast, slow stages.View
	if !f.eval(fr.env, &fast) {
		return
	}
	r.err = nil
	if !r.view(fr, v, &slow) || r.err != nil {
		t.Fatalf("%q env %v: the fast form gives %+v, the general path fails: %v", v.src, fr.env, fast, r.err)
	}
	if fast != slow {
		t.Fatalf("%q env %v: the fast form gives %+v, the general path %+v", v.src, fr.env, fast, slow)
	}
}

// checkFastSlot: a boundary slot's fast form agrees with the general path
// whenever it accepts.
func checkFastSlot(t *testing.T, l *loader, r *runner, fr *frame, s *boundSlot) {
	t.Helper()
	fs := l.fastSlot(s)
	rows := true
	if fs.kind == slotRow {
		y := fr.env[fs.row.slot]
		rows = y == int64(int32(y))
	}
	var fast, slow stages.View
	if !fs.eval(fr.env, rows, fr.tensorArgs, &fast) {
		return
	}
	r.err = nil
	if !r.view(fr, s.view, &slow) || r.err != nil {
		t.Fatalf("%q env %v: the fast slot (kind %d) gives %+v, the general path fails: %v", s.view.src, fr.env, fs.kind, fast, r.err)
	}
	if fast != slow {
		t.Fatalf("%q env %v: the fast slot (kind %d) gives %+v, the general path %+v", s.view.src, fr.env, fs.kind, fast, slow)
	}
}

// TestFastBoundary: the boundaries of the shipped models' blocks come out
// of runner.boundary the same, views and errors, with the slots' fast
// forms as with the general path alone, over params around the bounds and
// past them (where the fast forms must refuse) and tensor params of the
// declared dtype and shape or not.
func TestFastBoundary(t *testing.T) {
	vals := []int64{math.MinInt64, math.MinInt32 - 1, math.MinInt32, -1000, -2, -1, 0, 1, 2, 3, 7, 8, 20, 41, 42, 43, 63, 64, 85, 86, 128, 1000, 1 << 20, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt64}
	kinds := map[slotKind]int{}
	for _, path := range []string{"models/dsv4_flash_decode.yaml", "models/qwen3_14b_decode.yaml"} {
		m, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range m.blocks {
			if b.auto {
				continue
			}
			for _, f := range b.fastBoundary {
				kinds[f.kind]++
			}
			general := *b
			general.fastBoundary = make([]fastSlot, len(b.fastBoundary))
			for i, f := range b.fastBoundary {
				general.fastBoundary[i] = fastSlot{kind: slotGeneral, tag: f.tag}
			}
			fast, slow := newFrame(b), newFrame(&general)
			out1, out2 := make([]stages.Arg, len(b.boundary)), make([]stages.Arg, len(b.boundary))
			run := func(what string) {
				t.Helper()
				r1, r2 := &runner{model: m, form: m.forms[0]}, &runner{model: m, form: m.forms[0]}
				copy(slow.env, fast.env)
				copy(slow.tensorArgs, fast.tensorArgs)
				r1.boundary(fast, nil, out1)
				r2.boundary(slow, nil, out2)
				if fmt.Sprint(r1.err) != fmt.Sprint(r2.err) {
					t.Fatalf("%s %s env %v: %v with the fast forms, %v without", b.name, what, fast.env, r1.err, r2.err)
				}
				if r1.err == nil && !slices.Equal(out1, out2) {
					t.Fatalf("%s %s env %v: the fast forms give\n%v\nthe general path\n%v", b.name, what, fast.env, out1, out2)
				}
			}
			// Tensor params as declared, of another dtype, of another shape
			// of the same rank, of another rank, of a rank one short.
			for _, bad := range []string{"", "dtype", "shape", "rank", "ndims"} {
				for i, s := range b.boundary {
					if s.view.kind == baseTArg && s.view.plain() {
						sh := append([]int64(nil), s.shape...)
						if sh == nil {
							sh = []int64{3, int64(i + 1)}
						}
						dt := s.dtype
						if dt == stages.DTypeInvalid {
							dt = stages.BF16
						}
						switch bad {
						case "dtype":
							dt = stages.INT8
						case "shape":
							sh[len(sh)-1]++
						case "rank":
							sh = append(sh, 1)
						}
						v := stages.NewView(stages.RootID(200+i), 0, dt, sh...)
						if bad == "ndims" {
							v.NDims-- // not a view NewView makes: its last dim is still set
						}
						fast.tensorArgs[s.view.base] = v
					}
				}
				for _, x := range vals {
					for i := range fast.env {
						fast.env[i] = x
					}
					run("all params")
					// One param at a time, the others 0.
					for i := range b.params {
						clear(fast.env)
						fast.env[i] = x
						run(b.params[i])
					}
				}
			}
		}
	}
	if kinds[slotRow] == 0 || kinds[slotConst] == 0 || kinds[slotTArg] == 0 {
		t.Fatalf("slot kinds %v: want some of each fast kind", kinds)
	}
}

// TestLongExprLinear: compiling an expression costs about its length. Each
// node's affine form used to be recomputed from its whole subtree, so a
// chain of n terms (the outside tester's "i+i+...+i", 8000 terms: 25 s)
// allocated about n²/2 forms. Allocations count the work without a clock.
func TestLongExprLinear(t *testing.T) {
	const n = 2000
	for _, tc := range []struct{ name, term, op string }{
		{"sum", "a", "+"},
		{"difference", "a", "-"},
		{"scaled terms", "2*b", "+"},
		{"negated terms", "-c", "+"},
		{"not affine", "a%3", "+"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Repeat(tc.term+tc.op, n-1) + tc.term
			var err error
			allocs := testing.AllocsPerRun(1, func() { _, err = parseExpr(src, testRes) })
			if err != nil {
				t.Fatal(err)
			}
			if allocs > 20*n {
				t.Errorf("%d terms: %.0f allocations, want at most %d (linear in the length)", n, allocs, 20*n)
			}
		})
	}
}
