package config

// An op's expressions, in one list. Every walk that asks "what does this op
// read" (the sizer's bodyVaries, the static checks' propagate, and any new
// one) goes through exprs, so that a field added to an op, with the
// expression added here, reaches every walk at once; TestOpExprsComplete
// fails when an op holds an expression exprs does not list.
//
// The compile functions still record each expression's static-check use
// (scope.use, with its own line and key) as they compile it; the list is
// what the later walks read.

// exprRole says what an expression decides.
type exprRole uint8

const (
	// roleValue: a value the op passes (a scalar, a view, a dependency):
	// the number of tasks and the interpreter's work do not change with it.
	roleValue exprRole = iota
	// roleCount: the number of tasks the op list submits or the work it
	// takes: a condition, a loop bound, an index read from data (the value
	// read may set any count after it), a task list's size, a set's run,
	// a call's param (the callee's counts).
	roleCount
)

// opExpr is one expression of an op: an integer expression (e) or a view
// (v), exactly one of them set.
type opExpr struct {
	e    *expr
	v    *viewExpr
	role exprRole
}

// deps is the env slots the expression reads.
func (x opExpr) deps() uint64 {
	if x.e != nil {
		return x.e.deps
	}
	return x.v.deps
}

// exprs yields o's own expressions (not its body's: each op of the body
// has its own list), stopping when yield returns false.
func (o *op) exprs(yield func(opExpr) bool) {
	e := func(x *expr, r exprRole) bool { return x == nil || yield(opExpr{e: x, role: r}) }
	v := func(x *viewExpr) bool { return x == nil || yield(opExpr{v: x, role: roleValue}) }
	ref := func(r *taskRef) bool {
		return r == nil || e(r.index, roleValue) && e(r.start, roleValue) && e(r.count, roleValue) && e(r.cond, roleValue)
	}
	target := func(t *taskTarget, count exprRole) bool {
		return t == nil || e(t.index, roleValue) && e(t.start, roleValue) && e(t.count, count)
	}
	alloc := func(a *allocItem) bool {
		if a == nil {
			return true
		}
		for _, d := range a.shape {
			if !e(d, roleValue) {
				return false
			}
		}
		return true
	}
	if !e(o.cond, roleCount) || !e(o.from, roleCount) || !e(o.to, roleCount) || !e(o.step, roleCount) {
		return
	}
	for i := range o.allocs {
		if !alloc(&o.allocs[i]) {
			return
		}
	}
	for i := range o.reads {
		for _, x := range o.reads[i].indices {
			if !e(x, roleCount) {
				return
			}
		}
	}
	for i := range o.writes {
		// A write of an entry tensor's data may set any count a later
		// read of it sets (the sizer follows it); any other, no count.
		w := &o.writes[i]
		r := roleValue
		if w.entry {
			r = roleCount
		}
		for _, x := range w.indices {
			if !e(x, r) {
				return
			}
		}
		if !e(w.value, r) || !v(w.view) {
			return
		}
	}
	for i := range o.reads {
		if x := o.reads[i].view; x != nil && !v(x) {
			return
		}
	}
	for i := range o.locals {
		// A local's value may set any count after it.
		if !e(o.locals[i].e, roleCount) {
			return
		}
	}
	for _, l := range o.lets {
		for _, x := range l.views {
			if !v(x) {
				return
			}
		}
	}
	for _, d := range o.taskDecls {
		if !e(d.size, roleCount) {
			return
		}
	}
	for _, s := range o.sets {
		if !target(s.target, roleCount) {
			return
		}
		for _, r := range s.value {
			if !ref(r) {
				return
			}
		}
	}
	for _, t := range o.task {
		if !t.exprs(e, v, ref, target, alloc) {
			return
		}
	}
	if c := o.call; c != nil {
		for _, x := range c.params {
			if !e(x, roleCount) {
				return
			}
		}
		for _, x := range c.tensorArgs {
			if !v(x) {
				return
			}
		}
		for _, rs := range c.tasks {
			for _, r := range rs {
				if !ref(r) {
					return
				}
			}
		}
	}
}

// exprs is a task's part of its op's list.
func (t *taskOp) exprs(e func(*expr, exprRole) bool, v func(*viewExpr) bool, ref func(*taskRef) bool, target func(*taskTarget, exprRole) bool, alloc func(*allocItem) bool) bool {
	if !e(t.kernelIndex, roleValue) || !target(t.store, roleValue) {
		return false
	}
	for _, a := range t.args {
		if !v(a.view) || !alloc(a.out) {
			return false
		}
	}
	for _, x := range t.scalars {
		if !e(x, roleValue) {
			return false
		}
	}
	for _, r := range t.deps {
		if !ref(r) {
			return false
		}
	}
	if p := t.pred; p != nil {
		if !v(p.view) || !e(p.target, roleValue) {
			return false
		}
		for _, x := range p.indices {
			if !e(x, roleValue) {
				return false
			}
		}
	}
	return true
}

// readsSlot reports whether o's expressions of role r read env slot (any slot
// from 64 on: deps has no bit for it, so every expression may).
func (o *op) readsSlot(slot int, r exprRole) bool {
	found := false
	o.exprs(func(x opExpr) bool {
		if x.role == r && (slot >= 64 || x.deps()&(1<<uint(slot)) != 0) {
			found = true
		}
		return !found
	})
	return found
}
