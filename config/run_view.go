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
				if r.err == nil {
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
	if v.index == nil && v.start == nil && v.at == nil && v.as == nil {
		return true
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
	// Each view's elements are counted once: this check runs for every
	// boundary slot of every Graph call.
	if end, ok := addOK(out.Offset, out.Elems()); !ok || out.Offset < base.Offset || end > base.Offset+base.Elems() {
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
