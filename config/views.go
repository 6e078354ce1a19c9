package config

import (
	"fmt"

	"github.com/hbg-dev/hbg/stages"
)

const (
	baseSlot  baseKind = iota // a tensor slot of the frame
	baseEntry                 // an entry tensor (boundary expressions)
	baseTArg                  // a tensor param of the call (boundary expressions)
)

type baseKind uint8

// viewExpr is a compiled view: a base tensor, then an optional row index or
// row slice on dim 0, an element offset and a reshape.
type viewExpr struct {
	kind         baseKind
	base         int
	index        *expr
	start, count *expr
	at           *expr
	as           []*expr
	// dims is a slice of several dims, NAME[s0, s1, ...] (each s is ":",
	// an index or start:+n): the result keeps the base's strides, so a
	// tile of a wider tensor is a strided view. nil for the dim-0 forms.
	dims      []dimSel
	deps      uint64
	list      []int // a tensor list's slots: the base is list[listIndex]
	listIndex *expr
	local     bool // the base is a tensor the body allocates itself
	slotPlain bool // a tensor slot as it is: the view is a copy of it
	// manualDep is the view's own manual_dep (upstream's view(shapes,
	// offsets, true), make_tensor_external(..., true)): the result is
	// manual_dep. A view without it derived from a manual_dep base is not
	// (upstream's view() and reshape() reset the flag); a plain name keeps
	// its base's.
	manualDep bool
	// entryList: the list is the entry tensors, tensor(EXPR).
	entryList bool
	src       string
	line      int
}

// dimSel is one dim of a multi-dim slice: every element (all), one index
// (the dim is dropped), or count elements from start.
type dimSel struct {
	all          bool
	index        *expr
	start, count *expr
}

// layoutDeps is the env slots the view's layout reads: its row count and
// reshape dims. Its row start or index and @ offset move it, which a
// Graph's boundary may do from call to call; a layout that changes does
// not match the recorded Definition (Model.layoutWarnings).
func (v *viewExpr) layoutDeps() uint64 {
	var d uint64
	if v.count != nil {
		d |= v.count.deps
	}
	for _, e := range v.as {
		d |= e.deps
	}
	for _, s := range v.dims {
		if s.count != nil {
			d |= s.count.deps
		}
	}
	return d
}

// plain reports whether the view is its base as it is.
func (v *viewExpr) plain() bool {
	return v.list == nil && v.index == nil && v.start == nil && v.at == nil && v.as == nil && v.dims == nil && !v.manualDep
}

// view parses NAME ( [i] | [start:+count] )? (@ off)? (as [d, ...])? manual_dep?.
func (sc *scope) view(src string, line int) (*viewExpr, error) {
	p, err := sc.newParser(src)
	if err != nil {
		return nil, err
	}
	v, err := sc.viewTokens(p, line)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tIdent && t.s == "manual_dep" {
		p.next()
		v.manualDep = true
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errf(t, "unexpected %q after the view (want at most \"manual_dep\")", t.s)
	}
	v.src = src
	for _, e := range append([]*expr{v.index, v.start, v.count, v.at, v.listIndex}, v.as...) {
		setSrc(e, src)
	}
	for _, s := range v.dims {
		setSrc(s.index, src)
		setSrc(s.start, src)
		setSrc(s.count, src)
	}
	v.slotPlain = v.kind == baseSlot && v.plain()
	return v, nil
}

func (sc *scope) viewTokens(p *exprParser, line int) (*viewExpr, error) {
	t := p.next()
	if t.kind != tIdent {
		return nil, p.errf(t, "a view starts with a tensor name")
	}
	add := func(v *viewExpr, e *expr) *expr { v.deps |= e.deps; return e }
	var v *viewExpr
	if _, _, named := sc.tensor(t.s); t.s == "tensor" && !named && sc.tensorList(t.s) == nil && p.peek().kind == tOp && p.peek().s == "(" {
		// tensor(EXPR): upstream's orch_args.tensor(i) with a computed
		// i, the entry tensors as a list (the program's first slots).
		if sc.boundary || !sc.b.isProgram {
			return nil, p.errf(t, "tensor(i) is an entry tensor by position: only the program body names one (pass it to %s as a tensor param)", sc.b.name)
		}
		p.next()
		e, err := p.parseExpr(0)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tOp || c.s != ")" {
			return nil, p.errf(c, "expected ')' closing tensor(i)")
		}
		n := len(sc.l.m.entry)
		if e.isConst() && (e.val < 0 || e.val >= int64(n)) {
			return nil, p.errf(t, "tensor(%d): want an index from 0 to %d (the model has %d entry tensors)", e.val, n-1, n)
		}
		v = &viewExpr{kind: baseSlot, base: 0, list: make([]int, n), line: line, entryList: true}
		for i := range v.list {
			v.list[i] = i
		}
		v.listIndex = add(v, e)
	} else if tl := sc.tensorList(t.s); tl != nil {
		// A tensor list: its element is chosen by expression, NAME[i].
		if o := p.next(); o.kind != tOp || o.s != "[" {
			return nil, p.errf(o, "%s is a tensor list: pick an element, %s[i]", t.s, t.s)
		}
		e, err := p.parseExpr(0)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tOp || c.s != "]" {
			return nil, p.errf(c, "expected ']'")
		}
		v = &viewExpr{kind: baseSlot, base: tl.slots[0], list: tl.slots, line: line}
		v.listIndex = add(v, e)
		v.local = sc.slotLocal(tl.slots[0])
		for _, s := range tl.slots[1:] {
			if sc.slotLocal(s) != v.local {
				return nil, fmt.Errorf("tensor list %s mixes tensors the block allocates with tensors it does not", t.s)
			}
		}
	} else {
		k, idx, ok := sc.tensor(t.s)
		if !ok {
			return nil, fmt.Errorf("unknown tensor %q (want %s)", t.s, sc.tensorNames())
		}
		v = &viewExpr{kind: k, base: idx, line: line, local: k == baseSlot && sc.slotLocal(idx)}
	}
	if t := p.peek(); t.kind == tOp && t.s == "[" {
		p.next()
		dims, err := sc.dimSels(p, add, v)
		if err != nil {
			return nil, err
		}
		if len(dims) > 1 || dims[0].all {
			v.dims = dims
		} else if dims[0].index != nil {
			v.index = dims[0].index
		} else {
			v.start, v.count = dims[0].start, dims[0].count
		}
	}
	if t := p.peek(); t.kind == tOp && t.s == "@" {
		p.next()
		e, err := p.parseBin(1, 0)
		if err != nil {
			return nil, err
		}
		v.at = add(v, e)
	}
	if t := p.peek(); t.kind == tIdent && t.s == "as" {
		p.next()
		dims, err := sc.exprList(p)
		if err != nil {
			return nil, err
		}
		if len(dims) == 0 || len(dims) > stages.MaxDims {
			return nil, fmt.Errorf("a reshape takes 1 to %d dimensions, got %d", stages.MaxDims, len(dims))
		}
		for _, d := range dims {
			add(v, d)
		}
		v.as = dims
	}
	return v, nil
}

// dimSels parses the parts of NAME[...] after its '[' to the ']': one or
// more of ":" (every element), an index, or start:+count, comma-separated.
func (sc *scope) dimSels(p *exprParser, add func(*viewExpr, *expr) *expr, v *viewExpr) ([]dimSel, error) {
	var out []dimSel
	for {
		var d dimSel
		if t := p.peek(); t.kind == tOp && t.s == ":" {
			p.next()
			d.all = true
		} else {
			e, err := p.parseExpr(0)
			if err != nil {
				return nil, err
			}
			if t := p.peek(); t.kind == tOp && t.s == ":" {
				p.next()
				if t := p.next(); t.kind != tOp || t.s != "+" {
					return nil, p.errf(t, "want [start:+count]")
				}
				c, err := p.parseExpr(0)
				if err != nil {
					return nil, err
				}
				d.start, d.count = add(v, e), add(v, c)
			} else {
				d.index = add(v, e)
			}
		}
		out = append(out, d)
		if len(out) > stages.MaxDims {
			return nil, p.errf(p.peek(), "a view slices at most %d dims", stages.MaxDims)
		}
		t := p.next()
		if t.kind == tOp && t.s == "]" {
			return out, nil
		}
		if t.kind != tOp || t.s != "," {
			return nil, p.errf(t, "expected ',' or ']'")
		}
	}
}

// exprList parses "[e, e, ...]".
func (sc *scope) exprList(p *exprParser) ([]*expr, error) {
	if t := p.next(); t.kind != tOp || t.s != "[" {
		return nil, p.errf(t, "expected '['")
	}
	var out []*expr
	for {
		if t := p.peek(); t.kind == tOp && t.s == "]" {
			p.next()
			return out, nil
		}
		e, err := p.parseExpr(0)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		t := p.next()
		if t.kind == tOp && t.s == "]" {
			return out, nil
		}
		if t.kind != tOp || t.s != "," {
			return nil, p.errf(t, "expected ',' or ']'")
		}
	}
}

// rows is the dim-0 extent of the view when it is a constant row slice, or
// (own: the argument's own dim 0) a constant reshape.
func (v *viewExpr) rows(own bool) (int64, bool) {
	if own && v.as != nil {
		return v.as[0].val, v.as[0].isConst()
	}
	if v.count != nil && v.index == nil && v.as == nil {
		return v.count.val, v.count.isConst()
	}
	return 0, false
}

// viewFast is a view over an entry tensor whose layout is fixed at load
// time (constant rows, constant reshape) and whose offset is affine in at
// most one env slot per part: evaluating it is a copy of its template and
// two multiply-adds. It only accepts: when a bound does not hold, or a
// value does not fit 32 bits, the general path (runner.view) evaluates the
// view again and says what is wrong, exactly as it would have.
type viewFast struct {
	// In the order a row slice reads them (fastSlot's slotRow).
	row     term  // the index or row start (unused: none)
	rowMax  int64 // the largest valid row start
	stride0 int64
	base    int64       // the base's offset
	tmpl    stages.View // the result, but for its offset
	at      term        // the element offset (unused: none)
	lo, hi  int64       // the result's offset stays in [lo, hi]
}

// term is c0 + coef·env[slot] (slot -1: c0), coef within 32 bits; used
// tells it from no term at all.
type term struct {
	c0, coef int64
	slot     int32
	used     bool
}

func termOf(e *expr) (term, bool) {
	a := affineOf(e)
	if a == nil || len(a.slots) > 1 {
		return term{}, false
	}
	t := term{c0: a.c0, slot: -1, used: true}
	if len(a.slots) == 1 {
		if c := a.coefs[0]; c != int64(int32(c)) {
			return term{}, false
		}
		t.coef, t.slot = a.coefs[0], int32(a.slots[0])
	}
	return t, true
}

// eval is the term's value; ok is false when the env value does not fit 32
// bits or the sum overflows.
func (t *term) eval(env []int64) (int64, bool) {
	if t.slot < 0 {
		return t.c0, true
	}
	y := env[t.slot]
	if y != int64(int32(y)) {
		return 0, false
	}
	return addOK(t.c0, t.coef*y)
}

// compileFast is v's fast form over base; ok is false when v has none: a
// tensor list, an index, start or offset that is not one term, a row
// count or reshape that is not constant, or one that could never be valid.
func compileFast(v *viewExpr, base stages.View) (f viewFast, ok bool) {
	if v.list != nil || v.dims != nil {
		return f, false
	}
	f = viewFast{tmpl: base, base: base.Offset}
	if v.index != nil || v.start != nil {
		if base.NDims == 0 {
			return f, false
		}
		e, count := v.index, int64(1)
		if v.start != nil {
			if !v.count.isConst() || v.count.val <= 0 {
				return f, false
			}
			e, count = v.start, v.count.val
		}
		if f.row, ok = termOf(e); !ok {
			return f, false
		}
		f.rowMax, f.stride0 = base.Shape[0]-count, base.Strides[0]
		if f.rowMax < 0 {
			return f, false
		}
		if d, ok := mulOK(f.rowMax, f.stride0); !ok {
			return f, false
		} else if _, ok := addOK(base.Offset, d); !ok {
			return f, false
		}
		takeRows(&f.tmpl, &base, v.index != nil, count)
	}
	if v.at != nil {
		if f.at, ok = termOf(v.at); !ok {
			return f, false
		}
	}
	if v.as != nil {
		shape := make([]int64, len(v.as))
		for i, d := range v.as {
			if !d.isConst() || d.val <= 0 {
				return f, false
			}
			shape[i] = d.val
		}
		if !shapeOK(shape, base.DType) {
			return f, false
		}
		f.tmpl = stages.NewView(base.Root, 0, base.DType, shape...)
	}
	f.tmpl.Offset = 0
	if !v.plain() {
		// As runner.view: a derived view's flag is its own.
		f.tmpl.ManualDep = v.manualDep
	}
	end, ok := addOK(base.Offset, base.Elems())
	if !ok {
		return f, false
	}
	f.lo, f.hi = base.Offset, end-f.tmpl.Elems()
	return f, f.hi >= f.lo
}

// eval writes the view into out, or reports false when the general path
// must decide (a bound that does not hold, a value that does not fit).
func (f *viewFast) eval(env []int64, out *stages.View) bool {
	off := f.base
	if f.row.used {
		s, ok := f.row.eval(env)
		if !ok || s < 0 || s > f.rowMax {
			return false
		}
		off += s * f.stride0
	}
	if f.at.used {
		a, ok := f.at.eval(env)
		if !ok {
			return false
		}
		if off, ok = addOK(off, a); !ok {
			return false
		}
	}
	if off < f.lo || off > f.hi {
		return false
	}
	*out = f.tmpl
	out.Offset = off
	return true
}
