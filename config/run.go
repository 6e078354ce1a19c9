package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hbg-dev/hbg/stages"
)

// TensorReader is implemented by a Submitter that wants to see the host's
// reads of device data (the trace's get_tensor_data events).
type TensorReader interface {
	ReadTensor(root stages.RootID, value int64)
}

// rootCounter lets the interpreter learn the RootIDs that Submit gives to a
// task's runtime-allocated outputs (tag out): Submit numbers them
// consecutively from NumRoots, in argument order.
type rootCounter interface {
	NumRoots() int
}

// Run interprets the model's program as an orchestration on o in the given
// form: block calls that the form makes Graphs go through o.Graph, all other
// ops are submitted directly.
func (m *Model) Run(o stages.Submitter, form string) (err error) {
	f := m.formIdx[form]
	if f == nil {
		return fmt.Errorf("config: model %s has no form %q (want one of %s)", m.Name, form, strings.Join(m.Forms(), ", "))
	}
	if err := m.checkSize(f); err != nil {
		return err
	}
	r := m.getRunner(f)
	defer m.putRunner(r)
	fr := r.frame(m.program)
	copy(fr.vals, f.params)
	copy(fr.tens, m.entryViews)
	fr.resetLabels()
	r.body(o, fr, m.program.body)
	return r.err
}

// runner holds one interpretation's scratch: frames (one per block, reused
// across calls) and the task buffers Submit copies from.
type runner struct {
	m      *Model
	f      *form
	frames []*frame
	task   stages.Task
	specs  []stages.RootSpec
	tbuf   []stages.TaskID
	ee     evalErr
	err    error
}

func (m *Model) newRunner(f *form) *runner {
	return &runner{m: m, f: f, frames: make([]*frame, len(m.blocks)+1)}
}

// getRunner reuses a runner (its frames and buffers) from an earlier Run, so
// that a warm Run allocates next to nothing.
func (m *Model) getRunner(f *form) *runner {
	if r, ok := m.runners.Get().(*runner); ok {
		r.f, r.err, r.ee = f, nil, evalErr{}
		return r
	}
	return m.newRunner(f)
}

func (m *Model) putRunner(r *runner) { m.runners.Put(r) }

// frame is one block activation: its env (params, variant, boundary scalars,
// loop vars), its tensor slots, its boundary scalars with provenance, and the
// tasks recorded under each op id.
type frame struct {
	b       *block
	vals    []int64
	tens    []stages.View
	targ    []stages.View
	scal    []stages.Scalar
	labels  [][]stages.TaskID
	tl      [][]stages.TaskID // task lists (NoTask: not set)
	tp      [][]stages.TaskID // task params, as the call bound them
	inGraph bool
	// An auto block run as a Graph body maps each call's boundary slots and
	// scalars to its own boundary: autoT[call][slot], -1 = a local tensor.
	bnd   *stages.Boundary
	autoT [][]int32
	autoS [][]int32
	// Scratch for computing a call's boundary.
	bargs []stages.Arg
	bsc   []uint64
	// Scratch of an auto block's boundary (reused by inline calls).
	aArgs  []stages.Arg
	aScal  []uint64
	aName  []string
	aT, aS [][]int32
	// aHead and aNext chain the auto boundary's slots by root, so a call's
	// arg is deduplicated against the few slots of its own root: linear in
	// the boundary width, with no hashing of whole views.
	aHead  map[stages.RootID]int32
	aNext  []int32
	aWr    map[stages.View]bool // views some slot writes
	ibScal []stages.Scalar
	ib     stages.Boundary
	// The Graph call this frame makes, reused call after call, and the
	// auto-boundary maps of the call in progress.
	gcall          stages.GraphCall
	gAutoT, gAutoS [][]int32
	keyBuf         []byte
}

func newFrame(b *block) *frame {
	return &frame{
		b:      b,
		vals:   make([]int64, b.nvals),
		tens:   make([]stages.View, len(b.tnames)),
		targ:   make([]stages.View, len(b.tensors)),
		scal:   make([]stages.Scalar, len(b.scalars)),
		labels: make([][]stages.TaskID, len(b.labels)),
		tl:     make([][]stages.TaskID, len(b.tlists)),
		tp:     make([][]stages.TaskID, len(b.tparams)),
		bargs:  make([]stages.Arg, len(b.bound)),
		bsc:    make([]uint64, len(b.scalars)),
	}
}

func (r *runner) frame(b *block) *frame {
	i := b.idx + 1
	if r.frames[i] == nil {
		r.frames[i] = newFrame(b)
	}
	return r.frames[i]
}

func (f *frame) resetLabels() {
	for i := range f.labels {
		f.labels[i] = f.labels[i][:0]
	}
	for i := range f.tl {
		f.tl[i] = f.tl[i][:0]
	}
}

func (r *runner) fail(line int, format string, a ...any) {
	r.failAt(line, "", "", format, a...)
}

// failAt records the run's first error with the key and value it is about.
func (r *runner) failAt(line int, key, value, format string, a ...any) {
	if r.err == nil {
		r.err = &Error{File: r.m.file, Line: line, Key: key, Value: value, Msg: fmt.Sprintf(format, a...)}
	}
}

func (r *runner) eval(e *expr, fr *frame, line int) int64 {
	v := e.eval(fr.vals, &r.ee)
	if r.ee.err != nil && r.err == nil {
		r.err = &Error{File: r.m.file, Line: line, Key: "expression", Value: e.src, Msg: r.ee.err.Error()}
	}
	return v
}

func (r *runner) body(o stages.Submitter, fr *frame, ops []*op) {
	for _, op := range ops {
		if r.err != nil {
			return
		}
		if op.cond != nil && r.eval(op.cond, fr, op.line) == 0 {
			continue
		}
		switch op.kind {
		case opAlloc:
			r.alloc(o, fr, op)
		case opTask:
			t := op.task[0]
			if len(op.task) > 1 {
				t = op.task[fr.vals[fr.b.vslot]]
			}
			r.submit(o, fr, t, op.line)
		case opScope:
			o.ScopeBegin(op.mode)
			r.body(o, fr, op.body)
			o.ScopeEnd()
		case opLoop:
			// An id inside a loop collects the tasks of every iteration of
			// this run of the loop: "id" is the latest, "id*" all of them.
			for _, l := range op.loopLabels {
				fr.labels[l] = fr.labels[l][:0]
			}
			from, to, step := r.eval(op.from, fr, op.line), r.eval(op.to, fr, op.line), int64(1)
			if op.step != nil {
				if step = r.eval(op.step, fr, op.line); step <= 0 && r.err == nil {
					r.failAt(op.line, "loop.step", op.step.src, "loop step %d (want a positive step)", step)
				}
			}
			for v := from; v < to && r.err == nil; {
				fr.vals[op.loopSlot] = v
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
		case opRead:
			if tr, ok := o.(TensorReader); ok {
				tr.ReadTensor(stages.RootID(op.readRoot), r.m.entry[op.readRoot].value)
			}
		}
	}
}

func (r *runner) shape(fr *frame, it *allocItem, line int) []int64 {
	if it.cshape != nil {
		return it.cshape
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

func (r *runner) alloc(o stages.Submitter, fr *frame, op *op) {
	r.specs = r.specs[:0]
	for i := range op.allocs {
		it := &op.allocs[i]
		r.specs = append(r.specs, stages.RootSpec{Name: it.name, DType: it.dtype, Shape: r.shape(fr, it, op.line), ManualDep: it.mdep})
	}
	if r.err != nil {
		return
	}
	_, first := o.Alloc(r.specs)
	for i := range op.allocs {
		it := &op.allocs[i]
		if it.cshape != nil {
			v := it.tmpl
			v.Root = first + stages.RootID(i)
			fr.tens[it.slot] = v
		} else {
			fr.tens[it.slot] = stages.NewView(first+stages.RootID(i), 0, it.dtype, r.specs[i].Shape...)
		}
	}
}

// view evaluates a view against a frame: a base, then row index or slice,
// offset and reshape; the result must stay inside the base view.
func (r *runner) view(fr *frame, v *viewExpr, out *stages.View) bool {
	var base *stages.View
	switch v.kind {
	case baseSlot:
		if v.list != nil {
			i := r.eval(v.lindex, fr, v.line)
			if i < 0 || i >= int64(len(v.list)) {
				if r.err == nil {
					r.failAt(v.line, "view", v.src, "view %q: element %d of a tensor list of %d", shorten(v.src), i, len(v.list))
				}
				return false
			}
			base = &fr.tens[v.list[i]]
			break
		}
		base = &fr.tens[v.idx]
	case baseEntry:
		base = &r.m.entryViews[v.idx]
	case baseTArg:
		base = &fr.targ[v.idx]
	}
	*out = *base
	if v.index == nil && v.start == nil && v.at == nil && v.as == nil {
		return true
	}
	if v.index != nil || v.start != nil {
		if base.NDims == 0 {
			r.failAt(v.line, "view", v.src, "view %q: cannot index a rank-0 tensor", v.src)
			return false
		}
		var start, count int64
		if v.index != nil {
			start, count = r.eval(v.index, fr, v.line), 1
		} else {
			start, count = r.eval(v.start, fr, v.line), r.eval(v.count, fr, v.line)
		}
		if start < 0 || count <= 0 || start > base.Shape[0] || count > base.Shape[0]-start {
			r.failAt(v.line, "view", v.src, "view %q outside its root: rows [%d, %d) of a tensor with %d rows", shorten(v.src), start, start+count, base.Shape[0])
			return false
		}
		out.Offset += start * base.Strides[0]
		if v.index != nil {
			if base.NDims == 1 {
				out.Shape[0] = 1
			} else {
				copy(out.Shape[:], base.Shape[1:base.NDims])
				copy(out.Strides[:], base.Strides[1:base.NDims])
				out.NDims--
				out.Shape[out.NDims] = 0
				out.Strides[out.NDims] = 0
			}
		} else {
			out.Shape[0] = count
		}
	}
	if v.at != nil {
		at := r.eval(v.at, fr, v.line)
		var ok bool
		if out.Offset, ok = addOK(out.Offset, at); !ok {
			r.failAt(v.line, "view", v.src, "view %q outside its root: offset %d from a base covering [%d, %d)", shorten(v.src), at, base.Offset, base.End())
			return false
		}
	}
	if v.as != nil {
		var shape [stages.MaxDims]int64
		for i, d := range v.as {
			if shape[i] = r.eval(d, fr, v.line); shape[i] <= 0 {
				r.failAt(v.line, "view", v.src, "view %q: dimension %d is %d (want a positive size)", shorten(v.src), i, shape[i])
				return false
			}
		}
		if !shapeOK(shape[:len(v.as)], out.DType) {
			// A copy, so that shape stays on the stack on the good path.
			r.failAt(v.line, "view", v.src, "view %q: the shape %v overflows int64 bytes", shorten(v.src), append([]int64(nil), shape[:len(v.as)]...))
			return false
		}
		*out = stages.NewView(out.Root, out.Offset, out.DType, shape[:len(v.as)]...)
	}
	if _, ok := addOK(out.Offset, out.Elems()); !ok || out.Offset < base.Offset || out.End() > base.End() {
		r.failAt(v.line, "view", v.src, "view %q outside its root: elements [%d, %d) of a base covering [%d, %d)", shorten(v.src), out.Offset, out.End(), base.Offset, base.End())
		return false
	}
	return true
}

func (r *runner) submit(o stages.Submitter, fr *frame, t *taskOp, line int) {
	tk := &r.task
	tk.Kind, tk.Kernel, tk.BlockNum = t.kind, t.kernel, t.bn
	tk.Line = int32(line)
	if t.klist != nil {
		i := r.eval(t.kindex, fr, line)
		if i < 0 || i >= int64(len(t.klist)) {
			if r.err == nil {
				r.failAt(line, "k", t.kindex.src, "kernel %d of a list of %d (%s...)", i, len(t.klist), t.name)
			}
			return
		}
		tk.Kernel = t.klist[i]
	}
	tk.Args, tk.Scalars, tk.Deps = tk.Args[:0], tk.Scalars[:0], tk.Deps[:0]
	tk.Pred = stages.Predicate{}
	for i := range t.args {
		a := &t.args[i]
		tk.Args = append(tk.Args, stages.Arg{Tag: a.tag})
		arg := &tk.Args[len(tk.Args)-1]
		if a.out != nil {
			arg.View = stages.NewView(0, 0, a.out.dtype, r.shape(fr, a.out, line)...)
		} else if !r.view(fr, a.view, &arg.View) {
			return
		}
	}
	for _, e := range t.scalars {
		if e.bscal >= 0 {
			tk.Scalars = append(tk.Scalars, fr.scal[e.bscal])
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
		if len(p.idx) != int(pv.View.NDims) {
			r.fail(line, "predicate on %s: %d indices for a tensor of rank %d", p.view.src, len(p.idx), pv.View.NDims)
			return
		}
		var off int64
		for i, e := range p.idx {
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
	if t.hasOut {
		for i := range t.args {
			if t.args[i].out != nil {
				tk.Args[i].View.Root = -1
			}
		}
		if rc, ok := o.(rootCounter); ok {
			first = rc.NumRoots()
		}
	}
	id := o.Submit(tk)
	if t.label >= 0 {
		fr.labels[t.label] = append(fr.labels[t.label], id)
	}
	if t.store != nil {
		r.tbuf = append(r.tbuf[:0], id)
		r.store(fr, t.store, r.tbuf, line)
	}
	if t.hasOut {
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
			fr.tens[a.out.slot] = v
			n++
		}
	}
}

// prepare evaluates a call's params and tensor args into the callee frame.
// While an auto block's boundary is computed (ahead of its body), tensor
// args the block allocates itself do not exist yet and are skipped.
func (r *runner) prepare(caller, cf *frame, c *callOp, ahead bool) {
	for i, e := range c.params {
		cf.vals[i] = r.eval(e, caller, c.line)
	}
	if cf.b.vslot >= 0 {
		cf.vals[cf.b.vslot] = int64(c.variant)
	}
	for i, v := range c.targs {
		if ahead && v.local {
			continue
		}
		r.view(caller, v, &cf.targ[i])
	}
	for i, s := range cf.b.scalars {
		cf.vals[cf.b.sbase+i] = r.eval(s.value, cf, s.line)
		cf.bsc[i] = uint64(cf.vals[cf.b.sbase+i])
	}
	if ahead {
		return // the tasks a call waits on do not change a boundary
	}
	for i, refs := range c.tasks {
		seq := cf.tp[i][:0]
		for _, ref := range refs {
			var ok bool
			if seq, ok = r.taskSeq(seq, caller, ref, c.line); !ok {
				return
			}
		}
		cf.tp[i] = seq
	}
}

// boundary evaluates the callee's boundary slots (after prepare). Slots in
// skip (tensors an auto block allocates itself, not yet allocated while its
// boundary is computed) are left alone.
func (r *runner) boundary(cf *frame, skip []bool) {
	for s, b := range cf.b.bound {
		if skip != nil && skip[s] {
			continue
		}
		cf.bargs[s].Tag = b.tag
		if !r.view(cf, b.view, &cf.bargs[s].View) {
			return
		}
		v := &cf.bargs[s].View
		if b.dtype != stages.DTypeInvalid && v.DType != b.dtype {
			r.fail(b.line, "boundary slot %s of %s: dtype %s, want %s", b.name, cf.b.name, v.DType, b.dtype)
			return
		}
		if b.shape != nil && !sameShape(v.ShapeSlice(), b.shape) {
			r.fail(b.line, "boundary slot %s of %s: shape %v, want %v", b.name, cf.b.name, v.ShapeSlice(), b.shape)
			return
		}
	}
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (r *runner) call(o stages.Submitter, caller *frame, c *callOp) {
	cb := c.callee
	g := r.f.graph[cb.idx]
	asGraph := g != nil && !caller.inGraph
	cf := r.frame(cb)
	r.prepare(caller, cf, c, false)
	var args []stages.Arg
	var scal []uint64
	var autoT, autoS [][]int32
	switch {
	case cb.auto && (asGraph || caller.inGraph):
		args, scal, autoT, autoS = r.autoBoundary(cf)
	case cb.auto:
		// An auto block run on the ordinary path needs no boundary of its
		// own: its calls evaluate theirs, as they would at the top level.
	default:
		r.boundary(cf, nil)
		args, scal = cf.bargs, cf.bsc
	}
	if r.err != nil {
		return
	}
	// Inside an auto block, the callee's boundary comes from the block's own
	// boundary (so that a recording sees boundary views and patchable
	// scalars, never the caller's tensors or baked values).
	if caller.bnd != nil && caller.autoT != nil {
		for s, m := range caller.autoT[c.index] {
			if m >= 0 {
				args[s].View = caller.bnd.Tensors[m].View
			}
		}
	}
	if !asGraph {
		if cap(cf.ibScal) < len(scal) {
			cf.ibScal = make([]stages.Scalar, len(scal))
		}
		cf.ib = stages.Boundary{Tensors: args, Scalars: cf.ibScal[:len(scal)]}
		bnd := &cf.ib
		for i, v := range scal {
			bnd.Scalars[i] = stages.Static(v)
			if caller.bnd != nil && caller.autoS != nil {
				if m := caller.autoS[c.index][i]; m >= 0 {
					bnd.Scalars[i] = caller.bnd.Scalars[m]
				}
			}
		}
		r.runBody(o, cf, bnd, caller.inGraph, autoT, autoS)
		return
	}
	// The frame's GraphCall is reused call after call: the runtime reads it
	// only during o.Graph, and keeps the body past it through Detach, which
	// copies the environment. A replay allocates nothing here.
	if cf.gcall.Body == nil {
		r.graphBody(cf)
	}
	gc := &cf.gcall
	gc.Key = r.key(g, cf)
	gc.KeyComplete = g.complete
	gc.Boundary, gc.Scalars = args, scal
	gc.Config = gc.Config[:0]
	for _, s := range g.config {
		gc.Config = append(gc.Config, uint64(cf.vals[s]))
	}
	// The tasks the body may wait on are the call's task params, in order:
	// a replay takes them from here.
	gc.ExtDeps = gc.ExtDeps[:0]
	for _, seq := range cf.tp {
		gc.ExtDeps = append(gc.ExtDeps, seq...)
	}
	cf.gAutoT, cf.gAutoS = autoT, autoS
	o.Graph(gc)
	cf.gAutoT, cf.gAutoS = nil, nil
}

// graphBody makes the frame's Graph body and its Detach, once per frame.
// Body reads the frame's current environment, so it is valid during the
// call; Detach snapshots it for a recorder that runs the body later.
func (r *runner) graphBody(cf *frame) {
	m, cb := r.m, cf.b
	// The form is read when the body runs (Body) or is detached (Detach),
	// not when the closures are made: a pooled runner serves every form.
	run := func(f *form, key string, vals []int64, targ []stages.View, tp [][]stages.TaskID, autoT, autoS [][]int32, bo stages.Submitter, b *stages.Boundary) error {
		br := m.newRunner(f)
		bf := newFrame(cb)
		copy(bf.vals, vals)
		copy(bf.targ, targ)
		copy(bf.tp, tp)
		br.runBody(bo, bf, b, true, autoT, autoS)
		if br.err != nil {
			return &BodyError{Key: key, Err: br.err}
		}
		return nil
	}
	cf.gcall.Body = func(bo stages.Submitter, b *stages.Boundary) error {
		err := run(r.f, cf.gcall.Key, cf.vals, cf.targ, cf.tp, cf.gAutoT, cf.gAutoS, bo, b)
		if be, ok := err.(*BodyError); ok && r.err == nil {
			// Run inline, during Run: the run fails with the body's error
			// whatever the Submitter does with it.
			r.err = be.Err
		}
		return err
	}
	cf.gcall.Detach = func() stages.BodyFunc {
		f, key := r.f, cf.gcall.Key
		vals := append([]int64(nil), cf.vals...)
		targ := append([]stages.View(nil), cf.targ...)
		tp := make([][]stages.TaskID, len(cf.tp))
		for i := range cf.tp {
			tp[i] = append([]stages.TaskID(nil), cf.tp[i]...)
		}
		autoT, autoS := clone2(cf.gAutoT), clone2(cf.gAutoS)
		return func(bo stages.Submitter, b *stages.Boundary) error {
			return run(f, key, vals, targ, tp, autoT, autoS, bo, b)
		}
	}
}

// BodyError is the error of a Graph body that fails (a view outside its
// root, say), naming the call's key.
type BodyError struct {
	Key string
	Err error
}

func (e *BodyError) Error() string { return fmt.Sprintf("graph %s: %v", e.Key, e.Err) }
func (e *BodyError) Unwrap() error { return e.Err }

func clone2(s [][]int32) [][]int32 {
	if s == nil {
		return nil
	}
	out := make([][]int32, len(s))
	for i := range s {
		out[i] = append([]int32(nil), s[i]...)
	}
	return out
}

// runBody runs a block body against its boundary.
func (r *runner) runBody(o stages.Submitter, cf *frame, b *stages.Boundary, inGraph bool, autoT, autoS [][]int32) {
	cb := cf.b
	if cb.auto {
		copy(cf.tens, cf.targ)
	} else {
		for s := range cb.bound {
			cf.tens[s] = b.Tensors[s].View
		}
	}
	copy(cf.scal, b.Scalars)
	cf.inGraph = inGraph
	cf.bnd, cf.autoT, cf.autoS = nil, nil, nil
	if cb.auto {
		cf.bnd, cf.autoT, cf.autoS = b, autoT, autoS
	}
	cf.resetLabels()
	r.body(o, cf, cb.body)
	cf.bnd, cf.autoT, cf.autoS = nil, nil, nil
}

// autoBoundary computes an auto block's boundary: the boundaries of its
// calls, minus tensors the block allocates itself, deduplicated (same root,
// offset, layout and tag); the scalars likewise by name and value.
func (r *runner) autoBoundary(af *frame) ([]stages.Arg, []uint64, [][]int32, [][]int32) {
	args, scal, sname := af.aArgs[:0], af.aScal[:0], af.aName[:0]
	if af.aT == nil {
		af.aT = make([][]int32, len(af.b.calls))
		af.aS = make([][]int32, len(af.b.calls))
		for ci, c := range af.b.calls {
			af.aT[ci] = make([]int32, len(c.callee.bound))
			af.aS[ci] = make([]int32, len(c.callee.scalars))
		}
	}
	autoT, autoS := af.aT, af.aS
	if af.aHead == nil {
		af.aHead = map[stages.RootID]int32{}
	}
	clear(af.aHead)
	next := af.aNext[:0]
	defer func() { af.aArgs, af.aScal, af.aName, af.aNext = args, scal, sname, next }()
	copy(af.tens, af.targ)
	for ci, c := range af.b.calls {
		cf := r.frame(c.callee)
		r.prepare(af, cf, c, true)
		r.boundary(cf, c.localSlot)
		if r.err != nil {
			return nil, nil, nil, nil
		}
		for s := range c.callee.bound {
			autoT[ci][s] = -1
			if c.localSlot[s] {
				continue
			}
			a := &cf.bargs[s]
			head, ok := af.aHead[a.View.Root]
			if !ok {
				head = -1
			}
			idx := head
			for idx >= 0 && args[idx] != *a {
				idx = next[idx]
			}
			if idx < 0 {
				idx = int32(len(args))
				args = append(args, *a)
				next = append(next, head)
				af.aHead[a.View.Root] = idx
			}
			autoT[ci][s] = idx
		}
		for i, s := range c.callee.scalars {
			idx := -1
			for j := range scal {
				if sname[j] == s.name && scal[j] == cf.bsc[i] {
					idx = j
				}
			}
			if idx < 0 {
				idx = len(scal)
				scal = append(scal, cf.bsc[i])
				sname = append(sname, s.name)
			}
			autoS[ci][i] = int32(idx)
		}
	}
	// The same view may be a slot twice, with different tags: upstream's pair
	// boundary (118 tensors) has the running hidden state as input (CSA
	// attention) and as inout (HCA MoE). The body writes it, so an input twin
	// would hide that write from the caller (the input-written defect): every
	// twin of a written view is tagged inout, and the width stays upstream's.
	if af.aWr == nil {
		af.aWr = map[stages.View]bool{}
	}
	clear(af.aWr)
	for i := range args {
		if args[i].Tag.Writes() {
			af.aWr[args[i].View] = true
		}
	}
	for i := range args {
		if args[i].Tag == stages.TagInput && af.aWr[args[i].View] {
			args[i].Tag = stages.TagInOut
		}
	}
	return args, scal, autoT, autoS
}

// key builds a Graph call's key: the form's key text with {param}s filled in
// (a variant by its name).
func (r *runner) key(g *graphSpec, cf *frame) string {
	if len(g.parts) == 1 && g.parts[0].slot < 0 {
		return g.parts[0].lit
	}
	b := cf.keyBuf[:0]
	for _, p := range g.parts {
		if p.slot < 0 {
			b = append(b, p.lit...)
		} else if p.slot == cf.b.vslot {
			b = append(b, cf.b.variants[cf.vals[p.slot]]...)
		} else {
			b = strconv.AppendInt(b, cf.vals[p.slot], 10)
		}
	}
	cf.keyBuf = b
	if string(b) == cf.gcall.Key { // the same key as the last call: no new string
		return cf.gcall.Key
	}
	return string(b)
}
