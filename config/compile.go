package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

type baseKind uint8

const (
	baseSlot  baseKind = iota // a tensor slot of the frame
	baseEntry                 // an entry tensor (boundary expressions)
	baseTArg                  // a tensor param of the call (boundary expressions)
)

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

// scope compiles one block's (or the program's) ops.
type scope struct {
	l        *loader
	b        *block
	boundary bool
	vals     map[string]int
	labelDef map[string]bool
	allIDs   map[string]bool // every op id of the block, defined or not yet
	inLoop   []*op
}

// collectIDs finds every op id in a body, so that a dependency on a later op
// is reported as the cycle it would be rather than as an unknown id.
func collectIDs(n *yaml.Node, out map[string]bool) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "id" && n.Content[i+1].Kind == yaml.ScalarNode && !strings.Contains(n.Content[i+1].Value, "[") {
				out[n.Content[i+1].Value] = true
			}
		}
	}
	for _, c := range n.Content {
		collectIDs(c, out)
	}
}

var tagLong = map[stages.Tag]string{stages.TagInput: "in", stages.TagOutput: "out", stages.TagInOut: "inout", stages.TagOutputExisting: "out_existing", stages.TagNoDep: "no_dep"}

func (sc *scope) intRes(name string) (int64, int, int, bool) {
	if sc.boundary {
		return sc.l.boundaryRes(sc.b)(name)
	}
	if s, ok := sc.vals[name]; ok {
		bs := -1
		if s >= sc.b.scalarBase && s < sc.b.scalarBase+len(sc.b.scalars) {
			bs = s - sc.b.scalarBase
		}
		return 0, s, bs, true
	}
	v, ok := sc.l.m.consts[name]
	return v, -1, -1, ok
}

// tensor resolves a tensor name.
func (sc *scope) tensor(name string) (baseKind, int, bool) {
	if sc.boundary {
		for i, t := range sc.b.tensors {
			if t == name {
				return baseTArg, i, true
			}
		}
		for i, e := range sc.l.m.entry {
			if e.name == name {
				return baseEntry, i, true
			}
		}
		return 0, 0, false
	}
	// Newest definition wins: search from the end.
	for i := len(sc.b.slotNames) - 1; i >= 0; i-- {
		if sc.b.slotNames[i] == name {
			return baseSlot, i, true
		}
	}
	return 0, 0, false
}

// tensorList resolves a tensor list name (the newest definition).
func (sc *scope) tensorList(name string) *tensorList {
	if sc.boundary {
		return nil
	}
	for i := len(sc.b.lists) - 1; i >= 0; i-- {
		if sc.b.lists[i].name == name {
			return &sc.b.lists[i]
		}
	}
	return nil
}

// slotLocal reports whether a tensor slot holds a tensor the block
// allocates itself (an alloc, or a let viewing one).
func (sc *scope) slotLocal(slot int) bool {
	return slot >= sc.b.fixedSlots && !sc.b.nonLocal[slot]
}

func (sc *scope) tensorNames() string {
	if sc.boundary {
		return "a tensor param or an entry tensor"
	}
	if sc.b.isProgram {
		return "an entry tensor or an earlier alloc"
	}
	return "a boundary slot or an earlier alloc of " + sc.b.name
}

// use records that the body's structure depends on the env slots e reads.
func (sc *scope) use(deps uint64, line int) {
	if sc.boundary {
		return
	}
	for s := 0; s < 64; s++ {
		if deps&(1<<uint(s)) == 0 {
			continue
		}
		if s < len(sc.b.params) || s == sc.b.variantSlot {
			if sc.b.structural[s] == 0 {
				sc.b.structural[s] = line
			}
		}
	}
}

func (sc *scope) expr(s string) (*expr, error) { return parseExpr(s, sc.intRes) }

// view parses NAME ( [i] | [start:+count] )? (@ off)? (as [d, ...])?.
func (sc *scope) view(src string, line int) (*viewExpr, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := &exprParser{src: src, toks: toks, res: sc.intRes}
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

// allocItem parses "NAME DTYPE[d, ...] [manual_dep]" and gives it a slot.
func (sc *scope) allocItem(src string, nd *yaml.Node) (allocItem, error) {
	l := sc.l
	toks, err := tokenize(src)
	if err != nil {
		return allocItem{}, l.errf(nd, "alloc", src, "%v", err)
	}
	p := &exprParser{src: src, toks: toks, res: sc.intRes}
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
	if t := p.peek(); t.kind != tEOF {
		return allocItem{}, l.errf(nd, "alloc", src, "unexpected %q (want \"NAME DTYPE[d0, d1, ...] [manual_dep]\")", t.s)
	}
	for _, d := range it.shape {
		setSrc(d, src)
	}
	cs := make([]int64, len(it.shape))
	constant := true
	for i, d := range it.shape {
		sc.use(d.deps, nd.Line)
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

var opKeys = []string{"alloc", "scope", "loop", "call", "read", "let", "tasks", "set", "k", "mix", "dummy", "if", "body", "with", "id", "bn", "args", "scalars", "deps", "pred", "touch"}

// maxTensorList bounds a tensor list's length.
const maxTensorList = 1 << 16

func (sc *scope) ops(n *yaml.Node, key string) ([]*op, error) {
	items, err := sc.l.seq(n, key)
	if err != nil {
		return nil, err
	}
	var out []*op
	for _, it := range items {
		o, err := sc.op(it)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func (sc *scope) op(n *yaml.Node) (*op, error) {
	l := sc.l
	allowed := append([]string(nil), opKeys...)
	allowed = append(allowed, sc.b.variants...)
	f, _, err := l.fields(n, "op", allowed...)
	if err != nil {
		return nil, err
	}
	o := &op{line: n.Line}
	if c := f["if"]; c != nil {
		if o.cond, err = sc.expr(c.Value); err != nil {
			return nil, l.errf(c, "if", c.Value, "bad expression: %v", err)
		}
		sc.use(o.cond.deps, c.Line)
	}
	only := func(kind string, keys ...string) error {
		for k, v := range f {
			if k != kind && k != "if" && !contains(keys, k) {
				return l.errf(v, kind, k, "unexpected key in a %s op (want %s)", kind, strings.Join(append([]string{kind, "if"}, keys...), ", "))
			}
		}
		return nil
	}
	switch {
	case f["alloc"] != nil:
		if err := only("alloc"); err != nil {
			return nil, err
		}
		o.kind = opAlloc
		items, err := l.seq(f["alloc"], "alloc")
		if err != nil {
			return nil, err
		}
		seen := map[string]int{}
		elems := map[string][]int{} // list name -> slot of element k
		var order []string
		for i, it := range items {
			a, err := sc.allocItem(it.Value, it)
			if err != nil {
				return nil, err
			}
			if a.elem < 0 {
				// Two roots of one name in one alloc would shadow each
				// other (a use means the newest): say which is which.
				if j, dup := seen[a.name]; dup {
					return nil, l.errf(it, "alloc", it.Value, "duplicate name %s in one alloc (item %d is %q): each root needs its own name, or make them a tensor list: %s[0], %s[1]", a.name, j, items[j].Value, a.name, a.name)
				}
				if _, isList := elems[a.name]; isList {
					return nil, l.errf(it, "alloc", it.Value, "duplicate name: %s is a tensor list in this alloc", a.name)
				}
				seen[a.name] = i
			} else {
				if _, dup := seen[a.name]; dup {
					return nil, l.errf(it, "alloc", it.Value, "duplicate name: %s is a tensor in this alloc", a.name)
				}
				s := elems[a.name]
				if s == nil {
					order = append(order, a.name)
				}
				for len(s) <= a.elem {
					s = append(s, -1)
				}
				if s[a.elem] >= 0 {
					return nil, l.errf(it, "alloc", it.Value, "duplicate element %s[%d] in one alloc", a.name, a.elem)
				}
				s[a.elem] = a.slot
				elems[a.name] = s
			}
			o.allocs = append(o.allocs, a)
		}
		for _, name := range order {
			for k, slot := range elems[name] {
				if slot < 0 {
					return nil, l.errf(f["alloc"], "alloc", name, "tensor list %s has no element %d (want elements 0 to %d, each once)", name, k, len(elems[name])-1)
				}
			}
			if err := sc.bindList(f["alloc"], name, elems[name]); err != nil {
				return nil, err
			}
		}
		return o, nil
	case f["let"] != nil:
		if err := only("let"); err != nil {
			return nil, err
		}
		return o, sc.let(o, f["let"])
	case f["tasks"] != nil:
		if err := only("tasks"); err != nil {
			return nil, err
		}
		return o, sc.tasksOp(o, f["tasks"])
	case f["set"] != nil:
		if err := only("set"); err != nil {
			return nil, err
		}
		return o, sc.setOp(o, f["set"])
	case f["scope"] != nil:
		if err := only("scope", "body"); err != nil {
			return nil, err
		}
		o.kind = opScope
		switch f["scope"].Value {
		case "auto":
			o.mode = stages.ScopeAuto
		case "manual":
			o.mode = stages.ScopeManual
		default:
			return nil, l.errf(f["scope"], "scope", f["scope"].Value, "unknown scope mode (want auto or manual)")
		}
		if f["body"] == nil {
			return nil, l.errf(n, "scope.body", "", "missing")
		}
		o.body, err = sc.ops(f["body"], "body")
		return o, err
	case f["loop"] != nil:
		if err := only("loop", "body"); err != nil {
			return nil, err
		}
		return o, sc.loop(o, f["loop"], f["body"], n)
	case f["call"] != nil:
		if err := only("call", "with"); err != nil {
			return nil, err
		}
		return o, sc.call(o, f["call"], f["with"])
	case f["read"] != nil:
		if err := only("read"); err != nil {
			return nil, err
		}
		o.kind = opRead
		o.readRoot = -1
		for i, e := range l.m.entry {
			if e.name == f["read"].Value {
				o.readRoot = i
				if !e.hasValue {
					return nil, l.errf(f["read"], "read", e.name, "entry tensor has no value to read (want an entry tensor with value:)")
				}
			}
		}
		if o.readRoot < 0 {
			return nil, l.errf(f["read"], "read", f["read"].Value, "unknown tensor (want an entry tensor)")
		}
		return o, nil
	case f["k"] != nil || f["mix"] != nil || f["dummy"] != nil:
		return o, sc.task(o, f, n)
	case f["body"] != nil && f["if"] != nil:
		if err := only("if", "body"); err != nil {
			return nil, err
		}
		o.kind = opIf
		o.body, err = sc.ops(f["body"], "body")
		return o, err
	}
	return nil, l.errf(n, "op", "", "unknown op (want alloc, let, tasks, set, scope, loop, call, read, a task with k, mix or dummy, or if with body)")
}

func (sc *scope) loop(o *op, ln, body, n *yaml.Node) error {
	l := sc.l
	o.kind = opLoop
	lf, _, err := l.fields(ln, "loop", "var", "from", "to", "step")
	if err != nil {
		return err
	}
	if lf["var"] == nil || lf["to"] == nil {
		return l.errf(ln, "loop", "", "want var and to (from defaults to 0)")
	}
	v := lf["var"].Value
	if !isIdent(v) {
		return l.errf(lf["var"], "loop.var", v, "want an identifier")
	}
	if _, clash := sc.vals[v]; clash {
		return l.errf(lf["var"], "loop.var", v, "duplicate name: already a param, scalar or enclosing loop var")
	}
	if _, clash := l.m.consts[v]; clash {
		return l.errf(lf["var"], "loop.var", v, "duplicate name: a constant has this name")
	}
	o.from = &expr{kind: exConst, boundaryScalar: -1}
	if fr := lf["from"]; fr != nil {
		if o.from, err = sc.expr(fr.Value); err != nil {
			return l.errf(fr, "loop.from", fr.Value, "bad expression: %v", err)
		}
	}
	if o.to, err = sc.expr(lf["to"].Value); err != nil {
		return l.errf(lf["to"], "loop.to", lf["to"].Value, "bad expression: %v", err)
	}
	if st := lf["step"]; st != nil {
		if o.step, err = sc.expr(st.Value); err != nil {
			return l.errf(st, "loop.step", st.Value, "bad expression: %v", err)
		}
		if o.step.isConst() && o.step.val <= 0 {
			return l.errf(st, "loop.step", st.Value, "a loop's step must be positive")
		}
		sc.use(o.step.deps, ln.Line)
	}
	sc.use(o.from.deps|o.to.deps, ln.Line)
	if body == nil {
		return l.errf(n, "loop.body", "", "missing")
	}
	o.loopSlot = sc.b.envSize
	sc.b.envSize++
	sc.vals[v] = o.loopSlot
	before := len(sc.b.ids)
	sc.inLoop = append(sc.inLoop, o)
	o.body, err = sc.ops(body, "body")
	sc.inLoop = sc.inLoop[:len(sc.inLoop)-1]
	delete(sc.vals, v)
	for i := before; i < len(sc.b.ids); i++ {
		o.loopIDs = append(o.loopIDs, i)
	}
	return err
}

func (sc *scope) call(o *op, cn, wn *yaml.Node) error {
	l := sc.l
	o.kind = opCall
	callee := l.m.blockIdx[cn.Value]
	if callee == nil {
		return l.errf(cn, "call", cn.Value, "unknown block (want one of %s)", strings.Join(l.m.Blocks(), ", "))
	}
	if callee == sc.b {
		return l.errf(cn, "call", cn.Value, "a block cannot call itself")
	}
	if !sc.b.isProgram && !sc.b.auto {
		return l.errf(cn, "call", cn.Value, "only the program and blocks with boundary: auto may call blocks")
	}
	if sc.b.auto && callee.auto {
		return l.errf(cn, "call", cn.Value, "a block with boundary: auto cannot call another such block")
	}
	c := &callOp{callee: callee, line: cn.Line, params: make([]*expr, len(callee.params)), tensorArgs: make([]*viewExpr, len(callee.tensors)), variant: -1}
	var with map[string]*yaml.Node
	if wn != nil {
		var err error
		if with, _, err = l.fields(wn, "with", append(append(append(append([]string(nil), callee.params...), callee.tensors...), callee.taskParams...), "variant")...); err != nil {
			return err
		}
	}
	for i, p := range callee.params {
		vn := with[p]
		if vn == nil {
			return l.errf(cn, "call "+callee.name, p, "missing parameter (want with: {%s: ...})", p)
		}
		e, err := sc.expr(vn.Value)
		if err != nil {
			return l.errf(vn, "with."+p, vn.Value, "bad expression: %v", err)
		}
		c.params[i] = e
	}
	if vn := with["variant"]; vn != nil {
		for i, v := range callee.variants {
			if v == vn.Value {
				c.variant = i
			}
		}
		if c.variant < 0 {
			return l.errf(vn, "with.variant", vn.Value, "unknown variant of %s (want one of %s)", callee.name, strings.Join(callee.variants, ", "))
		}
	} else if len(callee.variants) > 0 {
		return l.errf(cn, "call "+callee.name, "variant", "missing (want one of %s)", strings.Join(callee.variants, ", "))
	} else {
		c.variant = 0
	}
	for i, t := range callee.tensors {
		src, line := t, cn.Line
		if vn := with[t]; vn != nil {
			src, line = vn.Value, vn.Line
		}
		v, err := sc.view(src, line)
		if err != nil {
			nd := cn
			if with[t] != nil {
				nd = with[t]
			}
			return l.errf(nd, "with."+t, src, "%v", err)
		}
		if !(sc.b.auto && !v.local) {
			sc.use(v.deps, line)
		}
		c.tensorArgs[i] = v
	}
	// Task params: the tasks the callee may wait on (a Graph call's external
	// dependencies); unbound ones take the caller's task of the same name.
	for _, tp := range callee.taskParams {
		vn := with[tp]
		if vn == nil {
			if _, _, ok := sc.taskName(tp); !ok {
				return l.errf(cn, "call "+callee.name, tp, "missing task parameter (want with: {%s: TASK}, TASK an op id, a task list element or a task param)", tp)
			}
			vn = &yaml.Node{Kind: yaml.ScalarNode, Value: tp, Line: cn.Line}
		}
		refs, err := sc.taskRefs(vn, "with."+tp)
		if err != nil {
			return err
		}
		c.tasks = append(c.tasks, refs)
	}
	c.localSlots = make([]bool, len(callee.boundary))
	for s, b := range callee.boundary {
		if b.view.kind == baseTArg {
			c.localSlots[s] = c.tensorArgs[b.view.base].local
		}
	}
	if sc.b.auto {
		if len(sc.inLoop) > 0 {
			return l.errf(cn, "call", cn.Value, "an auto boundary needs its calls at the top of the body, not in a loop")
		}
		c.index = len(sc.b.calls)
		sc.b.calls = append(sc.b.calls, c)
	}
	l.calls = append(l.calls, callSite{caller: sc.b, c: c})
	o.call = c
	return nil
}

// task compiles a kernel or dummy task, once per variant when the op differs
// between variants ("a|b" values or a per-variant override).
func (sc *scope) task(o *op, f map[string]*yaml.Node, n *yaml.Node) error {
	l := sc.l
	o.kind = opTask
	nv := len(sc.b.variants)
	perVariant := false
	for _, v := range sc.b.variants {
		if f[v] != nil {
			perVariant = true
		}
	}
	for _, k := range []string{"k", "mix"} {
		if f[k] != nil && strings.Contains(f[k].Value, "|") {
			perVariant = true
		}
	}
	if a := f["args"]; a != nil && strings.Contains(nodeText(a), "|") {
		perVariant = true
	}
	if perVariant && nv == 0 {
		return l.errf(n, "op", "", "per-variant values (a|b) in a block without variants")
	}
	label := -1
	var store *taskTarget
	if id := f["id"]; id != nil && strings.Contains(id.Value, "[") {
		// id: LIST[i] stores the task into a task list.
		var err error
		if store, err = sc.taskTarget(id, "id", id.Value); err != nil {
			return err
		}
	} else if id != nil {
		if !isIdent(id.Value) {
			return l.errf(id, "id", id.Value, "want an identifier (or LIST[i] to store the task into a task list)")
		}
		if k, _, ok := sc.taskName(id.Value); ok && k != refLabel {
			return l.errf(id, "id", id.Value, "duplicate name: a task list or task param of %s has this name", sc.b.name)
		}
		for _, x := range sc.b.ids {
			if x == id.Value {
				return l.errf(id, "id", id.Value, "duplicate op id in %s", sc.b.name)
			}
		}
		label = len(sc.b.ids)
		sc.b.ids = append(sc.b.ids, id.Value)
	}
	count := 1
	if perVariant {
		count = nv
		sc.use(1<<uint(sc.b.variantSlot), n.Line)
	}
	for v := 0; v < count; v++ {
		fv := f
		if perVariant {
			fv = make(map[string]*yaml.Node, len(f))
			for k, x := range f {
				fv[k] = x
			}
			if ov := f[sc.b.variants[v]]; ov != nil {
				of, _, err := l.fields(ov, sc.b.variants[v], "k", "mix", "bn", "args", "scalars", "deps", "pred", "touch")
				if err != nil {
					return err
				}
				for k, x := range of {
					fv[k] = x
				}
			}
		}
		t, err := sc.taskVariant(fv, n, v, perVariant)
		if err != nil {
			return err
		}
		t.id, t.store = label, store
		o.task = append(o.task, t)
	}
	if id := f["id"]; id != nil && store == nil {
		sc.labelDef[id.Value] = true
	}
	return nil
}

func nodeText(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	var b strings.Builder
	for _, c := range n.Content {
		b.WriteString(nodeText(c))
		b.WriteByte(' ')
	}
	return b.String()
}

// pick selects variant v of "a|b|c"; a value without '|' is the same for all.
func (sc *scope) pick(nd *yaml.Node, key, s string, v int, per bool) (string, error) {
	if !strings.Contains(s, "|") {
		return s, nil
	}
	parts := strings.Split(s, "|")
	if !per || len(parts) != len(sc.b.variants) {
		return "", sc.l.errf(nd, key, s, "want one value per variant (%s), separated by |", strings.Join(sc.b.variants, "|"))
	}
	return strings.TrimSpace(parts[v]), nil
}

func (sc *scope) kernel(nd *yaml.Node, key, name string, core stages.Kind) (stages.KernelID, error) {
	id, ok := sc.l.m.kernelIdx[name]
	if !ok {
		return -1, sc.l.errf(nd, key, name, "unknown kernel (want a name from the kernels table)")
	}
	if sc.l.m.kernels[id].Core != core {
		return -1, sc.l.errf(nd, key, name, "kernel runs on %s (want a %s kernel here)", sc.l.m.kernels[id].Core, core)
	}
	return id, nil
}

func (sc *scope) taskVariant(f map[string]*yaml.Node, n *yaml.Node, v int, per bool) (*taskOp, error) {
	l := sc.l
	t := &taskOp{blockNum: -1, kernel: [3]stages.KernelID{-1, -1, -1}}
	var err error
	var sig string
	switch {
	case f["dummy"] != nil:
		t.kind = stages.KindDummy
		t.name = "dummy"
	case f["mix"] != nil:
		t.kind = stages.KindMIX
		base, err := sc.pick(f["mix"], "mix", f["mix"].Value, v, per)
		if err != nil {
			return nil, err
		}
		if t.kernel[0], err = sc.kernel(f["mix"], "mix", base+"_aic", stages.KindAIC); err != nil {
			return nil, err
		}
		if t.kernel[1], err = sc.kernel(f["mix"], "mix", base+"_aiv", stages.KindAIV); err != nil {
			return nil, err
		}
		t.kernel[2] = t.kernel[1]
		t.name = base + "_aic"
		sig = l.m.kernels[t.kernel[0]].Sig
	case strings.HasPrefix(strings.TrimSpace(f["k"].Value), "["):
		if sig, err = sc.kernelList(t, f["k"]); err != nil {
			return nil, err
		}
	default:
		name, err := sc.pick(f["k"], "k", f["k"].Value, v, per)
		if err != nil {
			return nil, err
		}
		id, ok := l.m.kernelIdx[name]
		if !ok {
			return nil, l.errf(f["k"], "k", name, "unknown kernel (want a name from the kernels table)")
		}
		k := l.m.kernels[id]
		t.kind = k.Core
		if k.Core == stages.KindAIC {
			t.kernel[0] = id
		} else {
			t.kernel[1] = id
		}
		t.name = name
		sig = k.Sig
	}
	if b := f["bn"]; b != nil {
		e, err := sc.expr(b.Value)
		if err != nil || !e.isConst() || e.val <= 0 || e.val > maxBlockNum {
			return nil, l.errf(b, "bn", b.Value, "want a constant block_num from 1 to %d (block_num x cores per block fits upstream's int16)", maxBlockNum)
		}
		t.blockNum = int32(e.val)
	}
	if a := f["args"]; a != nil {
		items, err := l.seq(a, "args")
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			arg, err := sc.arg(it, v, per)
			if err != nil {
				return nil, err
			}
			if arg.out != nil {
				t.hasOutputs = true
			}
			t.args = append(t.args, arg)
		}
	}
	if sig != "" {
		if len(sig) != len(t.args) {
			return nil, l.errf(n, "args", t.name, "kernel signature %q takes %d arguments, the task passes %d", sig, len(sig), len(t.args))
		}
		for i, a := range t.args {
			want := sig[i]
			got := byte('i')
			switch a.tag {
			case stages.TagOutput, stages.TagOutputExisting:
				got = 'o'
			case stages.TagInOut:
				got = 'x'
			}
			if got != want {
				return nil, l.errf(f["args"].Content[i], "args", f["args"].Content[i].Value, "argument %d is tagged %s, kernel %s declares %c in its signature %q", i, tagLong[a.tag], t.name, want, sig)
			}
		}
	}
	if s := f["scalars"]; s != nil {
		items, err := l.seq(s, "scalars")
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			e, err := sc.expr(it.Value)
			if err != nil {
				return nil, l.errf(it, "scalars", it.Value, "bad expression: %v", err)
			}
			sc.use(e.deps, it.Line)
			if e.boundaryScalar < 0 {
				lo, hi := sc.b.scalarBase, sc.b.scalarBase+len(sc.b.scalars)
				for s := lo; s < hi && s < 64; s++ {
					if e.deps&(1<<uint(s)) != 0 {
						sc.b.baked = append(sc.b.baked, bakedUse{line: it.Line, scalar: sc.b.scalars[s-lo].name, expr: it.Value})
						break
					}
				}
			}
			t.scalars = append(t.scalars, e)
		}
	}
	if d := f["deps"]; d != nil {
		items, err := l.seq(d, "deps")
		if err != nil {
			return nil, err
		}
		// "id" depends on the latest task submitted under id in this block
		// call, "id*" (or "id[*]") on every one; a task list or task param
		// gives its elements (LIST[i], LIST[start:+n], or all of them).
		for _, it := range items {
			ref, err := sc.taskRef(it, "deps")
			if err != nil {
				return nil, err
			}
			t.deps = append(t.deps, ref)
		}
	}
	if p := f["pred"]; p != nil {
		if t.pred, err = sc.pred(p); err != nil {
			return nil, err
		}
	}
	if tn := f["touch"]; tn != nil {
		if err := sc.touch(tn, t); err != nil {
			return nil, err
		}
		for _, k := range t.kernelList[min(1, len(t.kernelList)):] {
			// Every kernel of a list gets the op's hint.
			tk := *t
			tk.kernel = k
			if err := sc.touch(tn, &tk); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// kernelList compiles k: "[K0, K1, ...][EXPR]": the task runs kernel EXPR of
// the list (upstream's peeled copies gate_proj, gate_proj_0, ... chosen by
// a loop var). The kernels must run on one core type and share a
// signature, which it returns.
func (sc *scope) kernelList(t *taskOp, kn *yaml.Node) (string, error) {
	l := sc.l
	src := kn.Value
	toks, err := tokenize(src)
	if err != nil {
		return "", l.errf(kn, "k", src, "%v", err)
	}
	p := &exprParser{src: src, toks: toks, res: sc.intRes}
	want := "want \"[KERNEL, KERNEL, ...][INDEX]\""
	p.next() // '['
	var sig string
	for {
		nt := p.next()
		if nt.kind != tIdent {
			return "", l.errf(kn, "k", src, "%s", want)
		}
		id, ok := l.m.kernelIdx[nt.s]
		if !ok {
			return "", l.errf(kn, "k", nt.s, "unknown kernel (want a name from the kernels table)")
		}
		k := l.m.kernels[id]
		ks := [3]stages.KernelID{-1, -1, -1}
		if k.Core == stages.KindAIC {
			ks[0] = id
		} else {
			ks[1] = id
		}
		if len(t.kernelList) == 0 {
			t.kind, t.name, sig = k.Core, k.Name, k.Sig
		} else if k.Core != t.kind || k.Sig != sig {
			return "", l.errf(kn, "k", nt.s, "kernel %s (%s, signature %q) differs from %s (%s, signature %q): the kernels of a list run on one core type with one signature", k.Name, k.Core, k.Sig, t.name, t.kind, sig)
		}
		t.kernelList = append(t.kernelList, ks)
		sep := p.next()
		if sep.kind == tOp && sep.s == "]" {
			break
		}
		if sep.kind != tOp || sep.s != "," {
			return "", l.errf(kn, "k", src, "%s", want)
		}
	}
	if o := p.next(); o.kind != tOp || o.s != "[" {
		return "", l.errf(kn, "k", src, "%s: the list needs an index", want)
	}
	if t.kernelIndex, err = p.parseExpr(0); err != nil {
		return "", l.errf(kn, "k", src, "%v", err)
	}
	if c := p.next(); c.kind != tOp || c.s != "]" {
		return "", l.errf(kn, "k", src, "%v", p.errf(c, "expected ']'"))
	}
	if c := p.peek(); c.kind != tEOF {
		return "", l.errf(kn, "k", src, "%v", p.errf(c, "unexpected %q", c.s))
	}
	if t.kernelIndex.isConst() && (t.kernelIndex.val < 0 || t.kernelIndex.val >= int64(len(t.kernelList))) {
		return "", l.errf(kn, "k", src, "index %d of a list of %d kernels", t.kernelIndex.val, len(t.kernelList))
	}
	setSrc(t.kernelIndex, src)
	sc.use(t.kernelIndex.deps, kn.Line)
	t.kernel = t.kernelList[0]
	return sig, nil
}

// touch compiles an op's access hint, {ARG: ROWS, ...}, into its kernels'
// stages.Kernel.Touch. ARG names one of the task's arguments by its tensor
// (the one argument whose view is based on it); ROWS is ARG[start:+N] or
// ARG[row] when the argument keeps ARG's dim 0, or dim0[start:+N] or
// dim0[row] over the argument's own dim 0 (after a row index or reshape):
// the kernel reads N (a positive constant) or 1 rows of that dim. A second
// index, ARG[ROWS, COLS] or dim0[ROWS, COLS], is a 2-D tile: COLS is
// start:+N or col over the argument's last dim, and either part may be ":"
// (all of that dim). Only the counts become the hint: where the rows are (a
// loop var, a scalar) does not change the bytes read, so it is not a
// structural use of a param either.
//
// The hint belongs to the kernel, since its code decides what it reads: a
// site without touch takes the kernel's hint from another site, and two
// sites that declare different hints for one kernel are an error.
func (sc *scope) touch(tn *yaml.Node, t *taskOp) error {
	l := sc.l
	if t.kind == stages.KindDummy {
		return l.errf(tn, "touch", "", "a dummy task has no kernel to hint")
	}
	tf, order, err := l.fields(tn, "touch")
	if err != nil {
		return err
	}
	var site touchSite
	for _, k := range order {
		kind, idx, ok := sc.tensor(k)
		if !ok {
			return l.errf(tf[k], "touch", k, "unknown tensor (want %s)", sc.tensorNames())
		}
		arg := -1
		for i, a := range t.args {
			if a.view == nil || a.view.kind != kind || a.view.base != idx {
				continue
			}
			if arg >= 0 {
				return l.errf(tf[k], "touch", k, "names arguments %d and %d of this task (a hint must pick one)", arg, i)
			}
			arg = i
		}
		if arg < 0 {
			return l.errf(tf[k], "touch", k, "not an argument of this task")
		}
		av := t.args[arg].view
		key, src := "touch."+k, tf[k].Value
		// A 2-D tile: the columns part is compiled here, the rows part as
		// a rows hint of its own ("NAME[ROWS]"), unless it is ":".
		rsrc, colsSrc, tile := splitTile(src)
		var cols int64
		if tile {
			var err error
			if cols, err = sc.touchCols(colsSrc, av); err != nil {
				return l.errf(tf[k], key, src, "%v", err)
			}
		}
		if tile && rsrc == "" {
			if cols == 0 {
				return l.errf(tf[k], key, src, "a hint must narrow something: want rows, columns or both, not [:, :]")
			}
			site.hints = append(site.hints, stages.Touch{Arg: arg, Cols: cols})
			site.names = append(site.names, k)
			site.nodes = append(site.nodes, tf[k])
			continue
		}
		// "dim0[...]" counts rows of the argument as passed (after its
		// row index or reshape); "NAME[...]" rows of the tensor NAME, which
		// are the argument's only when the argument keeps NAME's dim 0.
		vsrc, own := rsrc, strings.HasPrefix(strings.TrimSpace(rsrc), "dim0[")
		if own {
			vsrc = k + strings.TrimPrefix(strings.TrimSpace(rsrc), "dim0")
		} else if av.index != nil || av.as != nil {
			return l.errf(tf[k], key, src, "argument %d (%s) drops or reshapes %s's dim 0: write the rows of the argument's own dim 0 as dim0[start:+ROWS]", arg, av.src, k)
		}
		vw, err := sc.view(vsrc, tf[k].Line)
		if err != nil {
			return l.errf(tf[k], key, src, "%v", err)
		}
		if vw.kind != kind || vw.base != idx {
			return l.errf(tf[k], key, src, "a hint on %s must view %s (or dim0)", k, k)
		}
		rows := int64(1)
		switch {
		case vw.at != nil || vw.as != nil || vw.index == nil && vw.start == nil:
			return l.errf(tf[k], key, src, "want %s[start:+ROWS], %s[row], dim0[start:+ROWS] or dim0[row]: the rows of dim 0 the kernel reads", k, k)
		case vw.start != nil:
			if !vw.count.isConst() || vw.count.val <= 0 {
				return l.errf(tf[k], key, src, "the row count must be a positive constant (a hint is a property of the kernel, the same at every call)")
			}
			rows = vw.count.val
		}
		// The argument's dim 0, when it is known here.
		if n, ok := av.rows(own); ok && rows > n {
			return l.errf(tf[k], key, src, "reads %d rows of an argument of %d", rows, n)
		}
		site.hints = append(site.hints, stages.Touch{Arg: arg, Rows: rows, Cols: cols})
		site.names = append(site.names, k)
		site.nodes = append(site.nodes, tf[k])
	}
	site.line = tn.Line
	sort.Sort(&site)
	for i, id := range t.kernel {
		if id < 0 || i > 0 && id == t.kernel[i-1] {
			continue // no kernel in this slot, or a MIX's AIV kernel again
		}
		if err := l.setTouch(id, tn, &site); err != nil {
			return err
		}
	}
	return nil
}

// splitTile splits a 2-D touch value, NAME[ROWS, COLS], at its top-level
// comma: rows is NAME[ROWS] ("" when ROWS is ":"), cols is COLS. A value
// with no top-level comma in its brackets is not a tile.
func splitTile(src string) (rows, cols string, tile bool) {
	s := strings.TrimSpace(src)
	open := strings.IndexByte(s, '[')
	if open < 0 || !strings.HasSuffix(s, "]") {
		return src, "", false
	}
	depth := 0
	for i := open + 1; i < len(s)-1; i++ {
		switch s[i] {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth != 0 {
				continue
			}
			r, c := strings.TrimSpace(s[open+1:i]), strings.TrimSpace(s[i+1:len(s)-1])
			if r == ":" {
				return "", c, true
			}
			return s[:open+1] + r + "]", c, true
		}
	}
	return src, "", false
}

// touchCols compiles the columns part of a 2-D touch value: ":" (every
// column: 0), col (1) or start:+N (N, a positive constant), over the last
// dim of the argument view av.
func (sc *scope) touchCols(src string, av *viewExpr) (int64, error) {
	if strings.TrimSpace(src) == ":" {
		return 0, nil
	}
	toks, err := tokenize(src)
	if err != nil {
		return 0, err
	}
	p := &exprParser{src: src, toks: toks, res: sc.intRes}
	if _, err := p.parseExpr(0); err != nil {
		return 0, err
	}
	cols := int64(1)
	if t := p.peek(); t.kind == tOp && t.s == ":" {
		p.next()
		if t := p.next(); t.kind != tOp || t.s != "+" {
			return 0, p.errf(t, "want the columns as start:+COLS, col or \":\"")
		}
		n, err := p.parseExpr(0)
		if err != nil {
			return 0, err
		}
		if !n.isConst() || n.val <= 0 {
			return 0, fmt.Errorf("the column count must be a positive constant (a hint is a property of the kernel, the same at every call)")
		}
		cols = n.val
	}
	if t := p.peek(); t.kind != tEOF {
		return 0, p.errf(t, "unexpected %q after the columns (want start:+COLS, col or \":\")", t.s)
	}
	// The argument's last dim, when a constant reshape fixes it here.
	if av.as != nil {
		last := av.as[len(av.as)-1]
		switch {
		case len(av.as) < 2:
			return 0, fmt.Errorf("columns of a rank-1 argument (as %s): hint its rows", av.src)
		case last.isConst() && cols > last.val:
			return 0, fmt.Errorf("reads %d columns of an argument whose last dim is %d", cols, last.val)
		}
	}
	return cols, nil
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

// touchSite is the hints one op declares for its kernels, sorted by
// argument, with each hint's tensor name and YAML value for messages.
type touchSite struct {
	line  int
	hints []stages.Touch
	names []string
	nodes []*yaml.Node
}

// setTouch gives kernel id the hints of site, or checks them against the
// hints another site gave it.
func (l *loader) setTouch(id stages.KernelID, tn *yaml.Node, site *touchSite) error {
	k := &l.m.kernels[id]
	prev, ok := l.touchAt[id]
	if !ok {
		if l.touchAt == nil {
			l.touchAt = map[stages.KernelID]*touchSite{}
		}
		l.touchAt[id] = site
		k.Touch = site.hints
		return nil
	}
	if slices.Equal(prev.hints, site.hints) {
		return nil
	}
	hintOf := func(s *touchSite, arg int) stages.Touch {
		for _, h := range s.hints {
			if h.Arg == arg {
				return h
			}
		}
		return stages.Touch{Arg: arg}
	}
	count := func(n int64, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	what := func(h stages.Touch) string {
		switch {
		case h.Rows == 0 && h.Cols == 0:
			return "no hint"
		case h.Cols == 0:
			return count(h.Rows, "row", "rows")
		case h.Rows == 0:
			return count(h.Cols, "column", "columns")
		}
		return count(h.Rows, "row", "rows") + " × " + count(h.Cols, "column", "columns")
	}
	// The first argument the two sites disagree on: named by this site's
	// hint when it has one, else by the site's touch mapping.
	args := append(append([]stages.Touch(nil), prev.hints...), site.hints...)
	slices.SortFunc(args, func(a, b stages.Touch) int { return a.Arg - b.Arg })
	for _, a := range args {
		was, now := hintOf(prev, a.Arg), hintOf(site, a.Arg)
		if was == now {
			continue
		}
		nd, key, val := tn, "touch", fmt.Sprintf("argument %d", a.Arg)
		if i := slices.IndexFunc(site.hints, func(h stages.Touch) bool { return h.Arg == a.Arg }); i >= 0 {
			nd, key, val = site.nodes[i], "touch."+site.names[i], site.nodes[i].Value
		}
		return l.errf(nd, key, val, "kernel %s: %s of argument %d here, %s at line %d; a kernel's touch is a property of its code, so every op that declares one must declare the same", k.Name, what(now), a.Arg, what(was), prev.line)
	}
	return nil
}

func (s *touchSite) Len() int           { return len(s.hints) }
func (s *touchSite) Less(i, j int) bool { return s.hints[i].Arg < s.hints[j].Arg }
func (s *touchSite) Swap(i, j int) {
	s.hints[i], s.hints[j] = s.hints[j], s.hints[i]
	s.names[i], s.names[j] = s.names[j], s.names[i]
	s.nodes[i], s.nodes[j] = s.nodes[j], s.nodes[i]
}

var tagWords = map[string]stages.Tag{"in": stages.TagInput, "out": stages.TagOutput, "inout": stages.TagInOut, "out_existing": stages.TagOutputExisting, "no_dep": stages.TagNoDep}

// arg parses "TAG VIEW", or "out NAME DTYPE[dims]" for a runtime-allocated
// output.
func (sc *scope) arg(nd *yaml.Node, v int, per bool) (argOp, error) {
	l := sc.l
	s := strings.TrimSpace(nd.Value)
	sp := strings.IndexAny(s, " \t")
	if sp < 0 {
		return argOp{}, l.errf(nd, "args", s, "want \"TAG VIEW\" (TAG is in, out, inout, out_existing or no_dep)")
	}
	tw, err := sc.pick(nd, "args", s[:sp], v, per)
	if err != nil {
		return argOp{}, err
	}
	tag, ok := tagWords[tw]
	if !ok {
		return argOp{}, l.errf(nd, "args", s, "unknown tag %q (want in, out, inout, out_existing or no_dep)", tw)
	}
	rest := strings.TrimSpace(s[sp:])
	if tag == stages.TagOutput {
		it, err := sc.allocItem(rest, nd)
		if err != nil {
			return argOp{}, err
		}
		return argOp{tag: tag, out: &it}, nil
	}
	vw, err := sc.view(rest, nd.Line)
	if err != nil {
		return argOp{}, l.errf(nd, "args", s, "%v", err)
	}
	sc.use(vw.deps, nd.Line)
	return argOp{tag: tag, view: vw}, nil
}

var predOps = map[string]stages.PredOp{">": stages.PredGT, ">=": stages.PredGE, "==": stages.PredEQ, "!=": stages.PredNE, "<": stages.PredLT, "<=": stages.PredLE}

// pred parses "NAME[i, j, ...] OP target".
func (sc *scope) pred(nd *yaml.Node) (*predOp, error) {
	l := sc.l
	src := nd.Value
	toks, err := tokenize(src)
	if err != nil {
		return nil, l.errf(nd, "pred", src, "%v", err)
	}
	p := &exprParser{src: src, toks: toks, res: sc.intRes}
	name := p.next()
	if name.kind != tIdent {
		return nil, l.errf(nd, "pred", src, "want \"TENSOR[i, ...] OP VALUE\"")
	}
	k, idx, ok := sc.tensor(name.s)
	if !ok {
		return nil, l.errf(nd, "pred", name.s, "unknown tensor (want %s)", sc.tensorNames())
	}
	pr := &predOp{view: &viewExpr{kind: k, base: idx, line: nd.Line, src: name.s, local: k == baseSlot && idx >= sc.b.fixedSlots}}
	if pr.indices, err = sc.exprList(p); err != nil {
		return nil, l.errf(nd, "pred", src, "%v", err)
	}
	t := p.next()
	op, ok := predOps[t.s]
	if t.kind != tOp || !ok {
		return nil, l.errf(nd, "pred", src, "want a comparison (>, >=, ==, !=, <, <=) after the index")
	}
	pr.op = op
	if pr.target, err = p.parseExpr(0); err != nil {
		return nil, l.errf(nd, "pred", src, "%v", err)
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, l.errf(nd, "pred", src, "unexpected %q", t.s)
	}
	for _, e := range append(pr.indices, pr.target) {
		setSrc(e, src)
	}
	for _, e := range pr.indices {
		sc.use(e.deps, nd.Line)
	}
	sc.use(pr.target.deps, nd.Line)
	return pr, nil
}

type callSite struct {
	caller *block
	c      *callOp
}
