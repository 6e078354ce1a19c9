package config

import (
	"fmt"
	"strconv"

	"github.com/hbg-dev/hbg/stages"
)

// prepare evaluates a call's params and tensor args into the callee frame.
// While an auto block's boundary is computed (ahead of its body), tensor
// args the block allocates itself do not exist yet and are skipped.
func (r *runner) prepare(caller, cf *frame, c *callOp, ahead bool) {
	// Params and scalars that are one term (nearly all) are evaluated
	// inline; r.eval takes the rest, and any term that does not fit.
	for i, e := range c.params {
		if t := &c.paramTerms[i]; t.used {
			if v, ok := t.eval(caller.env); ok {
				cf.env[i] = v
				continue
			}
		}
		cf.env[i] = r.eval(e, caller, c.line)
	}
	if cf.block.variantSlot >= 0 {
		cf.env[cf.block.variantSlot] = int64(c.variant)
	}
	for i, v := range c.tensorArgs {
		if ahead && v.local {
			continue
		}
		if v.slotPlain {
			cf.tensorArgs[i] = caller.tensors[v.base]
			continue
		}
		r.view(caller, v, &cf.tensorArgs[i])
	}
	cb := cf.block
	pass := cb.callScalars(cf.env)
	if cb.variantScalars != nil {
		// The scalars this variant does not pass: a use of one is an error
		// (runner.eval), not a silent 0.
		cf.absentEnv = 0
		for i := range cb.scalars {
			cf.absentEnv |= 1 << uint(cb.scalarBase+i)
			cf.env[cb.scalarBase+i] = 0
		}
	}
	cf.scalarVals = cf.scalarVals[:len(pass)]
	for j, i := range pass {
		s := cb.scalars[i]
		v, ok := int64(0), false
		if t := &cb.scalarTerms[i]; t.used {
			v, ok = t.eval(cf.env)
		}
		if !ok {
			v = r.eval(s.value, cf, s.line)
		}
		cf.env[cb.scalarBase+i] = v
		cf.absentEnv &^= 1 << uint(cb.scalarBase+i)
		cf.scalarVals[j] = uint64(v)
	}
	if ahead {
		return // the tasks a call waits on do not change a boundary
	}
	for i, refs := range c.tasks {
		seq := cf.taskParams[i][:0]
		for _, ref := range refs {
			var ok bool
			if seq, ok = r.taskSeq(seq, caller, ref, c.line); !ok {
				return
			}
		}
		cf.taskParams[i] = seq
	}
}

// boundary evaluates the callee's boundary slots (after prepare) into out,
// the frame's boundaryArgs or slots a BoundaryWriter lent. Slots in skip
// (tensors an auto block allocates itself, not yet allocated while its
// boundary is computed) are left alone.
func (r *runner) boundary(cf *frame, skip []bool, out []stages.Arg) {
	env, out := cf.env, out[:len(cf.block.fastBoundary)]
	// The row starts of slotRow slots are c0 + coef·env[slot], c0 and coef
	// within 32 bits: with every env value they read within 32 bits too,
	// none overflows.
	rows := true
	for _, sl := range cf.block.rowSlots {
		if y := env[sl]; y != int64(int32(y)) {
			rows = false
		}
	}
	for s := range cf.block.fastBoundary {
		if skip != nil && skip[s] {
			continue
		}
		f := &cf.block.fastBoundary[s]
		o := &out[s]
		o.Tag = f.tag
		// The commonest kinds inline; fastSlot.eval says why they hold.
		switch {
		case f.kind == slotConst:
			o.View = f.tmpl
			continue
		case f.kind == slotRow && rows:
			if y := f.row.c0 + f.row.coef*env[f.row.slot]; y >= 0 && y <= f.rowMax {
				o.View = f.tmpl
				o.View.Offset = f.base + y*f.stride0
				continue
			}
		case f.kind == slotTArg:
			if v := &cf.tensorArgs[f.targ]; f.accepts(v) {
				o.View = *v
				continue
			}
		case f.eval(env, rows, cf.tensorArgs, &o.View):
			continue
		}
		b := cf.block.boundary[s]
		if !r.view(cf, b.view, &out[s].View) {
			return
		}
		v := &out[s].View
		if b.dtype != stages.DTypeInvalid && v.DType != b.dtype {
			r.fail(b.line, "boundary slot %s of %s: dtype %s, want %s", b.name, cf.block.name, v.DType, b.dtype)
			return
		}
		if b.shape != nil && !sameShape(v.ShapeSlice(), b.shape) {
			r.fail(b.line, "boundary slot %s of %s: shape %v, want %v", b.name, cf.block.name, v.ShapeSlice(), b.shape)
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

func (r *runner) call(o *sub, caller *frame, c *callOp) {
	cb := c.callee
	g := r.form.graphs[cb.idx]
	// A Graph called inside a Graph body is a Graph too: a recording makes
	// it a child Definition the parent refers to (stages.Recorder.Graph).
	asGraph := g != nil
	if u := o.user; u != nil && g != nil {
		u.graphCall(cb.idx, caller.inGraph)
	}
	cf := r.frame(cb)
	r.prepare(caller, cf, c, false)
	if r.observe(o, caller, cf, c, asGraph) {
		defer o.observer.BlockEnd()
	}
	var args []stages.Arg
	var scal []uint64
	var tmpl *stages.BoundaryTemplate
	var locs []stages.Loc
	var byTemplate bool
	var slotOf, scalarOf [][]int32
	switch {
	case cb.auto && (asGraph || caller.inGraph):
		args, scal, slotOf, scalarOf = r.autoBoundary(cf)
	case cb.auto:
		// An auto block run on the ordinary path needs no boundary of its
		// own: its calls evaluate theirs, as they would at the top level.
	default:
		scal = cf.scalarVals
		lw := o.locs
		if byTemplate = lw != nil && asGraph; byTemplate {
			if tmpl, locs = r.callLocs(lw, caller, cf, c); tmpl != nil || r.err != nil {
				break
			}
		}
		args = cf.boundaryArgs
		if bw := o.bounds; bw != nil && asGraph {
			// Straight into the run image: the Graph call does not copy it.
			args = bw.GraphBoundary(len(cb.boundary))
		}
		r.boundary(cf, nil, args)
	}
	if r.err != nil {
		return
	}
	// Inside an auto block, the callee's boundary comes from the block's own
	// boundary (so that a recording sees boundary views and patchable
	// scalars, never the caller's tensors or baked values).
	if tmpl == nil && caller.ownBoundary != nil && caller.ownSlotOf != nil {
		for s, m := range caller.ownSlotOf[c.index] {
			if m >= 0 {
				args[s].View = caller.ownBoundary.Tensors[m].View
			}
		}
	}
	if byTemplate && tmpl == nil {
		r.learnTemplate(caller, cf, c, args)
	}
	if !asGraph {
		if cap(cf.inlineScalars) < len(scal) {
			cf.inlineScalars = make([]stages.Scalar, len(scal))
		}
		cf.inlineBoundary = stages.Boundary{Tensors: args, Scalars: cf.inlineScalars[:len(scal)]}
		ib := &cf.inlineBoundary
		for i, v := range scal {
			ib.Scalars[i] = stages.Static(v)
			if caller.ownBoundary != nil && caller.ownScalarOf != nil {
				if m := caller.ownScalarOf[c.index][i]; m >= 0 {
					ib.Scalars[i] = caller.ownBoundary.Scalars[m]
				}
			}
		}
		r.runBody(o, cf, ib, caller.inGraph, slotOf, scalarOf)
		return
	}
	// The frame's GraphCall is reused call after call: the runtime reads it
	// only during o.Graph, and keeps the body past it through Detach, which
	// copies the environment. A replay allocates nothing here.
	if cf.graphCall.Body == nil {
		r.graphBody(cf)
	}
	gc := &cf.graphCall
	gc.Key = r.key(g, cf)
	gc.KeyComplete = g.complete
	gc.Boundary, gc.Scalars = args, scal
	gc.Template, gc.Locs = tmpl, locs
	gc.ScalarSrc = gc.ScalarSrc[:0]
	if caller.ownBoundary != nil && caller.ownScalarOf != nil {
		// Inside a Graph body: each scalar the body's own boundary passes
		// keeps its slot, so a recording binds it to the parent's patched
		// slot, not to the value it had when recorded.
		for i := range scal {
			src := int32(-1)
			if m := caller.ownScalarOf[c.index][i]; m >= 0 {
				src = caller.ownBoundary.Scalars[m].Src
			}
			gc.ScalarSrc = append(gc.ScalarSrc, src)
		}
	}
	gc.Config = gc.Config[:0]
	for _, s := range g.config {
		gc.Config = append(gc.Config, uint64(cf.env[s]))
	}
	// The tasks the body may wait on are the call's task params, in order:
	// a replay takes them from here.
	gc.ExtDeps = gc.ExtDeps[:0]
	for _, seq := range cf.taskParams {
		gc.ExtDeps = append(gc.ExtDeps, seq...)
	}
	cf.graphSlotOf, cf.graphScalarOf = slotOf, scalarOf
	o.Graph(gc)
	cf.graphSlotOf, cf.graphScalarOf = nil, nil
	if len(r.hostData) > 0 {
		// Whatever slot the body writes, however tagged: the host knows
		// none of those values now.
		for i := range gc.Boundary {
			delete(r.hostData, gc.Boundary[i].View.Root)
		}
		for i := range gc.Locs {
			delete(r.hostData, gc.Locs[i].Root)
		}
	}
}

// graphBody makes the frame's Graph body and its Detach, once per frame.
// Body reads the frame's current environment, so it is valid during the
// call; Detach snapshots it for a recorder that runs the body later.
func (r *runner) graphBody(cf *frame) {
	m, cb := r.model, cf.block
	// The form is read when the body runs (Body) or is detached (Detach),
	// not when the closures are made: a pooled runner serves every form.
	run := func(f *form, key string, env []int64, tensorArgs []stages.View, taskParams [][]stages.TaskID, slotOf, scalarOf [][]int32, did *cost, bo stages.Submitter, b *stages.Boundary) error {
		br := m.newRunner(f)
		if did != nil {
			br.did = did
		}
		bf := newFrame(cb)
		copy(bf.env, env)
		copy(bf.tensorArgs, tensorArgs)
		copy(bf.taskParams, taskParams)
		br.runBody(subOf(bo), bf, b, true, slotOf, scalarOf)
		if br.err != nil {
			return &BodyError{Key: key, Err: br.err}
		}
		return nil
	}
	cf.graphCall.Body = func(bo stages.Submitter, b *stages.Boundary) error {
		// Run during the call: what the body does is the caller's run's.
		err := run(r.form, cf.graphCall.Key, cf.env, cf.tensorArgs, cf.taskParams, cf.graphSlotOf, cf.graphScalarOf, r.did, bo, b)
		if be, ok := err.(*BodyError); ok && r.err == nil {
			// Run inline, during Run: the run fails with the body's error
			// whatever the Submitter does with it.
			r.err = be.Err
		}
		return err
	}
	cf.graphCall.Detach = func() stages.BodyFunc {
		f, key := r.form, cf.graphCall.Key
		env := append([]int64(nil), cf.env...)
		tensorArgs := append([]stages.View(nil), cf.tensorArgs...)
		taskParams := make([][]stages.TaskID, len(cf.taskParams))
		for i := range cf.taskParams {
			taskParams[i] = append([]stages.TaskID(nil), cf.taskParams[i]...)
		}
		slotOf, scalarOf := clone2(cf.graphSlotOf), clone2(cf.graphScalarOf)
		return func(bo stages.Submitter, b *stages.Boundary) error {
			return run(f, key, env, tensorArgs, taskParams, slotOf, scalarOf, nil, bo, b)
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
func (r *runner) runBody(o *sub, cf *frame, b *stages.Boundary, inGraph bool, slotOf, scalarOf [][]int32) {
	cb := cf.block
	if cb.auto {
		copy(cf.tensors, cf.tensorArgs)
	} else {
		for s := range cb.boundary {
			cf.tensors[s] = b.Tensors[s].View
		}
	}
	if cb.variantScalars == nil {
		copy(cf.scalars, b.Scalars)
	} else {
		// A Graph body's frame is new (graphBody), so the variant's
		// absent scalars are marked here too.
		cf.absentEnv = 0
		for i := range cb.scalars {
			cf.absentEnv |= 1 << uint(cb.scalarBase+i)
		}
		for j, i := range cb.callScalars(cf.env) {
			cf.scalars[i] = b.Scalars[j]
			cf.absentEnv &^= 1 << uint(cb.scalarBase+i)
		}
	}
	cf.inGraph = inGraph
	cf.ownBoundary, cf.ownSlotOf, cf.ownScalarOf = nil, nil, nil
	if cb.auto {
		cf.ownBoundary, cf.ownSlotOf, cf.ownScalarOf = b, slotOf, scalarOf
	}
	cf.resetTasks()
	r.body(o, cf, cb.body)
	cf.ownBoundary, cf.ownSlotOf, cf.ownScalarOf = nil, nil, nil
}

// key builds a Graph call's key: the form's key text with {param}s filled in
// (a variant by its name).
func (r *runner) key(g *graphSpec, cf *frame) string {
	if len(g.parts) == 1 && g.parts[0].slot < 0 {
		return g.parts[0].lit
	}
	// The same params as the frame's last call of this spec: the same key.
	if cf.keyOf == g {
		j, same := 0, true
		for _, p := range g.parts {
			if p.slot >= 0 {
				if cf.keyVals[j] != cf.env[p.slot] {
					same = false
					break
				}
				j++
			}
		}
		if same {
			return cf.lastKey
		}
	}
	b, vals := cf.keyBuf[:0], cf.keyVals[:0]
	for _, p := range g.parts {
		if p.slot < 0 {
			b = append(b, p.lit...)
			continue
		}
		vals = append(vals, cf.env[p.slot])
		if p.slot == cf.block.variantSlot {
			b = append(b, cf.block.variants[cf.env[p.slot]]...)
		} else {
			b = strconv.AppendInt(b, cf.env[p.slot], 10)
		}
	}
	cf.keyBuf, cf.keyVals = b, vals
	// The keys a frame makes repeat pass after pass (a variant, a routing
	// choice): kept, up to a bound, so a warm pass allocates none.
	k, ok := cf.keys[string(b)]
	if !ok {
		k = string(b)
		if len(cf.keys) < maxFrameKeys {
			if cf.keys == nil {
				cf.keys = map[string]string{}
			}
			cf.keys[k] = k
		}
	}
	cf.keyOf, cf.lastKey = g, k
	return k
}

// maxFrameKeys bounds the keys a frame keeps (a key interpolating a layer
// number, say, takes a new value every call).
const maxFrameKeys = 64

// graphUser is a Submitter that learns which of the form's Graph blocks a
// run called, and where (Validate's counter).
type graphUser interface {
	graphCall(block int, inGraph bool)
}
