package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// let: {NAME: VIEW, LIST: [VIEW, ...]} names views inside a block, as
// upstream names its scratch-arena tensors: the view is evaluated when the
// op runs (loop vars and params as they are then), and NAME is usable
// wherever a tensor is (an argument, the base of another view, a call's
// tensor). A list value makes a tensor list, indexed by expression: LIST[i].
// A let may rebind a name the block allocates or an earlier let made (as
// upstream reassigns cur = next_hidden); it cannot rebind a boundary slot,
// a tensor param or an entry tensor.
func (sc *scope) let(o *op, n *yaml.Node) error {
	l := sc.l
	o.kind = opLet
	lets, err := l.keyValues(n, "let")
	if err != nil {
		return err
	}
	for _, kv := range lets {
		name, kn, vn := kv.key.Value, kv.key, kv.value
		if !isIdent(name) {
			return l.errf(kn, "let", name, "a name must be an identifier: %s", identRule)
		}
		if _, ok := sc.vals[name]; ok {
			return l.errf(kn, "let", name, "duplicate name: a param, scalar or loop var has this name")
		}
		if _, ok := sc.l.m.consts[name]; ok {
			return l.errf(kn, "let", name, "duplicate name: a constant has this name")
		}
		srcs := []*yaml.Node{vn}
		if vn.Kind == yaml.SequenceNode {
			srcs = vn.Content
			if len(srcs) == 0 || len(srcs) > maxTensorList {
				return l.errf(vn, "let."+name, "", "a tensor list takes 1 to %d views", maxTensorList)
			}
		}
		var it letItem
		for _, s := range srcs {
			if s.Kind != yaml.ScalarNode {
				return l.errf(s, "let."+name, "", "want a view (NAME, NAME[i], NAME[start:+n], NAME @ OFFSET, ... as [d0, ...])")
			}
			v, err := sc.view(s.Value, s.Line)
			if err != nil {
				return l.errf(s, "let."+name, s.Value, "%v", err)
			}
			if sc.b.auto && !v.local {
				// An auto block's boundary is computed from its calls before
				// its body runs, when no let has run yet.
				return l.errf(s, "let."+name, s.Value, "in a block with boundary: auto, a let must view a tensor the block allocates")
			}
			sc.use(v.deps, s.Line, "let."+name, s.Value)
			it.views = append(it.views, v)
		}
		if vn.Kind == yaml.SequenceNode {
			for k, v := range it.views {
				slot := len(sc.b.slotNames)
				sc.b.slotNames = append(sc.b.slotNames, fmt.Sprintf("%s[%d]", name, k))
				sc.markLocal(slot, v.local)
				it.slots = append(it.slots, slot)
			}
			if err := sc.bindList(kn, name, it.slots); err != nil {
				return err
			}
		} else {
			slot, err := sc.letSlot(kn, name, it.views[0].local)
			if err != nil {
				return err
			}
			it.slots = []int{slot}
		}
		o.lets = append(o.lets, it)
	}
	return nil
}

func (sc *scope) markLocal(slot int, local bool) {
	if local {
		return
	}
	if sc.b.nonLocal == nil {
		sc.b.nonLocal = map[int]bool{}
	}
	sc.b.nonLocal[slot] = true
}

// letSlot is the slot a let binds name to: the block's own tensor of that
// name (rebinding it), or a new one.
func (sc *scope) letSlot(kn *yaml.Node, name string, local bool) (int, error) {
	l := sc.l
	if sc.tensorList(name) != nil {
		return 0, l.errf(kn, "let", name, "duplicate name: %s is a tensor list (a let of one view cannot rebind it)", name)
	}
	for i := len(sc.b.slotNames) - 1; i >= 0; i-- {
		if sc.b.slotNames[i] != name {
			continue
		}
		if i < sc.b.fixedSlots {
			return 0, l.errf(kn, "let", name, "duplicate name: %s already names %s (a let names a new view or rebinds one of the block's own)", name, sc.tensorNames())
		}
		if sc.slotLocal(i) != local && sc.b.auto {
			return 0, l.errf(kn, "let", name, "rebinding %s would change whether it is a tensor the block allocates", name)
		}
		if !local {
			sc.markLocal(i, false)
		}
		return i, nil
	}
	slot := len(sc.b.slotNames)
	sc.b.slotNames = append(sc.b.slotNames, name)
	sc.markLocal(slot, local)
	return slot, nil
}

// bindList names a tensor list; the newest definition of a name wins.
func (sc *scope) bindList(nd *yaml.Node, name string, slots []int) error {
	for i := len(sc.b.slotNames) - 1; i >= 0; i-- {
		if sc.b.slotNames[i] == name {
			return sc.l.errf(nd, "tensor list", name, "duplicate name: %s already names a tensor of %s", name, sc.b.name)
		}
	}
	if _, ok := sc.vals[name]; ok {
		return sc.l.errf(nd, "tensor list", name, "duplicate name: a param, scalar or loop var has this name")
	}
	sc.b.lists = append(sc.b.lists, tensorList{name: name, slots: slots, line: nd.Line})
	return nil
}

// runLet evaluates a let op's views into their slots.
func (r *runner) runLet(fr *frame, op *op) {
	for i := range op.lets {
		it := &op.lets[i]
		for k, v := range it.views {
			// Through a copy: the view may read the slot it rebinds.
			var out stages.View
			if !r.view(fr, v, &out) {
				return
			}
			fr.tensors[it.slots[k]] = out
		}
	}
}
