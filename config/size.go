package config

import (
	"errors"
	"fmt"
	"math"

	"github.com/hbg-dev/hbg/stages"
)

// DefaultMaxTasks bounds the device tasks of one pass (Graph bodies
// counted): a pass past it is refused before anything is submitted, so a
// typo in a loop bound (to: 1000000000) is an error naming the loop, not an
// out-of-memory crash after minutes. DSv4 and Qwen3 submit 16k and 11k
// tasks. A model sets its own bound with max_tasks: N.
const DefaultMaxTasks int64 = 1 << 22

// MaxTasks is the bound that holds for this model: LimitTasks's, else the
// model's max_tasks (or SetMaxTasks), else DefaultMaxTasks.
func (m *Model) MaxTasks() int64 {
	m.sizeMu.Lock()
	defer m.sizeMu.Unlock()
	return m.maxTasksLocked()
}

func (m *Model) maxTasksLocked() int64 { return bound(m.taskLimit, m.maxTasks, DefaultMaxTasks) }

// bound is the bound that holds: the user's (a command's flag, a node's),
// else the model's own, which may lower the default but not raise it: a
// model that allows itself 10^12 tasks is the file's word, and the
// process's memory is not the file's to give away (a node refuses the
// same, remote/host.go).
func bound(user, model, def int64) int64 {
	switch {
	case user > 0:
		return user
	case model > 0:
		return min(model, def)
	}
	return def
}

// LimitTasks bounds the model's passes at n device tasks whatever its
// max_tasks says: a command's --max-tasks, given to the model it loaded
// (0: no such bound). It is the model's, not the process's, so two models
// of one process, or two tests, do not share it.
func (m *Model) LimitTasks(n int64) {
	m.sizeMu.Lock()
	m.taskLimit = max(n, 0)
	m.sizes = nil
	m.sizeMu.Unlock()
}

// MaxEdges is the bound on a pass's dependency edges that holds for this
// model: LimitEdges's, else the model's max_edges, else
// stages.DefaultMaxEdges. The pass counts its edges as it resolves them
// (stages.EdgeBoundError).
func (m *Model) MaxEdges() int64 {
	m.sizeMu.Lock()
	defer m.sizeMu.Unlock()
	return bound(m.edgeLimit, m.maxEdges, stages.DefaultMaxEdges)
}

// LimitEdges bounds the model's passes at n dependency edges whatever its
// max_edges says: a command's --max-edges, or a node's own (0: no such
// bound).
func (m *Model) LimitEdges(n int64) {
	m.sizeMu.Lock()
	m.edgeLimit = max(n, 0)
	m.sizeMu.Unlock()
}

// SetMaxTasks sets the model's own bound on a pass's device tasks, as
// max_tasks: does (0: the default).
func (m *Model) SetMaxTasks(n int64) {
	m.sizeMu.Lock()
	m.maxTasks = max(n, 0)
	m.sizes = nil
	m.sizeMu.Unlock()
}

// Size is the number of device tasks one pass of a form submits (Graph
// bodies counted once per call), computed without submitting or expanding
// anything: loops whose body does not change with the loop var are
// multiplied out. It stops counting past limit (returning a count above
// it) and reports the op where the count crossed it.
func (m *Model) Size(form string, limit int64) (int64, error) {
	n, err := m.size(form, limit)
	var oe *overError
	if errors.As(err, &oe) {
		err = oe.err
	}
	return n, err
}

// size is Size with a crossing of the bound told apart (overError) from a
// bad expression met while counting.
func (m *Model) size(form string, limit int64) (int64, error) {
	f := m.formIdx[form]
	if f == nil {
		return 0, fmt.Errorf("config: model %s has %w %q", m.Name, ErrNoForm, form)
	}
	n, err := m.sizeCost(f, limit)
	return n.tasks, err
}

// sizeCost is what one pass of form f costs, tasks and work, as the runner
// counts what it did (runner.did).
func (m *Model) sizeCost(f *form, limit int64) (cost, error) {
	s := &sizer{m: m, limit: limit}
	env := make([]int64, m.program.envSize)
	copy(env, f.params)
	n := s.ops(m.program, env, m.program.body)
	if s.err != nil && s.isOver {
		return n, &overError{err: s.err, limit: limit}
	}
	return n, s.err
}

// overError is size's error when the pass crosses the bound, as opposed to
// a bad expression met while counting: only the former is helped by
// raising max_tasks, so only it carries that hint.
type overError struct {
	err   error
	limit int64
}

func (e *overError) Error() string {
	return fmt.Sprintf("%v (a pass is bounded by max_tasks: %d; raise it with --max-tasks, or with max_tasks: in the model up to %d)", e.err, e.limit, DefaultMaxTasks)
}

func (e *overError) Unwrap() error { return e.err }

// checkSize refuses a form whose pass is larger than the model's bound,
// once per form and bound.
func (m *Model) checkSize(f *form) error {
	m.sizeMu.Lock()
	defer m.sizeMu.Unlock()
	limit := m.maxTasksLocked()
	if c, ok := m.sizes[f.name]; ok && c.limit == limit {
		return c.err
	}
	n, err := m.size(f.name, limit)
	if err == nil && n > limit {
		err = &overError{err: &Error{File: m.file, Line: 1, Key: "max_tasks", Value: fmt.Sprint(limit), Msg: fmt.Sprintf("form %s submits more than %d tasks per pass", f.name, limit)}, limit: limit}
	}
	if m.sizes == nil {
		m.sizes = map[string]sizeCheck{}
	}
	m.sizes[f.name] = sizeCheck{limit: limit, err: err}
	return err
}

type sizeCheck struct {
	limit int64
	err   error
}

// sizer counts a pass's tasks by walking the ops with their env, as the
// runner does, without tensors. It counts the runner's work too (loop
// iterations, task list elements declared or set), so that a pass of few
// tasks but 10^12 empty iterations is refused as well.
type sizer struct {
	m     *Model
	limit int64
	total int64 // tasks counted so far, for the limit
	work  int64 // work counted so far, bounded by workPerTask × limit
	err   error
	// isOver: err is the limit, not a bad expression; each enclosing loop
	// then names itself, so the error points at the outermost loop.
	isOver bool
	// entryWritten is the entry tensors' data with the host's writes so
	// far (write ops), as the run has it.
	entryWritten map[int][]int64
}

// workPerTask is how much interpreter work (iterations, task list
// elements) a pass may do per task it is allowed.
const workPerTask = 16

func (s *sizer) eval(e *expr, env []int64, line int, key string) int64 {
	return s.evalNamed(e, env, line, key, "")
}

// evalNamed is eval of the expression at key prefix+name, joined only for
// an error: the sizer walks a call per iteration, up to millions, and
// building each call's keys took most of its time.
func (s *sizer) evalNamed(e *expr, env []int64, line int, prefix, name string) int64 {
	var ee evalErr
	v := e.eval(env, &ee)
	if ee.err != nil && s.err == nil {
		s.err = &Error{File: s.m.file, Line: line, Key: prefix + name, Value: e.src, Msg: ee.err.Error()}
	}
	return v
}

// over records that the count crossed the limit at this op.
func (s *sizer) over(line int, key, value, what string) {
	if s.err == nil || s.isOver {
		s.err = &Error{File: s.m.file, Line: line, Key: key, Value: value, Msg: fmt.Sprintf("%s: the pass would submit more than %d tasks", what, s.limit)}
		s.isOver = true
	}
}

// count adds tasks and work to the pass's totals; false when they cross
// the limit, which the caller then names (over), so that what it says is
// formatted only for the error.
func (s *sizer) count(c cost) bool {
	t, ok1 := addOK(s.total, c.tasks)
	w, ok2 := addOK(s.work, c.work)
	if !ok1 || !ok2 || t > s.limit || w > workPerTask*s.limit {
		s.total = s.limit + 1
		return false
	}
	s.total, s.work = t, w
	return true
}

// cost is what an op list submits (tasks) and how much the interpreter
// does to submit it (work).
type cost struct{ tasks, work int64 }

func (c *cost) add(d cost) {
	var ok1, ok2 bool
	c.tasks, ok1 = addOK(c.tasks, d.tasks)
	c.work, ok2 = addOK(c.work, d.work)
	if !ok1 || !ok2 {
		c.tasks, c.work = math.MaxInt64, math.MaxInt64
	}
}

// ops counts an op list run in env (which it may change: loop vars).
func (s *sizer) ops(b *block, env []int64, ops []*op) cost {
	var n cost
	for _, o := range ops {
		if s.err != nil {
			return n
		}
		if o.cond != nil && s.eval(o.cond, env, o.line, "if") == 0 {
			continue
		}
		var c cost
		switch o.kind {
		case opAlloc, opTask:
			c = cost{tasks: 1, work: 1}
		case opTasks:
			for _, d := range o.taskDecls {
				c.add(cost{work: max(s.eval(d.size, env, o.line, "tasks"), 0)})
			}
		case opSet:
			for _, st := range o.sets {
				if st.target.count != nil {
					c.add(cost{work: max(s.eval(st.target.count, env, st.line, "set"), 0)})
				}
			}
		case opScope, opIf:
			n.add(s.ops(b, env, o.body))
			continue
		case opRead:
			s.read(env, o)
			continue
		case opWrite:
			s.write(env, o)
			continue
		case opLocal:
			for i := range o.locals {
				it := &o.locals[i]
				env[it.slot] = s.evalNamed(it.e, env, o.line, "local.", it.name)
			}
			continue
		case opLoop:
			n.add(s.loop(b, env, o))
			continue
		case opCall:
			n.add(s.call(b, env, o.call))
			continue
		}
		n.add(c)
		if !s.count(c) {
			s.over(o.line, "op", "", "this op")
		}
	}
	return n
}

func (s *sizer) loop(b *block, env []int64, o *op) cost {
	from, to, step := s.eval(o.from, env, o.line, "loop.from"), s.eval(o.to, env, o.line, "loop.to"), int64(1)
	if o.step != nil {
		step = s.eval(o.step, env, o.line, "loop.step")
	}
	if s.err != nil || from >= to {
		return cost{}
	}
	if step <= 0 {
		s.err = &Error{File: s.m.file, Line: o.line, Key: "loop.step", Value: o.step.src, Msg: fmt.Sprintf("loop step %d (want a positive step)", step)}
		return cost{}
	}
	iters := (to-from-1)/step + 1
	if to-from-1 < 0 { // to - from overflowed
		iters = math.MaxInt64
	}
	if !bodyVaries(o.body, o.loopSlot) {
		// Every iteration costs what the first does.
		env[o.loopSlot] = from
		t0, w0 := s.total, s.work
		per := s.ops(b, env, o.body)
		s.total, s.work = t0, w0
		if s.isOver {
			s.over(o.line, "loop.to", o.to.src, loopWhat(iters))
			return per
		}
		per.work++
		var total cost
		var ok1, ok2 bool
		if total.tasks, ok1 = mulOK(per.tasks, iters); !ok1 {
			total.tasks = math.MaxInt64
		}
		if total.work, ok2 = mulOK(per.work, iters); !ok2 {
			total.work = math.MaxInt64
		}
		if !s.count(total) {
			s.over(o.line, "loop.to", o.to.src, fmt.Sprintf("%s of %d tasks", loopWhat(iters), per.tasks))
		}
		return total
	}
	var n cost
	for v := from; v < to && s.err == nil; {
		env[o.loopSlot] = v
		n.add(s.ops(b, env, o.body))
		n.add(cost{work: 1})
		if !s.count(cost{work: 1}) {
			s.over(o.line, "loop.to", o.to.src, loopWhat(iters))
		}
		if v > math.MaxInt64-step {
			break
		}
		v += step
	}
	if s.isOver {
		s.over(o.line, "loop.to", o.to.src, loopWhat(iters))
	}
	return n
}

func loopWhat(iters int64) string { return fmt.Sprintf("a loop of %d iterations", iters) }

// bodyVaries reports whether an op list's task count or work may change
// with env slot: an expression of role count (exprs: a condition, a loop
// bound, a read index, a task list's size, a set's run, a call param) that
// reads it. (Issue 35: tasks: {L: "i*256+1"} in a loop of 4000 was
// multiplied out as its first iteration's when this walk listed the
// fields itself and missed the task list's size.)
func bodyVaries(ops []*op, slot int) bool {
	for _, o := range ops {
		// A local op may assign a name of the enclosing lists, which the
		// next iteration (and what follows the loop) reads: each
		// iteration is walked.
		if o.kind == opLocal || o.kind == opWrite || o.readsSlot(slot, roleCount) || bodyVaries(o.body, slot) {
			return true
		}
	}
	return false
}

// read binds a read op's names as the run does (the data decides loop
// counts); an index outside its tensor is left to the run to report.
func (s *sizer) read(env []int64, o *op) {
	for i := range o.reads {
		it := &o.reads[i]
		if it.view != nil {
			// A value only (checkValueOnly): no count reads it.
			env[it.slot] = 0
			continue
		}
		e := &s.m.entry[it.root]
		flat := int64(0)
		for d, x := range it.indices {
			v := s.eval(x, env, o.line, "read."+it.name)
			if v < 0 || v >= e.shape[d] {
				env[it.slot] = 0
				return
			}
			flat = flat*e.shape[d] + v
		}
		env[it.slot] = e.data[flat]
		if d, ok := s.entryWritten[it.root]; ok {
			env[it.slot] = d[flat]
		}
	}
}

// write follows the run's writes of entry tensors' data, which later reads
// (and the counts they set) see; a write of any other tensor changes no
// count.
func (s *sizer) write(env []int64, o *op) {
	for i := range o.writes {
		w := &o.writes[i]
		e := w.view.base
		if w.view.kind != baseSlot || e >= len(s.m.entry) || s.m.entry[e].data == nil || len(w.indices) != len(s.m.entry[e].shape) {
			continue
		}
		shape := s.m.entry[e].shape
		flat := int64(0)
		for d, x := range w.indices {
			v := s.eval(x, env, o.line, "write")
			if v < 0 || v >= shape[d] {
				return // the run reports it
			}
			flat = flat*shape[d] + v
		}
		val := s.eval(w.value, env, o.line, "write")
		if s.entryWritten == nil {
			s.entryWritten = map[int][]int64{}
		}
		d, ok := s.entryWritten[e]
		if !ok {
			d = append([]int64(nil), s.m.entry[e].data...)
			s.entryWritten[e] = d
		}
		d[flat] = val
	}
}

func (s *sizer) call(caller *block, env []int64, c *callOp) cost {
	cb := c.callee
	cenv := make([]int64, cb.envSize)
	for i, e := range c.params {
		cenv[i] = s.evalNamed(e, env, c.line, "with.", cb.params[i])
	}
	if cb.variantSlot >= 0 {
		cenv[cb.variantSlot] = int64(c.variant)
	}
	for _, i := range cb.callScalars(cenv) {
		sc := cb.scalars[i]
		cenv[cb.scalarBase+i] = s.evalNamed(sc.value, cenv, sc.line, "scalars.", sc.name)
	}
	if s.err != nil {
		return cost{}
	}
	return s.ops(cb, cenv, cb.body)
}

// shapeOK reports whether a shape's bytes fit int64 (so that every offset
// and end computed from it does).
func shapeOK(dims []int64, dt stages.DType) bool {
	n := max(dt.Size(), 1)
	for _, d := range dims {
		var ok bool
		if n, ok = mulOK(n, d); !ok {
			return false
		}
	}
	return true
}

// maxBlockNum bounds a task's SPMD width: upstream's block_num × cores per
// block must fit total_required_subtasks, an int16 (the device refuses more).
const maxBlockNum = 1<<15 - 1
