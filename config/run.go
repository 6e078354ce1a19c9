package config

import (
	"fmt"
	"math"
	"strings"

	"github.com/hbg-dev/hbg/stages"
)

// launchAll is every launch flag an op can give.
const launchAll = stages.LaunchEarly | stages.LaunchSyncStart

// TensorReader is implemented by a Submitter that wants to see the host's
// reads of device data (the trace's get_tensor_data events): element idx
// of root (nil: the entry tensor's value:) read value.
type TensorReader interface {
	ReadTensor(root stages.RootID, idx []int64, value int64)
}

// Run interprets the model's program as an orchestration on o in the given
// form: block calls that the form makes Graphs go through o.Graph, all other
// ops are submitted directly.
func (m *Model) Run(o stages.Submitter, form string) error {
	_, err := m.runAt(o, form, 0)
	return err
}

// run is Run, returning the runner's own count of what it did (the tasks
// it submitted and its work, as the sizer counts them), so that a test
// holds the sizer to it (FuzzSizeMatchesRun).
func (m *Model) run(o stages.Submitter, form string) (cost, error) {
	return m.runAt(o, form, 0)
}

// runAt is run at round (a model with steps: runs that round's params).
func (m *Model) runAt(o stages.Submitter, form string, round int) (_ cost, err error) {
	f := m.formIdx[form]
	if f == nil {
		return cost{}, fmt.Errorf("config: model %s has %w %q (want one of %s)", m.Name, ErrNoForm, form, strings.Join(m.Forms(), ", "))
	}
	if err := m.checkSize(f); err != nil {
		return cost{}, err
	}
	r := m.getRunner(f)
	done := false
	defer func() {
		if done {
			m.putRunner(r) // one a panic left half-way is not reused
			return
		}
		p := recover()
		b, ok := p.(*stages.EdgeBoundError)
		switch {
		case p == nil: // a Goexit goes on
			return
		case !ok:
			panic(p)
		}
		// The task op whose submission crossed the bound.
		err = &Error{File: m.file, Line: max(r.line, 1), Key: "max_edges", Value: fmt.Sprint(b.Limit), Msg: fmt.Sprintf("form %s: %v", form, b), Err: b}
	}()
	r.line = 0
	fr := r.frame(m.program)
	copy(fr.env, f.params)
	if m.steps != nil {
		if err := m.applySteps(fr.env, round); err != nil {
			done = true
			return cost{}, err
		}
	}
	copy(fr.tensors, m.entryViews)
	fr.resetTasks()
	if f.step != nil {
		r.stepCall(subOf(o), fr)
	} else {
		r.body(subOf(o), fr, m.program.body)
	}
	done = true
	return *r.did, r.err
}

// runner holds one interpretation's scratch: frames (one per block, reused
// across calls) and the task buffers Submit copies from.
type runner struct {
	// line is the task op last submitted: where a pass that crossed the
	// edge bound says it did.
	line       int
	model      *Model
	form       *form
	frames     []*frame
	task       stages.Task
	allocSpecs []stages.RootSpec
	taskBuf    []stages.TaskID
	exprErr    evalErr
	err        error
	// did is what the run did, counted as the sizer counts it: tasks
	// submitted, and work (tasks, loop iterations, task list elements
	// declared or set). A Graph body run during the call adds to its
	// caller's.
	did *cost
	// hostData is what the host knows of roots' values (hostdata.go), and
	// entryWritten the entry tensors' data with the host's writes; both
	// for one run.
	hostData     map[stages.RootID]*hostVals
	entryWritten map[int][]int64
}

func (m *Model) newRunner(f *form) *runner {
	return &runner{model: m, form: f, frames: make([]*frame, len(m.blocks)+1), did: &cost{}}
}

// getRunner reuses a runner (its frames and buffers) from an earlier Run, so
// that a warm Run allocates next to nothing.
func (m *Model) getRunner(f *form) *runner {
	if r, ok := m.runners.Get().(*runner); ok {
		r.form, r.err, r.exprErr = f, nil, evalErr{}
		*r.did = cost{}
		r.hostData, r.entryWritten = nil, nil
		return r
	}
	return m.newRunner(f)
}

func (m *Model) putRunner(r *runner) { m.runners.Put(r) }

// frame is one block activation. A block's frame is reused call after call
// (runner.frame), so the scratch below keeps its capacity across a warm Run.
type frame struct {
	block *block
	// env is the expression environment: params, the variant index, boundary
	// scalars (from block.scalarBase) and loop vars, by env slot.
	env []int64
	// tensors holds the tensor slots (block.slotNames): boundary slots (or
	// an auto block's tensor params), then allocs and lets.
	tensors []stages.View
	// tensorArgs are the call's tensor params, evaluated in the caller.
	tensorArgs []stages.View
	// scalars are the boundary scalars as the Boundary handed them, with
	// their provenance (Src), passed straight into a task's scalars.
	scalars []stages.Scalar
	// absentEnv marks the env slots of boundary scalars the call's variant
	// does not pass (per-variant scalars): reading one is an error.
	absentEnv uint64
	// idTasks[i] are the tasks submitted under op id block.ids[i] in this
	// call: the latest last ("id"), or every one of the current run of its
	// loop ("id*").
	idTasks    [][]stages.TaskID
	taskLists  [][]stages.TaskID // task lists (NoTask: not set)
	taskParams [][]stages.TaskID // task params, as the call bound them
	// inGraph: the frame runs inside a Graph body, so its calls are inline.
	inGraph bool

	// An auto block run as a Graph body (or inside one) maps each of its
	// calls' boundary slots and scalars to its own boundary:
	// ownSlotOf[call][slot] indexes ownBoundary.Tensors (-1: a tensor the
	// block allocates), ownScalarOf[call][i] ownBoundary.Scalars.
	ownBoundary *stages.Boundary
	ownSlotOf   [][]int32
	ownScalarOf [][]int32

	// The block's boundary as a call computes it (runner.boundary): the
	// slots' args and the boundary scalars' values.
	boundaryArgs []stages.Arg
	scalarVals   []uint64

	// Scratch of an auto block's boundary (runner.autoBoundary): the
	// deduplicated args and scalars (values and names), and the maps from
	// each call's slots and scalars to them.
	autoArgs                 []stages.Arg
	autoScalarVals           []uint64
	autoScalarNames          []string
	autoSlotOf, autoScalarOf [][]int32
	// autoRootHead and autoNextSlot chain the auto boundary's slots by root,
	// so a call's arg is deduplicated against the few slots of its own root:
	// linear in the boundary width, with no hashing of whole views.
	autoRootHead map[stages.RootID]int32
	autoNextSlot []int32
	autoWritten  map[stages.View]bool // views some slot writes

	// The Boundary handed to the body of an inline (non-Graph) call.
	inlineBoundary stages.Boundary
	inlineScalars  []stages.Scalar

	// The Graph call this frame makes, reused call after call; the
	// auto-boundary maps of the call in progress (read by its Body and
	// Detach); the buffer its key is built in.
	graphCall stages.GraphCall
	// stepOf is the form whose step graphCall is (the program's frame).
	stepOf                     *form
	graphSlotOf, graphScalarOf [][]int32
	keyBuf                     []byte
	keys                       map[string]string // the keys made so far (runner.key)
	// The last key made, for which spec and from which param values.
	keyOf   *graphSpec
	keyVals []int64
	lastKey string
}

func newFrame(b *block) *frame {
	return &frame{
		block:        b,
		env:          make([]int64, b.envSize),
		tensors:      make([]stages.View, len(b.slotNames)),
		tensorArgs:   make([]stages.View, len(b.tensors)),
		scalars:      make([]stages.Scalar, len(b.scalars)),
		idTasks:      make([][]stages.TaskID, len(b.ids)),
		taskLists:    make([][]stages.TaskID, len(b.taskLists)),
		taskParams:   make([][]stages.TaskID, len(b.taskParams)),
		boundaryArgs: make([]stages.Arg, len(b.boundary)),
		scalarVals:   make([]uint64, len(b.scalars)),
	}
}

func (r *runner) frame(b *block) *frame {
	i := b.idx + 1
	if r.frames[i] == nil {
		r.frames[i] = newFrame(b)
	}
	return r.frames[i]
}

func (f *frame) resetTasks() {
	for i := range f.idTasks {
		f.idTasks[i] = f.idTasks[i][:0]
	}
	for i := range f.taskLists {
		f.taskLists[i] = f.taskLists[i][:0]
	}
}

func (r *runner) fail(line int, format string, a ...any) {
	r.failAt(line, "", "", format, a...)
}

// failAt records the run's first error with the key and value it is about.
func (r *runner) failAt(line int, key, value, format string, a ...any) {
	if r.err == nil {
		r.err = &Error{File: r.model.file, Line: line, Key: key, Value: value, Msg: fmt.Sprintf(format, a...)}
	}
}

func (r *runner) eval(e *expr, fr *frame, line int) int64 {
	if e.deps&fr.absentEnv != 0 {
		r.failAbsent(e, fr, line)
		return 0
	}
	// An affine expression (nearly every view offset: 24*layer, ...) whose
	// terms fit 32 bits cannot overflow a product: summed here without
	// mulOK's division. Anything else, or a sum that overflows, takes the
	// general path, which says where it overflows.
	switch e.kind {
	case exConst:
		return e.val
	case exVar:
		return fr.env[e.slot]
	}
	if a := e.aff; a != nil {
		if v, ok := a.eval32(fr.env); ok {
			return v
		}
	}
	v := e.eval(fr.env, &r.exprErr)
	if r.exprErr.err != nil && r.err == nil {
		r.err = &Error{File: r.model.file, Line: line, Key: "expression", Value: e.src, Msg: r.exprErr.err.Error()}
	}
	return v
}

// failAbsent reports an expression that reads a boundary scalar the call's
// variant does not pass.
func (r *runner) failAbsent(e *expr, fr *frame, line int) {
	cb := fr.block
	for i, s := range cb.scalars {
		if e.deps&fr.absentEnv&(1<<uint(cb.scalarBase+i)) != 0 {
			r.failAt(line, "expression", e.src, "boundary scalar %s is not one variant %s of %s passes (its scalars at line %d)", s.name, cb.variants[fr.env[cb.variantSlot]], cb.name, cb.variantScalarsLine)
			return
		}
	}
}

func (r *runner) body(o *sub, fr *frame, ops []*op) {
	for _, op := range ops {
		if r.err != nil {
			return
		}
		if op.cond != nil && r.eval(op.cond, fr, op.line) == 0 {
			continue
		}
		switch op.kind {
		case opAlloc:
			r.did.tasks++
			r.did.work++
			r.alloc(o, fr, op)
		case opTask:
			r.did.tasks++
			r.did.work++
			t := op.task[0]
			if len(op.task) > 1 {
				t = op.task[fr.env[fr.block.variantSlot]]
			}
			r.line = op.line
			r.submit(o, fr, t, op.line)
		case opScope:
			o.ScopeBegin(op.mode)
			r.body(o, fr, op.body)
			o.ScopeEnd()
		case opLoop:
			// An id inside a loop collects the tasks of every iteration of
			// this run of the loop: "id" is the latest, "id*" all of them.
			for _, l := range op.loopIDs {
				fr.idTasks[l] = fr.idTasks[l][:0]
			}
			from, to, step := r.eval(op.from, fr, op.line), r.eval(op.to, fr, op.line), int64(1)
			if op.step != nil {
				if step = r.eval(op.step, fr, op.line); step <= 0 && r.err == nil {
					r.failAt(op.line, "loop.step", op.step.src, "loop step %d (want a positive step)", step)
				}
			}
			for v := from; v < to && r.err == nil; {
				r.did.work++
				fr.env[op.loopSlot] = v
				r.body(o, fr, op.body)
				if v > math.MaxInt64-step {
					break
				}
				v += step
			}
		case opIf:
			r.body(o, fr, op.body)
		case opCall:
			r.call(o, fr, op.call)
		case opLet:
			r.runLet(fr, op)
		case opTasks:
			r.declareTasks(fr, op)
		case opSet:
			r.setTasks(fr, op)
		case opWrite:
			r.write(o, fr, op)
		case opLocal:
			for i := range op.locals {
				it := &op.locals[i]
				fr.env[it.slot] = r.eval(it.e, fr, op.line)
			}
		case opRead:
			if op.reads != nil {
				r.read(o, fr, op)
				continue
			}
			if tr := o.reader; tr != nil {
				tr.ReadTensor(stages.RootID(op.readRoot), nil, r.model.entry[op.readRoot].value)
			}
		}
	}
}

// read runs a read op's host reads: each binds its name to an element of
// an entry tensor's contents, in order, and is traced. A read inside a
// Graph body would be settled once, when the body is recorded, and every
// replay would run on that value (upstream's #1939 shape): refused, at its
// line. Read in the caller, and pass the value as a param (in the key when
// it shapes the body) or as a boundary view's offset (patched per call).
func (r *runner) read(o *sub, fr *frame, op *op) {
	for i := range op.reads {
		it := &op.reads[i]
		if fr.inGraph && !fr.block.isProgram {
			r.failAt(op.line, "read."+it.name, it.src, "a host read inside the Graph body of %s: its value would be fixed at record time; read it in the caller and pass it in", fr.block.name)
			return
		}
		if it.view != nil {
			r.hostReadView(o, fr, op, it)
			if r.err != nil {
				return
			}
			continue
		}
		e := &r.model.entry[it.root]
		idx := make([]int64, len(it.indices))
		flat := int64(0)
		for d, x := range it.indices {
			v := r.eval(x, fr, op.line)
			if r.err != nil {
				return
			}
			if v < 0 || v >= e.shape[d] {
				r.failAt(op.line, "read."+it.name, it.src, "index %d is %d, outside [0, %d) of %s %v", d, v, e.shape[d], e.name, e.shape)
				return
			}
			idx[d] = v
			flat = flat*e.shape[d] + v
		}
		// The host reads the entry data as the model gives it, with its own
		// writes (upstream's waits come first: a kernel may write it).
		r.hostWait(o, r.model.entryViews[it.root], false)
		d := r.entryData(it.root)
		fr.env[it.slot] = d[flat]
		if tr := o.reader; tr != nil {
			tr.ReadTensor(stages.RootID(it.root), idx, d[flat])
		}
	}
}

func (r *runner) shape(fr *frame, it *allocItem, line int) []int64 {
	if it.constShape != nil {
		return it.constShape
	}
	s := make([]int64, len(it.shape))
	for i, d := range it.shape {
		if s[i] = r.eval(d, fr, line); s[i] <= 0 {
			r.failAt(line, "alloc", it.name, "alloc %s: dimension %d is %d (want a positive size)", it.name, i, s[i])
		}
	}
	if r.err == nil && !shapeOK(s, it.dtype) {
		r.failAt(line, "alloc", it.name, "alloc %s: the shape %v of %s overflows int64 bytes", it.name, s, it.dtype)
	}
	return s
}

func (r *runner) alloc(o *sub, fr *frame, op *op) {
	r.allocSpecs = r.allocSpecs[:0]
	for i := range op.allocs {
		it := &op.allocs[i]
		r.allocSpecs = append(r.allocSpecs, stages.RootSpec{Name: it.name, DType: it.dtype, Shape: r.shape(fr, it, op.line), ManualDep: it.manualDep})
	}
	if r.err != nil {
		return
	}
	id, first := o.Alloc(r.allocSpecs)
	r.initialValues(op, first)
	if op.allocID >= 0 {
		fr.idTasks[op.allocID] = append(fr.idTasks[op.allocID], id)
	}
	for i := range op.allocs {
		it := &op.allocs[i]
		if it.constShape != nil {
			v := it.constView
			v.Root = first + stages.RootID(i)
			fr.tensors[it.slot] = v
		} else {
			fr.tensors[it.slot] = stages.NewView(first+stages.RootID(i), 0, it.dtype, r.allocSpecs[i].Shape...)
		}
	}
}

func (r *runner) submit(o *sub, fr *frame, t *taskOp, line int) {
	tk := &r.task
	tk.Kind, tk.Kernel, tk.BlockNum = t.kind, t.kernel, t.blockNum
	tk.Line = int32(line)
	if t.kernelList != nil {
		i := r.eval(t.kernelIndex, fr, line)
		if i < 0 || i >= int64(len(t.kernelList)) {
			if r.err == nil {
				r.failAt(line, "k", t.kernelIndex.src, "kernel %d of a list of %d (%s...)", i, len(t.kernelList), t.name)
			}
			return
		}
		tk.Kernel = t.kernelList[i]
	}
	tk.Launch = t.launch
	if t.launchSet != launchAll {
		// The flags the op leaves to its kernel: a MIX task's are its AIC
		// kernel's (the name a trace gives it).
		if k := tk.Kernel[0]; k >= 0 {
			tk.Launch |= r.model.kernelLaunch[k] &^ t.launchSet
		} else if k := tk.Kernel[1]; k >= 0 {
			tk.Launch |= r.model.kernelLaunch[k] &^ t.launchSet
		} else if k := tk.Kernel[2]; k >= 0 {
			tk.Launch |= r.model.kernelLaunch[k] &^ t.launchSet
		}
	}
	tk.Args, tk.Scalars, tk.Deps, tk.OutNames = tk.Args[:0], tk.Scalars[:0], tk.Deps[:0], tk.OutNames[:0]
	tk.Pred = stages.Predicate{}
	for i := range t.args {
		a := &t.args[i]
		tk.Args = append(tk.Args, stages.Arg{Tag: a.tag})
		arg := &tk.Args[len(tk.Args)-1]
		if a.out != nil {
			arg.View = stages.NewView(0, 0, a.out.dtype, r.shape(fr, a.out, line)...)
			tk.OutNames = append(tk.OutNames, a.out.name)
		} else if !r.view(fr, a.view, &arg.View) {
			return
		}
	}
	for _, e := range t.scalars {
		if e.boundaryScalar >= 0 {
			if e.deps&fr.absentEnv != 0 {
				r.failAbsent(e, fr, line)
				return
			}
			tk.Scalars = append(tk.Scalars, fr.scalars[e.boundaryScalar])
		} else {
			tk.Scalars = append(tk.Scalars, stages.Static(uint64(r.eval(e, fr, line))))
		}
	}
	for _, d := range t.deps {
		var ok bool
		if tk.Deps, ok = r.taskSeq(tk.Deps, fr, d, line); !ok {
			return
		}
	}
	if p := t.pred; p != nil {
		pv := &tk.Pred
		pv.Valid, pv.Op = true, p.op
		if !r.view(fr, p.view, &pv.View) {
			return
		}
		if len(p.indices) != int(pv.View.NDims) {
			r.fail(line, "predicate on %s: %d indices for a tensor of rank %d", p.view.src, len(p.indices), pv.View.NDims)
			return
		}
		var off int64
		for i, e := range p.indices {
			x := r.eval(e, fr, line)
			if x < 0 || x >= pv.View.Shape[i] {
				r.fail(line, "predicate on %s: index %d is %d, outside [0, %d)", p.view.src, i, x, pv.View.Shape[i])
				return
			}
			off += x * pv.View.Strides[i]
		}
		pv.Index = off
		pv.Target = r.eval(p.target, fr, line)
	}
	if r.err != nil {
		return
	}
	// Runtime-allocated outputs: Submit writes each new root back into the
	// task's args; a Submitter that does not is asked for NumRoots (it
	// numbers the outputs consecutively in argument order).
	first := -1
	if t.hasOutputs {
		for i := range t.args {
			if t.args[i].out != nil {
				tk.Args[i].View.Root = -1
			}
		}
		if rc := o.roots; rc != nil {
			first = rc.NumRoots()
		}
	}
	if p := &tk.Pred; p.Valid && r.entryWritten != nil && int(p.View.Root) < len(r.model.entry) {
		if _, ok := r.entryWritten[int(p.View.Root)]; ok {
			r.fail(line, "predicate on %s: the host wrote that entry tensor's data, and the device evaluates a predicate on the data the model gives it", t.pred.view.src)
			return
		}
	}
	id := o.Submit(tk)
	r.kernelWrote(tk.Args)
	if t.id >= 0 {
		fr.idTasks[t.id] = append(fr.idTasks[t.id], id)
	}
	if t.store != nil {
		r.taskBuf = append(r.taskBuf[:0], id)
		r.store(fr, t.store, r.taskBuf, line)
	}
	if t.hasOutputs {
		n := 0
		for i := range t.args {
			a := &t.args[i]
			if a.out == nil {
				continue
			}
			v := tk.Args[i].View
			if v.Root < 0 {
				if first < 0 {
					r.fail(line, "task %s has a runtime-allocated output (tag out), but the Submitter neither writes its root back nor reports NumRoots", t.name)
					return
				}
				v.Root = stages.RootID(first + n)
			}
			v.Offset = 0
			fr.tensors[a.out.slot] = v
			n++
		}
	}
}
