package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// call compiles a block call: params, variant, tensor and task params
// bound by with (unbound tensors and tasks take the caller's of the same
// name), and for an auto caller its place among the calls that make the
// boundary.
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
		return l.errf(cn, "call", cn.Value, "a block with boundary: auto calls only blocks with an explicit boundary, and %s has boundary: auto (give it a list of slots)", callee.name)
	}
	c := &callOp{callee: callee, line: cn.Line, params: make([]*expr, len(callee.params)), paramTerms: make([]term, len(callee.params)), tensorArgs: make([]*viewExpr, len(callee.tensors)), variant: -1}
	var with map[string]*yaml.Node
	if wn != nil {
		var err error
		if with, err = l.fields(wn, "with", append(append(append(append([]string(nil), callee.params...), callee.tensors...), callee.taskParams...), "variant")...); err != nil {
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
		c.paramTerms[i], _ = termOf(e)
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
			sc.use(v.deps, line, "with."+t, src)
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
