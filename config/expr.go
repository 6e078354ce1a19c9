package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hbg-dev/hbg/stages"
)

// The expression language: integers, names (constants, block params, loop
// vars, boundary scalars), + - * / %, comparisons, && || !, parentheses,
// c ? a : b, min(a, b) and max(a, b). Names are resolved when a template is
// compiled, so evaluating an expression on the hot path is a walk over a
// small tree with no lookups. Arithmetic is int64 and checked: a value that
// does not fit is an error, never a wrapped number.

type exprKind uint8

const (
	exConst exprKind = iota
	exVar            // env slot
	exNeg
	exNot
	exBin
	exCond
	exIndex // table[a]: an entry scalar by index
)

// expr is a compiled expression.
type expr struct {
	kind           exprKind
	op             string // exBin
	val            int64  // exConst
	slot           int    // exVar
	a, b           *expr
	c              *expr
	deps           uint64 // bit i: the expression reads env slot i (slots < 64)
	boundaryScalar int    // boundary scalar index when the whole expression is one (exVar), else -1
	src            string // source text, for messages
	// table is exIndex's values (the entry scalars, in order); name says
	// what they are, for messages.
	table []int64
	name  string
	// aff is the expression as c0 + Σ coef·env[slot] when it is affine in
	// its names, as nearly every view offset is (24*layer, 1024*csa_i…):
	// evaluating it is then a short loop, not a walk over the tree.
	aff *affine
}

type affine struct {
	c0    int64
	slots []int
	coefs []int64
}

// eval is the affine form's value; ok is false when a step overflows
// int64 (the caller then walks the tree, which says where).
func (a *affine) eval(env []int64) (v int64, ok bool) {
	v = a.c0
	for i, s := range a.slots {
		p, ok := mulOK(a.coefs[i], env[s])
		if !ok {
			return 0, false
		}
		if v, ok = addOK(v, p); !ok {
			return 0, false
		}
	}
	return v, true
}

// eval32 is the affine form's value when every coefficient and env value
// it reads fits 32 bits (so no product overflows) and the sum does not
// overflow; ok is false otherwise, and the caller takes a general path.
func (a *affine) eval32(env []int64) (v int64, ok bool) {
	v = a.c0
	for i, s := range a.slots {
		x, y := a.coefs[i], env[s]
		if x != int64(int32(x)) || y != int64(int32(y)) {
			return 0, false
		}
		if v, ok = addOK(v, x*y); !ok {
			return 0, false
		}
	}
	return v, true
}

// scaled is k·a, or nil when a coefficient overflows.
func (a *affine) scaled(k int64) *affine {
	c0, ok := mulOK(a.c0, k)
	if !ok {
		return nil
	}
	out := &affine{c0: c0, slots: a.slots, coefs: make([]int64, len(a.coefs))}
	for i, c := range a.coefs {
		if out.coefs[i], ok = mulOK(c, k); !ok {
			return nil
		}
	}
	return out
}

// sum is a + k·b, merging terms of the same slot, or nil when a coefficient
// overflows.
func (a *affine) sum(b *affine, k int64) *affine {
	kb, ok1 := mulOK(k, b.c0)
	c0, ok2 := addOK(a.c0, kb)
	if !ok1 || !ok2 {
		return nil
	}
	out := &affine{c0: c0, slots: append([]int(nil), a.slots...), coefs: append([]int64(nil), a.coefs...)}
	for i, s := range b.slots {
		j := 0
		for j < len(out.slots) && out.slots[j] != s {
			j++
		}
		if j == len(out.slots) {
			out.slots = append(out.slots, s)
			out.coefs = append(out.coefs, 0)
		}
		kc, ok1 := mulOK(k, b.coefs[i])
		c, ok2 := addOK(out.coefs[j], kc)
		if !ok1 || !ok2 {
			return nil
		}
		out.coefs[j] = c
	}
	return out
}

func addOK(x, y int64) (int64, bool) {
	s := x + y
	return s, (x^s)&(y^s) >= 0
}

func subOK(x, y int64) (int64, bool) {
	d := x - y
	return d, (x^y)&(x^d) >= 0
}

func mulOK(x, y int64) (int64, bool) {
	if x == 0 || y == 0 {
		return 0, true
	}
	p := x * y
	if p/y != x || x == -1 && y == math.MinInt64 || y == -1 && x == math.MinInt64 {
		return p, false
	}
	return p, true
}

// affineOf is e's affine form, or nil when it has none. Its operands'
// forms are read from their aff fields, which the parser set when it built
// them (it builds bottom up), never recomputed from their subtrees: that
// made a chain of n terms (i+i+...+i, a generated expression) cost n²/2
// steps to compile, 25 s for 8000 terms.
func affineOf(e *expr) *affine {
	switch e.kind {
	case exConst, exVar:
		return leafAffine(e)
	case exNeg:
		if a := operandAffine(e.a); a != nil {
			return a.scaled(-1)
		}
	case exBin:
		x, y := operandAffine(e.a), operandAffine(e.b)
		if x == nil || y == nil {
			return nil
		}
		switch e.op {
		case "+":
			return x.sum(y, 1)
		case "-":
			if y = y.scaled(-1); y == nil {
				return nil
			}
			return x.sum(y, 1)
		case "*":
			if len(x.slots) == 0 {
				return y.scaled(x.c0)
			}
			if len(y.slots) == 0 {
				return x.scaled(y.c0)
			}
		}
	}
	return nil
}

// operandAffine is the affine form of an operand the parser has built: a
// leaf's, or the one cached in aff (nil when it has none).
func operandAffine(e *expr) *affine {
	if e.kind == exConst || e.kind == exVar {
		return leafAffine(e)
	}
	return e.aff
}

func leafAffine(e *expr) *affine {
	if e.kind == exConst {
		return &affine{c0: e.val}
	}
	return &affine{slots: []int{e.slot}, coefs: []int64{1}}
}

// evalErr records the first runtime error of an evaluation (division by
// zero, overflow) without an error return on every node.
type evalErr struct{ err error }

func (ee *evalErr) set(format string, a ...any) {
	if ee != nil && ee.err == nil {
		ee.err = fmt.Errorf(format, a...)
	}
}

func (e *expr) eval(env []int64, ee *evalErr) int64 {
	if e.aff != nil {
		// The affine form is exact when it does not overflow; when it does,
		// the tree decides (a step of it may still fit).
		if v, ok := e.aff.eval(env); ok {
			return v
		}
	}
	switch e.kind {
	case exConst:
		return e.val
	case exVar:
		return env[e.slot]
	case exNeg:
		x := e.a.eval(env, ee)
		if x == math.MinInt64 {
			ee.set("%q overflows int64 (-(%d))", shorten(e.src), x)
			return 0
		}
		return -x
	case exNot:
		if e.a.eval(env, ee) == 0 {
			return 1
		}
		return 0
	case exCond:
		if e.c.eval(env, ee) != 0 {
			return e.a.eval(env, ee)
		}
		return e.b.eval(env, ee)
	case exIndex:
		i := e.a.eval(env, ee)
		if i < 0 || i >= int64(len(e.table)) {
			ee.set("%s in %q: want an index from 0 to %d (the model has %d)", fmt.Sprintf(e.name, i), shorten(e.src), len(e.table)-1, len(e.table))
			return 0
		}
		return e.table[i]
	}
	x := e.a.eval(env, ee)
	if e.op == "&&" {
		if x == 0 {
			return 0
		}
		return b2i(e.b.eval(env, ee) != 0)
	}
	if e.op == "||" {
		if x != 0 {
			return 1
		}
		return b2i(e.b.eval(env, ee) != 0)
	}
	y := e.b.eval(env, ee)
	return binop(e.op, x, y, ee, e.src)
}

func binop(op string, x, y int64, ee *evalErr, src string) int64 {
	var v int64
	ok := true
	switch op {
	case "+":
		v, ok = addOK(x, y)
	case "-":
		v, ok = subOK(x, y)
	case "*":
		v, ok = mulOK(x, y)
	case "/", "%":
		if y == 0 {
			ee.set("division by zero in %q", shorten(src))
			return 0
		}
		if op == "%" {
			if y == -1 {
				return 0 // MinInt64 % -1 is 0; Go agrees, and says so here
			}
			return x % y
		}
		v, ok = x/y, !(x == math.MinInt64 && y == -1)
	case "min":
		return min(x, y)
	case "max":
		return max(x, y)
	case "&&":
		return b2i(x != 0 && y != 0)
	case "||":
		return b2i(x != 0 || y != 0)
	case "==":
		return b2i(x == y)
	case "!=":
		return b2i(x != y)
	case "<":
		return b2i(x < y)
	case "<=":
		return b2i(x <= y)
	case ">":
		return b2i(x > y)
	case ">=":
		return b2i(x >= y)
	default:
		panic("config: unknown operator " + op)
	}
	if !ok {
		ee.set("%q overflows int64 (%d %s %d)", shorten(src), x, op, y)
		return 0
	}
	return v
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// isConst reports whether the expression reads no env slot.
func (e *expr) isConst() bool { return e.kind == exConst }

// ---- tokens

type tokKind uint8

const (
	tEOF tokKind = iota
	tInt
	tIdent
	tOp
)

type token struct {
	kind tokKind
	s    string
	v    int64
	pos  int
}

func tokenize(s string) ([]token, error) {
	var out []token
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
				j++
			}
			v, err := strconv.ParseInt(strings.ReplaceAll(s[i:j], "_", ""), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad integer %q at column %d", s[i:j], column(s, i))
			}
			out = append(out, token{kind: tInt, s: s[i:j], v: v, pos: i})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			out = append(out, token{kind: tIdent, s: s[i:j], pos: i})
			i = j
		default:
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "==", "!=", "<=", ">=", "&&", "||":
				out = append(out, token{kind: tOp, s: two, pos: i})
				i += 2
				continue
			}
			if strings.IndexByte("+-*/%()<>!?:[],@|", c) < 0 {
				// The character, not its first byte: %q of a byte of é
				// prints 'Ã'.
				r, n := utf8.DecodeRuneInString(s[i:])
				if r == utf8.RuneError && n <= 1 {
					return nil, fmt.Errorf("unexpected byte %#02x (not UTF-8) at column %d", c, column(s, i))
				}
				return nil, fmt.Errorf("unexpected character %q at column %d", r, column(s, i))
			}
			out = append(out, token{kind: tOp, s: string(c), pos: i})
			i++
		}
	}
	out = append(out, token{kind: tEOF, pos: len(s)})
	return out, nil
}

// resolver maps a name to a constant or an env slot. boundaryScalar is the boundary
// scalar index of the name, or -1.
type resolver func(name string) (val int64, slot int, boundaryScalar int, ok bool)

// exprParser is a precedence-climbing parser over a token slice; views and
// argument strings reuse it and stop at the first token it does not take.
type exprParser struct {
	src  string
	toks []token
	i    int
	res  resolver
	// tables gives the values a NAME(i) lookup indexes (scalar(i): the
	// entry scalars); nil where none is in scope.
	tables func(name string) ([]int64, bool)
	// slotDeps are, for a host local's env slot, the env slots its value
	// reads: a use of the local reads them too (nil: none).
	slotDeps map[int]uint64
}

func (p *exprParser) peek() token { return p.toks[p.i] }

// next stays on the end token once there: a caller that reads two tokens
// of an empty text (alloc: [""]) gets the end twice, not a panic.
func (p *exprParser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *exprParser) errf(t token, format string, a ...any) error {
	return fmt.Errorf("%s (at column %d of %q)", fmt.Sprintf(format, a...), column(p.src, t.pos), shorten(p.src))
}

// column is the 1-based column of byte offset i in s, counted in
// characters as an editor counts them (é is one column, two bytes).
func column(s string, i int) int {
	return utf8.RuneCountInString(s[:i]) + 1
}

// maxShown bounds the source text an error message quotes.
const maxShown = 80

// shorten keeps a message readable when the text it quotes is long (a
// generated expression, say): the head and the tail, with the middle elided.
func shorten(s string) string {
	if len(s) <= maxShown {
		return s
	}
	head, tail := maxShown-20, len(s)-16
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + " … " + s[tail:]
}

var precedence = map[string]int{"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}

// depth bounds nesting so that hostile input cannot overflow the stack.
const maxExprDepth = 200

func (p *exprParser) parseExpr(depth int) (*expr, error) {
	if depth > maxExprDepth {
		return nil, p.errf(p.peek(), "expression nested too deeply")
	}
	c, err := p.parseBin(1, depth)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tOp && t.s == "?" {
		p.next()
		a, err := p.parseExpr(depth + 1)
		if err != nil {
			return nil, err
		}
		if t := p.next(); t.kind != tOp || t.s != ":" {
			return nil, p.errf(t, "expected ':' of a conditional")
		}
		b, err := p.parseExpr(depth + 1)
		if err != nil {
			return nil, err
		}
		if c.isConst() {
			if c.val != 0 {
				return a, nil
			}
			return b, nil
		}
		return &expr{kind: exCond, c: c, a: a, b: b, deps: c.deps | a.deps | b.deps, boundaryScalar: -1}, nil
	}
	return c, nil
}

func (p *exprParser) parseBin(minPrec, depth int) (*expr, error) {
	lhs, err := p.parseUnary(depth)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		prec, ok := precedence[t.s]
		if t.kind != tOp || !ok || prec < minPrec {
			return lhs, nil
		}
		p.next()
		rhs, err := p.parseBin(prec+1, depth+1)
		if err != nil {
			return nil, err
		}
		if lhs.isConst() && rhs.isConst() {
			var ee evalErr
			v := binop(t.s, lhs.val, rhs.val, &ee, t.s)
			if ee.err != nil {
				if rhs.val == 0 && (t.s == "/" || t.s == "%") {
					return nil, p.errf(t, "division by zero")
				}
				return nil, p.errf(t, "%d %s %d overflows int64", lhs.val, t.s, rhs.val)
			}
			lhs = &expr{kind: exConst, val: v, boundaryScalar: -1}
			continue
		}
		lhs = &expr{kind: exBin, op: t.s, a: lhs, b: rhs, deps: lhs.deps | rhs.deps, boundaryScalar: -1}
		lhs.aff = affineOf(lhs)
	}
}

func (p *exprParser) parseUnary(depth int) (*expr, error) {
	if depth > maxExprDepth {
		return nil, p.errf(p.peek(), "expression nested too deeply")
	}
	t := p.next()
	switch {
	case t.kind == tInt:
		return &expr{kind: exConst, val: t.v, boundaryScalar: -1}, nil
	case t.kind == tIdent && (t.s == "min" || t.s == "max") && p.peek().kind == tOp && p.peek().s == "(":
		p.next()
		a, err := p.parseExpr(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tOp || c.s != "," {
			return nil, p.errf(c, "%s takes two arguments: %s(a, b)", t.s, t.s)
		}
		b, err := p.parseExpr(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tOp || c.s != ")" {
			return nil, p.errf(c, "expected ')' closing %s(a, b)", t.s)
		}
		if a.isConst() && b.isConst() {
			return &expr{kind: exConst, val: binop(t.s, a.val, b.val, nil, t.s), boundaryScalar: -1}, nil
		}
		return &expr{kind: exBin, op: t.s, a: a, b: b, deps: a.deps | b.deps, boundaryScalar: -1}, nil
	case t.kind == tIdent && p.peek().kind == tOp && p.peek().s == "(" && dieCounts[t.s] > 0:
		// rt_available_cluster_count(), rt_available_aiv_count(): the
		// a2a3 die a model is written for.
		p.next()
		if c := p.next(); c.kind != tOp || c.s != ")" {
			return nil, p.errf(c, "%s takes no arguments: %s()", t.s, t.s)
		}
		return &expr{kind: exConst, val: dieCounts[t.s], boundaryScalar: -1}, nil
	case t.kind == tIdent && t.s == "shape" && p.tables != nil && p.peek().kind == tOp && p.peek().s == "(":
		// shape(TENSOR, d): dim d of an entry tensor (upstream's
		// orch_args.tensor(i).ref().shapes[d]).
		p.next()
		n := p.next()
		if n.kind != tIdent {
			return nil, p.errf(n, "want shape(TENSOR, d), TENSOR an entry tensor")
		}
		tab, ok := p.tables("shape:" + n.s)
		if !ok {
			return nil, p.errf(n, "shape(%s, d): %q is not an entry tensor", n.s, n.s)
		}
		if c := p.next(); c.kind != tOp || c.s != "," {
			return nil, p.errf(c, "want shape(%s, d)", n.s)
		}
		return p.lookup(depth, t, "shape("+n.s+", ", "", tab, ")")
	case t.kind == tIdent && p.tables != nil && p.peek().kind == tOp && p.peek().s == "(":
		tab, ok := p.tables(t.s)
		if !ok {
			return nil, p.errf(t, "undefined function %q (want min, max, scalar, shape, a constant array or rt_available_cluster_count)", t.s)
		}
		p.next()
		return p.lookup(depth, t, t.s, "(", tab, ")")
	case t.kind == tIdent && p.tables != nil && p.peek().kind == tOp && p.peek().s == "[" && p.isArray(t.s):
		// A constant array, NAME[i] as the C++ says it.
		tab, _ := p.tables(t.s)
		p.next()
		return p.lookup(depth, t, t.s, "[", tab, "]")
	case t.kind == tIdent:
		if p.res == nil {
			return nil, p.errf(t, "undefined name %q", t.s)
		}
		v, slot, bs, ok := p.res(t.s)
		if !ok {
			return nil, p.errf(t, "undefined name %q", t.s)
		}
		if slot < 0 {
			return &expr{kind: exConst, val: v, boundaryScalar: -1}, nil
		}
		e := &expr{kind: exVar, slot: slot, boundaryScalar: bs}
		if slot < 64 {
			e.deps = 1<<uint(slot) | p.slotDeps[slot]
		}
		return e, nil
	case t.kind == tOp && t.s == "(":
		e, err := p.parseExpr(depth + 1)
		if err != nil {
			return nil, err
		}
		if t := p.next(); t.kind != tOp || t.s != ")" {
			return nil, p.errf(t, "expected ')'")
		}
		return e, nil
	case t.kind == tOp && (t.s == "-" || t.s == "!" || t.s == "+"):
		a, err := p.parseUnary(depth + 1)
		if err != nil {
			return nil, err
		}
		if t.s == "+" {
			return a, nil
		}
		if a.isConst() {
			if t.s == "-" {
				if a.val == math.MinInt64 {
					return nil, p.errf(t, "-(%d) overflows int64", a.val)
				}
				return &expr{kind: exConst, val: -a.val, boundaryScalar: -1}, nil
			}
			return &expr{kind: exConst, val: b2i(a.val == 0), boundaryScalar: -1}, nil
		}
		k := exNeg
		if t.s == "!" {
			k = exNot
		}
		e := &expr{kind: k, a: a, deps: a.deps, boundaryScalar: -1}
		if k == exNeg {
			e.aff = affineOf(e)
		}
		return e, nil
	case t.kind == tEOF:
		return nil, p.errf(t, "expression ends early")
	}
	return nil, p.errf(t, "unexpected %q", t.s)
}

// dieCounts are the values of upstream's rt_available_cluster_count() and
// rt_available_aiv_count() on the a2a3 die a model is written for.
var dieCounts = map[string]int64{"rt_available_cluster_count": stages.A2A3Clusters, "rt_available_aiv_count": stages.A2A3Clusters * stages.A2A3AIVPerCluster}

// isArray reports whether name is a table a NAME[i] lookup indexes: a
// constant array (not scalar, which is scalar(i)).
func (p *exprParser) isArray(name string) bool {
	if name == "scalar" {
		return false
	}
	_, ok := p.tables(name)
	return ok
}

// lookup parses the index of a table lookup after its opening bracket
// (open, after name) to close: a constant index is checked and folded
// here, at load; the error is at the name's token at.
func (p *exprParser) lookup(depth int, at token, name, open string, tab []int64, close string) (*expr, error) {
	a, err := p.parseExpr(depth + 1)
	if err != nil {
		return nil, err
	}
	if c := p.next(); c.kind != tOp || c.s != close {
		return nil, p.errf(c, "expected '%s' closing %s%si%s", close, name, open, close)
	}
	if a.isConst() {
		if a.val < 0 || a.val >= int64(len(tab)) {
			return nil, p.errf(at, "%s%s%d%s: want an index from 0 to %d (the model has %d)", name, open, a.val, close, len(tab)-1, len(tab))
		}
		return &expr{kind: exConst, val: tab[a.val], boundaryScalar: -1}, nil
	}
	return &expr{kind: exIndex, a: a, table: tab, name: name + open + "%d" + close, deps: a.deps, boundaryScalar: -1}, nil
}

// newParser tokenizes src and returns a parser over it.
func newParser(src string, res resolver) (*exprParser, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	return &exprParser{src: src, toks: toks, res: res}, nil
}

// parseExpr compiles a whole string as one expression.
func parseExpr(s string, res resolver) (*expr, error) { return parseExprT(s, res, nil) }

// parseExprT is parseExpr with NAME(i) lookups into tables.
func parseExprT(s string, res resolver, tables func(string) ([]int64, bool)) (*expr, error) {
	p, err := newParser(s, res)
	if err != nil {
		return nil, err
	}
	p.tables = tables
	e, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errf(t, "unexpected %q after the expression", t.s)
	}
	e.src = s
	setSrc(e, s)
	return e, nil
}

func setSrc(e *expr, s string) {
	if e == nil || e.src != "" && e.src != s {
		return
	}
	e.src = s
	setSrc(e.a, s)
	setSrc(e.b, s)
	setSrc(e.c, s)
}

// entryTables is the loader's lookups: scalar(i), the i-th entry scalar
// (upstream's orch_args.scalar(i)); a constant array's NAME[i]; and
// "shape:TENSOR", an entry tensor's shape, for shape(TENSOR, d).
func (l *loader) entryTables(name string) ([]int64, bool) {
	if l.m == nil {
		return nil, false
	}
	if name == "scalar" {
		return l.m.entryScalars, true
	}
	if t, ok := strings.CutPrefix(name, "shape:"); ok {
		for i := range l.m.entry {
			if l.m.entry[i].name == t {
				return l.m.entry[i].shape, true
			}
		}
		return nil, false
	}
	a, ok := l.m.constArrays[name]
	return a, ok
}
