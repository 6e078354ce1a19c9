package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// maxTensorList bounds a tensor list's length.
const maxTensorList = 1 << 16

// allocItem parses "NAME DTYPE[d, ...] [manual_dep]" and gives it a slot.
func (sc *scope) allocItem(src string, nd *yaml.Node) (allocItem, error) {
	l := sc.l
	p, err := sc.parser(nd, "alloc", src)
	if err != nil {
		return allocItem{}, err
	}
	name := p.next()
	it := allocItem{name: name.s, elem: -1}
	if t := p.peek(); name.kind == tIdent && t.kind == tOp && t.s == "[" {
		// NAME[k]: element k of the tensor list NAME.
		p.next()
		e, err := p.parseExpr(0)
		if err != nil {
			return allocItem{}, l.errf(nd, "alloc", src, "%v", err)
		}
		if c := p.next(); c.kind != tOp || c.s != "]" {
			return allocItem{}, l.errf(nd, "alloc", src, "%v", p.errf(c, "expected ']'"))
		}
		if !e.isConst() || e.val < 0 || e.val >= maxTensorList {
			return allocItem{}, l.errf(nd, "alloc", src, "a tensor list element's index must be a constant from 0 to %d", maxTensorList-1)
		}
		it.elem = int(e.val)
	}
	dt := p.next()
	if name.kind != tIdent || dt.kind != tIdent {
		return allocItem{}, l.errf(nd, "alloc", src, "want \"NAME DTYPE[d0, d1, ...] [manual_dep]\" (or NAME[k] for element k of a tensor list)")
	}
	if it.dtype, err = stages.ParseDType(dt.s); err != nil {
		return allocItem{}, l.errf(nd, "alloc", src, "%v", err)
	}
	if it.shape, err = sc.exprList(p); err != nil {
		return allocItem{}, l.errf(nd, "alloc", src, "bad shape: %v", err)
	}
	if len(it.shape) == 0 || len(it.shape) > stages.MaxDims {
		return allocItem{}, l.errf(nd, "alloc", src, "want 1 to %d dimensions", stages.MaxDims)
	}
	if t := p.peek(); t.kind == tIdent && t.s == "manual_dep" {
		p.next()
		it.manualDep = true
	}
	if t := p.peek(); t.kind == tIdent && t.s == "initial" {
		// TensorCreateInfo::set_initial_value(v): every element is v
		// when the tensor is made, which a host read sees.
		p.next()
		e, err := p.parseExpr(0)
		if err != nil {
			return allocItem{}, l.errf(nd, "alloc", src, "bad initial value: %v", err)
		}
		if !e.isConst() {
			return allocItem{}, l.errf(nd, "alloc", src, "want a constant initial value (set_initial_value takes one value)")
		}
		it.initial, it.hasInitial = e.val, true
	}
	if t := p.peek(); t.kind != tEOF {
		return allocItem{}, l.errf(nd, "alloc", src, "unexpected %q (want \"NAME DTYPE[d0, d1, ...] [manual_dep] [initial V]\")", t.s)
	}
	for _, d := range it.shape {
		setSrc(d, src)
	}
	cs := make([]int64, len(it.shape))
	constant := true
	for i, d := range it.shape {
		sc.use(d.deps, nd.Line, "alloc", src)
		if !d.isConst() {
			constant = false
			continue
		}
		if d.val <= 0 {
			return allocItem{}, l.errf(nd, "alloc", src, "dimension %d is %d (want a positive size)", i, d.val)
		}
		cs[i] = d.val
	}
	if constant {
		if !shapeOK(cs, it.dtype) {
			return allocItem{}, l.errf(nd, "alloc", src, "the shape %v of %s overflows int64 bytes", cs, it.dtype)
		}
		it.constShape = cs
		it.constView = stages.NewView(0, 0, it.dtype, cs...)
	}
	if it.elem >= 0 {
		// A list element always takes a new slot; the alloc op registers the
		// list once it has every element.
		it.slot = len(sc.b.slotNames)
		sc.b.slotNames = append(sc.b.slotNames, fmt.Sprintf("%s[%d]", it.name, it.elem))
		return it, nil
	}
	if sc.tensorList(it.name) != nil {
		return allocItem{}, l.errf(nd, "alloc", it.name, "duplicate name: %s is a tensor list", it.name)
	}
	// A name that the block already allocates reuses the slot (the newest
	// allocation of a name is the one later uses see); a name that shadows a
	// boundary slot or an entry tensor is a mistake.
	for i := len(sc.b.slotNames) - 1; i >= 0; i-- {
		if sc.b.slotNames[i] == it.name {
			if i < sc.b.fixedSlots {
				return allocItem{}, l.errf(nd, "alloc", it.name, "duplicate name: %s already names %s", it.name, sc.tensorNames())
			}
			if sc.b.nonLocal[i] {
				return allocItem{}, l.errf(nd, "alloc", it.name, "duplicate name: %s is a let view of a tensor the block does not allocate", it.name)
			}
			it.slot = i
			return it, nil
		}
	}
	if _, ok := sc.vals[it.name]; ok {
		return allocItem{}, l.errf(nd, "alloc", it.name, "duplicate name: a param or loop var has this name")
	}
	it.slot = len(sc.b.slotNames)
	sc.b.slotNames = append(sc.b.slotNames, it.name)
	return it, nil
}

// alloc compiles an alloc op: one alloc task for its items, which are
// tensors of their own names or the elements of tensor lists (NAME[k]).
func (sc *scope) alloc(o *op, an *yaml.Node) error {
	l := sc.l
	o.kind = opAlloc
	items, err := l.seq(an, "alloc")
	if err != nil {
		return err
	}
	seen := map[string]int{}
	elems := map[string][]int{} // list name -> slot of element k
	var order []string
	for i, it := range items {
		a, err := sc.allocItem(it.Value, it)
		if err != nil {
			return err
		}
		if a.elem < 0 {
			// Two roots of one name in one alloc would shadow each
			// other (a use means the newest): say which is which.
			if j, dup := seen[a.name]; dup {
				return l.errf(it, "alloc", it.Value, "duplicate name %s in one alloc (item %d is %q): each root needs its own name, or make them a tensor list: %s[0], %s[1]", a.name, j, items[j].Value, a.name, a.name)
			}
			if _, isList := elems[a.name]; isList {
				return l.errf(it, "alloc", it.Value, "duplicate name: %s is a tensor list in this alloc", a.name)
			}
			seen[a.name] = i
		} else {
			if _, dup := seen[a.name]; dup {
				return l.errf(it, "alloc", it.Value, "duplicate name: %s is a tensor in this alloc", a.name)
			}
			s := elems[a.name]
			if s == nil {
				order = append(order, a.name)
			}
			for len(s) <= a.elem {
				s = append(s, -1)
			}
			if s[a.elem] >= 0 {
				return l.errf(it, "alloc", it.Value, "duplicate element %s[%d] in one alloc", a.name, a.elem)
			}
			s[a.elem] = a.slot
			elems[a.name] = s
		}
		o.allocs = append(o.allocs, a)
	}
	for _, name := range order {
		for k, slot := range elems[name] {
			if slot < 0 {
				return l.errf(an, "alloc", name, "tensor list %s has no element %d (want elements 0 to %d, each once)", name, k, len(elems[name])-1)
			}
		}
		if err := sc.bindList(an, name, elems[name]); err != nil {
			return err
		}
	}
	return nil
}
