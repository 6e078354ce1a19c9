package config

import "github.com/hbg-dev/hbg/stages"

// view evaluates a view against a frame: a base, then row index or slice,
// offset and reshape; the result must stay inside the base view.
func (r *runner) view(fr *frame, v *viewExpr, out *stages.View) bool {
	var base *stages.View
	switch v.kind {
	case baseSlot:
		if v.list != nil {
			i := r.eval(v.listIndex, fr, v.line)
			if i < 0 || i >= int64(len(v.list)) {
				if r.err == nil && v.entryList {
					r.failAt(v.line, "view", v.src, "tensor(%d): the model has %d entry tensors", i, len(v.list))
				} else if r.err == nil {
					r.failAt(v.line, "view", v.src, "element %d of a tensor list of %d", i, len(v.list))
				}
				return false
			}
			base = &fr.tensors[v.list[i]]
			break
		}
		base = &fr.tensors[v.base]
	case baseEntry:
		base = &r.model.entryViews[v.base]
	case baseTArg:
		base = &fr.tensorArgs[v.base]
	}
	*out = *base
	if v.index == nil && v.start == nil && v.at == nil && v.as == nil && v.dims == nil {
		if v.manualDep {
			out.ManualDep = true
		}
		return true
	}
	if v.dims != nil && !r.sliceDims(fr, v, base, out) {
		return false
	}
	if v.index != nil || v.start != nil {
		if base.NDims == 0 {
			r.failAt(v.line, "view", v.src, "cannot index a rank-0 tensor")
			return false
		}
		var start, count int64
		if v.index != nil {
			start, count = r.eval(v.index, fr, v.line), 1
		} else {
			start, count = r.eval(v.start, fr, v.line), r.eval(v.count, fr, v.line)
		}
		if start < 0 || count <= 0 || start > base.Shape[0] || count > base.Shape[0]-start {
			r.failAt(v.line, "view", v.src, "outside its root: rows [%d, %d) of a tensor with %d rows", start, start+count, base.Shape[0])
			return false
		}
		out.Offset += start * base.Strides[0]
		takeRows(out, base, v.index != nil, count)
	}
	if v.at != nil {
		at := r.eval(v.at, fr, v.line)
		var ok bool
		if out.Offset, ok = addOK(out.Offset, at); !ok {
			r.failAt(v.line, "view", v.src, "outside its root: offset %d from a base covering [%d, %d)", at, base.Offset, base.End())
			return false
		}
	}
	if v.as != nil {
		if !out.Contiguous() {
			r.failAt(v.line, "view", v.src, "a reshape of a strided view (strides %v): reshape the tensor it tiles, then slice", out.Strides[:out.NDims])
			return false
		}
		var shape [stages.MaxDims]int64
		for i, d := range v.as {
			if shape[i] = r.eval(d, fr, v.line); shape[i] <= 0 {
				r.failAt(v.line, "view", v.src, "dimension %d is %d (want a positive size)", i, shape[i])
				return false
			}
		}
		if !shapeOK(shape[:len(v.as)], out.DType) {
			// A copy, so that shape stays on the stack on the good path.
			r.failAt(v.line, "view", v.src, "the shape %v overflows int64 bytes", append([]int64(nil), shape[:len(v.as)]...))
			return false
		}
		*out = stages.NewView(out.Root, out.Offset, out.DType, shape[:len(v.as)]...)
	}
	// A derived view is manual_dep only where it says so: upstream's view()
	// and reshape() set the flag from their own argument.
	out.ManualDep = v.manualDep
	// Each view's elements are counted once: this check runs for every
	// boundary slot of every Graph call. A strided view (or base) spans
	// more than its elements: the bound is the span.
	span, bspan := out.Elems(), base.Elems()
	if v.dims != nil || !base.Contiguous() {
		span, bspan = out.Span(), base.Span()
	}
	if end, ok := addOK(out.Offset, span); !ok || out.Offset < base.Offset || end > base.Offset+bspan {
		r.failAt(v.line, "view", v.src, "outside its root: elements [%d, %d) of a base covering [%d, %d)", out.Offset, out.End(), base.Offset, base.End())
		return false
	}
	return true
}

// takeRows narrows out, a copy of base, to count rows of base's first
// dimension (the offset is the caller's); an index (count 1) drops that
// dimension, but a rank-1 base keeps it, one long.
func takeRows(out, base *stages.View, index bool, count int64) {
	switch {
	case !index:
		out.Shape[0] = count
	case base.NDims == 1:
		out.Shape[0] = 1
	default:
		copy(out.Shape[:], base.Shape[1:base.NDims])
		copy(out.Strides[:], base.Strides[1:base.NDims])
		out.NDims--
		out.Shape[out.NDims] = 0
		out.Strides[out.NDims] = 0
	}
}

// sliceDims applies a multi-dim slice to out, a copy of base: dim d keeps
// base's stride, its extent narrowed to count (or dropped, for an index),
// and the offset moves by start × stride. Dims past the slice stay whole.
func (r *runner) sliceDims(fr *frame, v *viewExpr, base, out *stages.View) bool {
	if len(v.dims) > int(base.NDims) {
		r.failAt(v.line, "view", v.src, "%d dims sliced of a tensor of rank %d", len(v.dims), base.NDims)
		return false
	}
	var shape, strides [stages.MaxDims]int64
	nd := 0
	off := base.Offset
	for d := 0; d < int(base.NDims); d++ {
		var s dimSel
		if d < len(v.dims) {
			s = v.dims[d]
		} else {
			s.all = true
		}
		start, count := int64(0), base.Shape[d]
		switch {
		case s.index != nil:
			start, count = r.eval(s.index, fr, v.line), 1
		case s.start != nil:
			start, count = r.eval(s.start, fr, v.line), r.eval(s.count, fr, v.line)
		}
		if r.err != nil {
			return false
		}
		if start < 0 || count <= 0 || start > base.Shape[d] || count > base.Shape[d]-start {
			r.failAt(v.line, "view", v.src, "outside its root: [%d, %d) of dim %d, which has %d", start, start+count, d, base.Shape[d])
			return false
		}
		off += start * base.Strides[d]
		if s.index == nil {
			shape[nd], strides[nd] = count, base.Strides[d]
			nd++
		}
	}
	if nd == 0 {
		// Every dim indexed: one element, as NAME[i] of a rank-1 tensor.
		shape[0], strides[0], nd = 1, 1, 1
	}
	*out = stages.View{Root: base.Root, Offset: off, DType: base.DType, NDims: uint8(nd), Shape: shape, Strides: strides}
	return true
}
