package npu

import "github.com/hbg-dev/hbg/stages"

// Data: resolving a task's arguments to memory objects, reading inputs,
// writing outputs' digests and evaluating predicates.

// rarg is a task argument resolved to a memory object.
type rarg struct {
	obj int32
	tag stages.Tag
	off int64
	n   int64 // elements, which the cost model counts
	// span is the interval [off, off+span) the argument covers: n for a
	// contiguous view, more for a strided one. A tile of a wider row-major
	// tensor (dim 0 strided, the rest contiguous) is nrun runs of run
	// elements, pitch apart: its digests and races are over those runs,
	// element for element. Other strided views count as their span whole.
	span             int64
	nrun, run, pitch int64
	esz              int64
	rows             int64 // the view's dim-0 extent (0 for rank 0), for Kernel.Touch
	cols             int64 // its last dim's extent (0 below rank 2), for Kernel.Touch
	lh               uint64
	kind             stages.Kind
}

// arg resolves argument i of task t: an image argument, or a node's tensor
// template rebound for its instance (boundary exact: the call's boundary
// tensor; boundary view: its root at offset + Delta with the template's
// layout; internal and own output: the instance's internal root).
func (s *sim) arg(t *dtask, i uint32) rarg {
	img, p := s.img, s.p
	if t.node < 0 {
		ai := img.Tasks[t.src].Args.Off + i
		a := &img.Args[ai]
		r := rarg{obj: p.rootObj[a.View.Root], tag: a.Tag, off: a.View.Offset, n: a.View.Elems(), span: a.View.Span(), esz: a.View.DType.Size(), rows: dim0(&a.View), cols: dimLast(&a.View), lh: p.lh[ai]}
		r.nrun, r.run, r.pitch = rowRuns(&a.View)
		return r
	}
	ip := &p.insts[t.inst]
	o := ip.def
	return s.ref(ip, &o.tensors[o.nodes[t.node].tensors.Off+i])
}

func (s *sim) ref(ip *instPlan, ref *devTensor) rarg {
	r := rarg{tag: ref.tag, off: ref.delta, n: ref.n, span: ref.span, esz: int64(ref.esz), rows: ref.rows, cols: ref.cols, lh: ref.lh,
		nrun: ref.nrun, run: ref.run, pitch: ref.pitch}
	switch ref.src {
	case stages.SrcBoundaryExact, stages.SrcBoundaryView:
		g := &s.img.Graphs[ip.g]
		b := &s.img.Args[g.Boundary.Off+uint32(ref.slot)].View
		r.obj = s.p.rootObj[b.Root]
		r.off = b.Offset
		if ref.src == stages.SrcBoundaryView {
			r.off += ref.delta
		}
	default:
		r.obj = ip.objBase + ref.slot
	}
	return r
}

// dim0 is a view's dim-0 extent, 0 for a rank-0 view.
func dim0(v *stages.View) int64 {
	if v.NDims == 0 {
		return 0
	}
	return v.Shape[0]
}

// dimLast is a view's last dim's extent, 0 below rank 2 (where the last
// dim is dim 0, which Touch.Rows already narrows).
func dimLast(v *stages.View) int64 {
	if v.NDims < 2 {
		return 0
	}
	return v.Shape[min(int(v.NDims), stages.MaxDims)-1]
}

func (s *sim) nargs(t *dtask) uint32 {
	if t.node < 0 {
		return s.img.Tasks[t.src].Args.N
	}
	return s.p.insts[t.inst].def.nodes[t.node].tensors.N
}

func (s *sim) scalarsOf(t *dtask, f func(v uint64)) {
	if t.node < 0 {
		sp := s.img.Tasks[t.src].Scalars
		for _, v := range s.img.Scalars[sp.Off : sp.Off+sp.N] {
			f(v)
		}
		return
	}
	ip := &s.p.insts[t.inst]
	def := ip.def
	sp := def.nodes[t.node].scalars
	g := &s.img.Graphs[ip.g]
	for _, sc := range def.scalars[sp.Off : sp.Off+sp.N] {
		if sc.Boundary {
			f(s.img.Scalars[g.Scalars.Off+uint32(sc.Slot)])
		} else {
			f(sc.Value)
		}
	}
}

// readInputs computes the task's input digest and touched bytes when its
// first block starts.
func (s *sim) readInputs(ti int32) {
	t := &s.tasks[ti]
	var code uint64
	switch t.kind {
	case stages.KindAIC:
		code = s.codeOf(t.kern[0])
	case stages.KindAIV:
		code = s.codeOf(t.kern[1])
	default:
		k2 := t.kern[2]
		if k2 < 0 {
			k2 = t.kern[1]
		}
		code = mix(mix(s.codeOf(t.kern[0]), s.codeOf(t.kern[1])), s.codeOf(k2))
	}
	h := mix(mix(code, uint64(t.kind)), uint64(t.bn))
	ns := uint64(0)
	fk := t.kern[0]
	if t.kind == stages.KindAIV {
		fk = t.kern[1]
	}
	if fk >= 0 && int(fk) < len(s.kfold) {
		for _, v := range s.kfold[fk] {
			h = mix(h, v)
			ns++
		}
	}
	s.scalarsOf(t, func(v uint64) { h = mix(h, v); ns++ })
	h = mix(h, ns)
	n := s.nargs(t)
	h = mix(h, uint64(n))
	var bytes int64
	hinted := s.hinted(t)
	for i := uint32(0); i < n; i++ {
		a := s.arg(t, i)
		// Only arguments tagged input feed the digest, and the declared
		// direction itself does not: the same code is declared inout at
		// one site and output_existing at another (upstream's 37
		// direction-only kernel classes), and computes the same function
		// at both. An inout's old contents are ordered by the TensorMap,
		// but an output_existing's are not, so neither is read.
		x := a.lh
		if a.tag == stages.TagInput {
			x = a.lh
			a.each(func(lo, hi int64) { x = mix(s.objs[a.obj].read(lo, hi), x) })
		}
		h = mix(mix(h, uint64(i)), x)
		// Only the bytes a kernel reads cost HBM time: an argument its
		// kernel hints (Kernel.Touch) counts only the hinted rows and
		// columns. The digest above still reads the whole view, since what
		// a kernel picks depends on its scalars, which the simulation does
		// not interpret.
		nb := a.n
		if hinted {
			r, c := s.touched(t, i)
			if r > 0 && r < a.rows {
				nb = r * (nb / a.rows)
			}
			if c > 0 && c < a.cols {
				nb = c * (nb / a.cols)
			}
		}
		bytes += nb * a.esz
	}
	t.in = h
	t.bytes = float64(bytes)
}

// hinted reports whether any of task t's kernels has a Touch hint, so
// that the tasks of the many unhinted kernels skip the per-argument lookup.
func (s *sim) hinted(t *dtask) bool {
	for _, k := range t.kern {
		if k >= 0 && int(k) < len(s.ktch) && len(s.ktch[k]) > 0 {
			return true
		}
	}
	return false
}

// touched is how many dim-0 rows and last-dim columns of argument i task
// t's kernels read, 0 for all of them. A MIX task's kernels share its
// arguments: an argument is narrowed in a dimension only when each of them
// hints that dimension, to the most any reads.
func (s *sim) touched(t *dtask, i uint32) (rows, cols int64) {
	switch t.kind {
	case stages.KindAIC:
		return s.hint(t.kern[0], i)
	case stages.KindAIV:
		return s.hint(t.kern[1], i)
	}
	first := true
	for _, k := range t.kern {
		if k < 0 {
			continue
		}
		r, c := s.hint(k, i)
		if first {
			rows, cols, first = r, c, false
		} else {
			rows, cols = widest(rows, r), widest(cols, c)
		}
	}
	return rows, cols
}

// hint is kernel k's hint for argument i: rows and columns, 0 for all. A
// count <= 0 is all; of two hints on one argument the larger counts (all
// beats any), so a doubtful table over-counts rather than under-counts.
// Kernels hint an argument or two, so a scan beats a per-argument table.
func (s *sim) hint(k stages.KernelID, i uint32) (rows, cols int64) {
	if k < 0 || int(k) >= len(s.ktch) {
		return 0, 0
	}
	first := true
	for _, h := range s.ktch[k] {
		if h.Arg != int(i) {
			continue
		}
		r, c := max(h.Rows, 0), max(h.Cols, 0)
		if first {
			rows, cols, first = r, c, false
		} else {
			rows, cols = widest(rows, r), widest(cols, c)
		}
	}
	return rows, cols
}

// widest of two counts where 0 means all.
func widest(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}

// writeOutputs writes every output's digest when the task's last block
// ends: an inout or output_existing argument's adds to what the region held
// (memObj.add), unless the task's kernel is in a declared race group (the
// digest rules in memory.go say why).
func (s *sim) writeOutputs(ti int32) {
	t := &s.tasks[ti]
	n := s.nargs(t)
	keep := s.groupOf(t) == 0
	for i := uint32(0); i < n; i++ {
		a := s.arg(t, i)
		switch {
		case a.tag != stages.TagOutput && a.tag.Writes() && keep:
			a.each(func(lo, hi int64) { s.objs[a.obj].add(lo, hi, mix(t.in, uint64(i)), ti) })
		case a.tag.Writes():
			a.each(func(lo, hi int64) { s.objs[a.obj].write(lo, hi, mix(t.in, uint64(i)), ti) })
		}
	}
}

// evalPred reads the predicate's element when the task becomes ready.
func (s *sim) evalPred(ti int32) bool {
	t := &s.tasks[ti]
	if t.node < 0 {
		pr := &s.img.Tasks[t.src].Pred
		obj := s.p.rootObj[pr.View.Root]
		return predTrue(pr.Op, s.objs[obj].elemValue(pr.View.Offset+pr.Index), pr.Target)
	}
	ip := &s.p.insts[t.inst]
	pr := &ip.def.preds[ip.def.nodes[t.node].pred]
	a := s.ref(ip, &pr.t)
	return predTrue(pr.op, s.objs[a.obj].elemValue(a.off+pr.index), pr.target)
}

// rowRuns describes a tile of a wider row-major tensor: a view whose dims
// past 0 are contiguous while dim 0's stride is wider than a row, as nrun
// runs of run elements, pitch apart. Any other view: nrun 0 (its span).
func rowRuns(v *stages.View) (nrun, run, pitch int64) {
	if v.NDims < 2 || v.Contiguous() {
		return 0, 0, 0
	}
	inner := stages.NewView(0, 0, v.DType, v.Shape[1:v.NDims]...)
	for d := 1; d < int(v.NDims); d++ {
		if v.Shape[d] > 1 && v.Strides[d] != inner.Strides[d-1] {
			return 0, 0, 0
		}
	}
	run = inner.Elems()
	if v.Strides[0] < run {
		return 0, 0, 0
	}
	return v.Shape[0], run, v.Strides[0]
}

// each calls f with each element interval the argument covers: its runs,
// or its span.
func (a *rarg) each(f func(lo, hi int64)) {
	if a.nrun == 0 {
		f(a.off, a.off+a.span)
		return
	}
	for r := int64(0); r < a.nrun; r++ {
		lo := a.off + r*a.pitch
		f(lo, lo+a.run)
	}
}
