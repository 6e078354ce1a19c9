package config

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

var opKeys = []string{"alloc", "scope", "loop", "call", "read", "write", "local", "let", "tasks", "set", "k", "mix", "dummy", "if", "body", "with", "id", "bn", "args", "scalars", "deps", "pred", "touch", "early", "sync_start"}

func (sc *scope) ops(n *yaml.Node, key string) ([]*op, error) {
	items, err := sc.l.seq(n, key)
	if err != nil {
		return nil, err
	}
	var out []*op
	// The names read ops bind in this list go out of scope at its end.
	sc.level = append(sc.level, nil)
	defer func() {
		for _, name := range sc.level[len(sc.level)-1] {
			delete(sc.vals, name)
			delete(sc.readVars, name)
			delete(sc.hostDeps, name)
		}
		sc.level = sc.level[:len(sc.level)-1]
	}()
	for _, it := range items {
		o, err := sc.op(it)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// op compiles one op; its keys say which kind it is, and a key another kind
// takes is an error.
func (sc *scope) op(n *yaml.Node) (*op, error) {
	l := sc.l
	allowed := append([]string(nil), opKeys...)
	allowed = append(allowed, sc.b.variants...)
	kvs, err := l.keyValues(n, "op", allowed...)
	if err != nil {
		return nil, err
	}
	f := byKey(kvs)
	o := &op{line: n.Line}
	if c := f["if"]; c != nil {
		if o.cond, err = sc.expr(c.Value); err != nil {
			return nil, l.errf(c, "if", c.Value, "bad expression: %v", err)
		}
		sc.use(o.cond.deps, c.Line, "if", c.Value)
	}
	// only rejects the first key, in file order, that an op of kind does
	// not take.
	only := func(kind string, keys ...string) error {
		for _, kv := range kvs {
			if k := kv.key.Value; k != kind && k != "if" && !slices.Contains(keys, k) {
				return l.errf(kv.value, kind, k, "unexpected key in a %s op (want %s)", kind, strings.Join(append([]string{kind, "if"}, keys...), ", "))
			}
		}
		return nil
	}
	// The ops that are one key (and if), tried in this order, before the
	// others.
	o.allocID = -1
	for _, one := range []struct {
		key     string
		compile func(*op, *yaml.Node) error
	}{{"alloc", sc.alloc}, {"let", sc.let}, {"tasks", sc.tasksOp}, {"set", sc.setOp}, {"local", sc.localOp}, {"write", sc.writeOp}} {
		if v := f[one.key]; v != nil {
			var extra []string
			if one.key == "alloc" {
				extra = []string{"id"} // alloc_tensors(...).task_id()
			}
			if err := only(one.key, extra...); err != nil {
				return nil, err
			}
			if err := one.compile(o, v); err != nil {
				return nil, err
			}
			if id := f["id"]; id != nil && one.key == "alloc" {
				if o.allocID, err = sc.label(id); err != nil {
					return nil, err
				}
			}
			return o, nil
		}
	}
	switch {
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
		if f["read"].Kind == yaml.MappingNode {
			return o, sc.readOp(o, f["read"])
		}
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
	return nil, l.errf(n, "op", "", "unknown op (want alloc, let, local, write, tasks, set, scope, loop, call, read, a task with k, mix or dummy, or if with body)")
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

// loopDoc is a loop op's loop: {var, from, to, step}.
type loopDoc struct {
	Var  *yaml.Node `yaml:"var"`
	From *yaml.Node `yaml:"from"`
	To   *yaml.Node `yaml:"to"`
	Step *yaml.Node `yaml:"step"`
}

// loop compiles a loop op: its var takes an env slot of its own, and the op
// ids in its body collect every iteration's tasks (id*).
func (sc *scope) loop(o *op, ln, body, n *yaml.Node) error {
	l := sc.l
	o.kind = opLoop
	var lf loopDoc
	err := l.decode(ln, "loop", &lf)
	if err != nil {
		return err
	}
	if lf.Var == nil || lf.To == nil {
		return l.errf(ln, "loop", "", "want var and to (from defaults to 0)")
	}
	v := lf.Var.Value
	if !isIdent(v) {
		return l.errf(lf.Var, "loop.var", v, "want an identifier: %s", identRule)
	}
	if _, clash := sc.vals[v]; clash {
		return l.errf(lf.Var, "loop.var", v, "duplicate name: already a param, scalar or enclosing loop var")
	}
	if _, clash := l.m.consts[v]; clash {
		return l.errf(lf.Var, "loop.var", v, "duplicate name: a constant has this name")
	}
	o.from = &expr{kind: exConst, boundaryScalar: -1}
	if fr := lf.From; fr != nil {
		if o.from, err = sc.expr(fr.Value); err != nil {
			return l.errf(fr, "loop.from", fr.Value, "bad expression: %v", err)
		}
		sc.use(o.from.deps, fr.Line, "loop.from", fr.Value)
	}
	if o.to, err = sc.expr(lf.To.Value); err != nil {
		return l.errf(lf.To, "loop.to", lf.To.Value, "bad expression: %v", err)
	}
	if st := lf.Step; st != nil {
		if o.step, err = sc.expr(st.Value); err != nil {
			return l.errf(st, "loop.step", st.Value, "bad expression: %v", err)
		}
		if o.step.isConst() && o.step.val <= 0 {
			return l.errf(st, "loop.step", st.Value, "a loop's step must be positive")
		}
		sc.use(o.step.deps, st.Line, "loop.step", st.Value)
	}
	sc.use(o.to.deps, lf.To.Line, "loop.to", lf.To.Value)
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

// readOp compiles a read op that binds names: {VAR: "TENSOR[i, ...]", ...},
// upstream's cur = get_tensor_data(tensor, ndims, idx). Each VAR is an
// integer from then on, in the rest of the op list it is in (and what that
// nests); a later read may bind it again. TENSOR is an entry tensor with
// contents (data:).
func (sc *scope) readOp(o *op, rn *yaml.Node) error {
	l := sc.l
	kvs, err := l.entries(rn, "read", "")
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		name, src := kv.key.Value, kv.value.Value
		if !isIdent(name) {
			return l.errf(kv.key, "read", name, "want an identifier: %s", identRule)
		}
		if _, clash := l.m.consts[name]; clash {
			return l.errf(kv.key, "read", name, "duplicate name: a constant has this name")
		}
		slot, isRead := sc.readVars[name]
		if _, clash := sc.vals[name]; clash && !isRead {
			return l.errf(kv.key, "read", name, "duplicate name: already a param, scalar or loop var")
		}
		if kv.value.Kind != yaml.ScalarNode {
			return l.errf(kv.value, "read."+name, "", "want \"TENSOR[i, ...]\" (an element of an entry tensor with data:)")
		}
		p, err := sc.parser(kv.value, "read."+name, src)
		if err != nil {
			return err
		}
		t := p.next()
		it := readItem{name: name, root: -1, src: src}
		for i, e := range l.m.entry {
			if t.kind == tIdent && e.name == t.s && e.data != nil {
				it.root = i
			}
		}
		if it.root < 0 {
			// get_tensor_data of any other tensor: one the host writes or
			// an alloc's initial value (hostdata.go).
			if err := sc.hostRead(&it, kv.value, t, p); err != nil {
				return err
			}
			if !isRead {
				slot = sc.b.envSize
				sc.b.envSize++
				sc.vals[name] = slot
				sc.readVars[name] = slot
				sc.level[len(sc.level)-1] = append(sc.level[len(sc.level)-1], name)
			}
			it.slot = slot
			sc.b.valueOnly = append(sc.b.valueOnly, valueOnly{slot: slot, name: name, line: kv.value.Line})
			o.reads = append(o.reads, it)
			continue
		}
		e := &l.m.entry[it.root]
		if it.indices, err = sc.exprList(p); err != nil {
			return l.errf(kv.value, "read."+name, src, "%v", err)
		}
		if t := p.peek(); t.kind != tEOF {
			return l.errf(kv.value, "read."+name, src, "unexpected %q after the element", t.s)
		}
		if len(it.indices) != len(e.shape) {
			return l.errf(kv.value, "read."+name, src, "%d indices for %s of rank %d (want one per dim)", len(it.indices), e.name, len(e.shape))
		}
		for d, x := range it.indices {
			setSrc(x, src)
			if x.isConst() && (x.val < 0 || x.val >= e.shape[d]) {
				return l.errf(kv.value, "read."+name, src, "index %d is %d, outside [0, %d)", d, x.val, e.shape[d])
			}
			sc.use(x.deps, kv.value.Line, "read."+name, src)
		}
		if !isRead {
			slot = sc.b.envSize
			sc.b.envSize++
			sc.vals[name] = slot
			sc.readVars[name] = slot
			sc.level[len(sc.level)-1] = append(sc.level[len(sc.level)-1], name)
		}
		it.slot = slot
		o.reads = append(o.reads, it)
	}
	return nil
}

// localOp compiles a local op, {NAME: EXPR, ...}: upstream's host-side
// int NAME = EXPR. A new NAME is an integer from then on, in the rest of
// the op list it is in (and what that nests), as a read's; a NAME that is
// already a local or a read in scope is assigned (NAME = EXPR), so a
// reduction across a loop (max_bn = max(max_bn, ...)) keeps its value
// after the loop. What the value reads (params, boundary scalars) is what
// every use of NAME reads, for the Graph checks.
func (sc *scope) localOp(o *op, ln *yaml.Node) error {
	l := sc.l
	o.kind = opLocal
	kvs, err := l.entries(ln, "local", "")
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		name := kv.key.Value
		if !isIdent(name) {
			return l.errf(kv.key, "local", name, "want an identifier: %s", identRule)
		}
		if _, clash := l.m.consts[name]; clash {
			return l.errf(kv.key, "local", name, "duplicate name: a constant has this name")
		}
		slot, isHost := sc.readVars[name]
		if _, clash := sc.vals[name]; clash && !isHost {
			return l.errf(kv.key, "local", name, "duplicate name: already a param, scalar or loop var (a local may assign only a local or a read)")
		}
		if kv.value.Kind != yaml.ScalarNode {
			return l.errf(kv.value, "local."+name, nodeText(kv.value), "want an integer expression")
		}
		e, err := sc.expr(kv.value.Value)
		if err != nil {
			return l.errf(kv.value, "local."+name, kv.value.Value, "bad expression: %v", err)
		}
		setSrc(e, kv.value.Value)
		if !isHost {
			slot = sc.b.envSize
			sc.b.envSize++
			sc.vals[name] = slot
			sc.readVars[name] = slot
			sc.level[len(sc.level)-1] = append(sc.level[len(sc.level)-1], name)
		} else if add := e.deps &^ sc.hostDeps[name]; add != 0 && len(sc.inLoop) > 0 {
			// An assignment in a loop reaches the uses before it in the
			// loop's body, compiled already: they read what it adds.
			sc.use(add, kv.value.Line, "local."+name, kv.value.Value)
		}
		sc.hostDeps[name] |= e.deps
		if slot < 64 {
			sc.slotDeps[slot] = sc.hostDeps[name]
		}
		o.locals = append(o.locals, localItem{slot: slot, name: name, e: e})
	}
	return nil
}
