package config

import (
	"strings"
	"testing"
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
	if e, _ := parseExpr("s", testRes); e.bscal != 0 {
		t.Error("a bare boundary scalar keeps its slot")
	}
	if e, _ := parseExpr("s + 0", testRes); e.bscal != -1 {
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

// FuzzExpr checks that no input makes the parser or the evaluator panic, that
// parsing is deterministic, and that parenthesizing an expression keeps its
// value. The seeds run as part of the normal tests.
func FuzzExpr(f *testing.F) {
	for _, s := range []string{
		"1 + 2 * 3", "2*a + 2 < 3", "a ? b : c", "-(-(-a))", "!!a", "K*a - b/2 % 3",
		"a && b || !c", "1_000", "((((a))))", "a == b != c", "s", "16*e", "c ? 1 : 2 ? 3 : 4",
		"9223372036854775807 + 1", "-9223372036854775807 - 1", "a / 0", "(a", "a)", "a ? : b",
		"24*a + 3*(b - a) - -c", "-(a*4) + 2*(3*b) - a", "(a+b)*(c+1)",
	} {
		f.Add(s, int64(3), int64(-2), int64(0))
	}
	f.Fuzz(func(t *testing.T, src string, a, b, c int64) {
		e, err := parseExpr(src, testRes)
		if err != nil {
			return
		}
		env := []int64{a, b, c, 7}
		var ee1, ee2 evalErr
		v1 := e.eval(env, &ee1)
		e2, err := parseExpr("("+src+")", testRes)
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
		var ee3 evalErr
		if v3 := stripAffine(e).eval(env, &ee3); v3 != v1 {
			t.Fatalf("%q = %d by its affine form, %d by the tree", src, v1, v3)
		}
	})
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

// FuzzView checks the view and argument grammar never panics.
func FuzzView(f *testing.F) {
	for _, s := range []string{"w", "w[2*l:+2]", "w[1]", "w @ 16*l as [4, 4]", "w[l] as [2, 8]", "w[:+2]", "w[1:2]", "w as []", "w @", "[", "w[1]]"} {
		f.Add(s)
	}
	b := &block{name: "t", params: []string{"l"}, tensors: []string{}, vslot: -1}
	l := &loader{file: "fuzz", m: &Model{consts: map[string]int64{}}}
	l.m.entry = []entryTensor{{name: "w"}}
	f.Fuzz(func(t *testing.T, src string) {
		sc := &scope{l: l, b: b, boundary: true}
		_, _ = sc.view(src, 1)
	})
}
