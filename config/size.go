package config

import (
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

// MaxTasksOverride, when positive, bounds every model's passes whatever its
// max_tasks says: the command's --max-tasks. Set it before running models.
var MaxTasksOverride int64

// MaxTasks is the bound that holds for this model: MaxTasksOverride, else
// the model's max_tasks (or SetMaxTasks), else DefaultMaxTasks.
func (m *Model) MaxTasks() int64 {
	switch {
	case MaxTasksOverride > 0:
		return MaxTasksOverride
	case m.maxTasks > 0:
		return m.maxTasks
	}
	return DefaultMaxTasks
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
	f := m.formIdx[form]
	if f == nil {
		return 0, fmt.Errorf("config: model %s has no form %q", m.Name, form)
	}
	s := &sizer{m: m, limit: limit}
	env := make([]int64, m.program.nvals)
	copy(env, f.params)
	n := s.ops(m.program, env, m.program.body)
	return n, s.err
}

// checkSize refuses a form whose pass is larger than the model's bound,
// once per form and bound.
func (m *Model) checkSize(f *form) error {
	limit := m.MaxTasks()
	m.sizeMu.Lock()
	defer m.sizeMu.Unlock()
	if c, ok := m.sizes[f.name]; ok && c.limit == limit {
		return c.err
	}
	n, err := m.Size(f.name, limit)
	if err == nil && n > limit {
		err = &Error{File: m.file, Line: 1, Key: "max_tasks", Value: fmt.Sprint(limit), Msg: fmt.Sprintf("form %s submits more than %d tasks per pass", f.name, limit)}
	}
	if err != nil {
		err = fmt.Errorf("%w (a pass is bounded by max_tasks: %d; raise it with max_tasks: in the model or --max-tasks)", err, limit)
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
// runner does, without tensors.
type sizer struct {
	m     *Model
	limit int64
	total int64 // tasks counted so far, for the limit
	err   error
	work  int64 // loop iterations walked, bounded like the tasks
	// isOver: err is the limit, not a bad expression; each enclosing loop
	// then names itself, so the error points at the outermost loop.
	isOver bool
}

func (s *sizer) eval(e *expr, env []int64, line int, key string) int64 {
	var ee evalErr
	v := e.eval(env, &ee)
	if ee.err != nil && s.err == nil {
		s.err = &Error{File: s.m.file, Line: line, Key: key, Value: e.src, Msg: ee.err.Error()}
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

func (s *sizer) add(n int64, line int, key, value, what string) {
	if t, ok := addOK(s.total, n); !ok || t > s.limit {
		s.total = s.limit + 1
		s.over(line, key, value, what)
		return
	}
	s.total += n
}

// ops counts the tasks of an op list run in env (which it may change:
// loop vars).
func (s *sizer) ops(b *block, env []int64, ops []*op) int64 {
	var n int64
	for _, o := range ops {
		if s.err != nil {
			return n
		}
		if o.cond != nil && s.eval(o.cond, env, o.line, "if") == 0 {
			continue
		}
		switch o.kind {
		case opAlloc, opTask:
			n++
			s.add(1, o.line, "op", "", "this op")
		case opScope, opIf:
			n += s.ops(b, env, o.body)
		case opLoop:
			n += s.loop(b, env, o)
		case opCall:
			n += s.call(b, env, o.call)
		}
	}
	return n
}

func (s *sizer) loop(b *block, env []int64, o *op) int64 {
	from, to, step := s.eval(o.from, env, o.line, "loop.from"), s.eval(o.to, env, o.line, "loop.to"), int64(1)
	if o.step != nil {
		step = s.eval(o.step, env, o.line, "loop.step")
	}
	if s.err != nil || from >= to {
		return 0
	}
	if step <= 0 {
		s.err = &Error{File: s.m.file, Line: o.line, Key: "loop.step", Value: o.step.src, Msg: fmt.Sprintf("loop step %d (want a positive step)", step)}
		return 0
	}
	iters := (to-from-1)/step + 1
	if to-from-1 < 0 { // to - from overflowed
		iters = math.MaxInt64
	}
	if !bodyVaries(o.body, o.loopSlot) {
		// Every iteration submits as many tasks as the first.
		env[o.loopSlot] = from
		before := s.total
		per := s.ops(b, env, o.body)
		s.total = before
		total, ok := mulOK(per, iters)
		if !ok {
			total = math.MaxInt64
		}
		if s.isOver {
			s.over(o.line, "loop.to", o.to.src, fmt.Sprintf("a loop of %d iterations", iters))
			return total
		}
		s.add(total, o.line, "loop.to", o.to.src, fmt.Sprintf("a loop of %d iterations of %d tasks", iters, per))
		return total
	}
	var n int64
	for v := from; v < to && s.err == nil; {
		env[o.loopSlot] = v
		n += s.ops(b, env, o.body)
		if s.work++; s.work > s.limit {
			s.over(o.line, "loop.to", o.to.src, "loop iterations")
		}
		if v > math.MaxInt64-step {
			break
		}
		v += step
	}
	if s.isOver {
		s.over(o.line, "loop.to", o.to.src, fmt.Sprintf("a loop of %d iterations", iters))
	}
	return n
}

// bodyVaries reports whether an op list's task count may change with env
// slot: a condition, a loop bound or a call param that reads it.
func bodyVaries(ops []*op, slot int) bool {
	bit := uint64(0)
	if slot < 64 {
		bit = 1 << uint(slot)
	}
	reads := func(e *expr) bool { return e != nil && (slot >= 64 || e.deps&bit != 0) }
	for _, o := range ops {
		if reads(o.cond) || reads(o.from) || reads(o.to) || reads(o.step) {
			return true
		}
		if o.call != nil {
			for _, e := range o.call.params {
				if reads(e) {
					return true
				}
			}
		}
		if bodyVaries(o.body, slot) {
			return true
		}
	}
	return false
}

func (s *sizer) call(caller *block, env []int64, c *callOp) int64 {
	cb := c.callee
	cenv := make([]int64, cb.nvals)
	for i, e := range c.params {
		cenv[i] = s.eval(e, env, c.line, "with."+cb.params[i])
	}
	if cb.vslot >= 0 {
		cenv[cb.vslot] = int64(c.variant)
	}
	for i, sc := range cb.scalars {
		cenv[cb.sbase+i] = s.eval(sc.value, cenv, sc.line, "scalars."+sc.name)
	}
	if s.err != nil {
		return 0
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
