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
	deps         uint64
	list         []int // a tensor list's slots: the base is list[listIndex]
	listIndex    *expr
	local        bool // the base is a tensor the body allocates itself
	src          string
	line         int
}

// view parses NAME ( [i] | [start:+count] )? (@ off)? (as [d, ...])?.
func (sc *scope) view(src string, line int) (*viewExpr, error) {
	p, err := newParser(src, sc.intRes)
	if err != nil {
		return nil, err
	}
	v, err := sc.viewTokens(p, line)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errf(t, "unexpected %q after the view", t.s)
	}
	v.src = src
	for _, e := range append([]*expr{v.index, v.start, v.count, v.at, v.listIndex}, v.as...) {
		setSrc(e, src)
	}
	return v, nil
}

func (sc *scope) viewTokens(p *exprParser, line int) (*viewExpr, error) {
	t := p.next()
	if t.kind != tIdent {
		return nil, p.errf(t, "a view starts with a tensor name")
	}
	add := func(v *viewExpr, e *expr) *expr { v.deps |= e.deps; return e }
	var v *viewExpr
	if tl := sc.tensorList(t.s); tl != nil {
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
		e, err := p.parseExpr(0)
		if err != nil {
			return nil, err
		}
		if t := p.peek(); t.kind == tOp && t.s == ":" {
			p.next()
			if t := p.next(); t.kind != tOp || t.s != "+" {
				return nil, p.errf(t, "want [start:+rows]")
			}
			c, err := p.parseExpr(0)
			if err != nil {
				return nil, err
			}
			v.start, v.count = add(v, e), add(v, c)
		} else {
			v.index = add(v, e)
		}
		if t := p.next(); t.kind != tOp || t.s != "]" {
			return nil, p.errf(t, "expected ']'")
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
