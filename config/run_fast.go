package config

import "github.com/hbg-dev/hbg/stages"

// slotKind says how runner.boundary evaluates a boundary slot before (or
// instead of) the general path.
type slotKind uint8

const (
	slotGeneral slotKind = iota // runner.view and the slot's checks
	slotConst                   // the same view every call: tmpl
	slotRow                     // tmpl at row c0 + coef·env[slot] of an entry tensor
	slotView                    // viewFast.eval
	slotTArg                    // a tensor param as it is, its dtype and shape checked
)

// fastSlot is a boundary slot's fast form, kept by value in a slice beside
// block.boundary so that a call reads them in order. Every form only
// accepts: when it cannot vouch for the result, the general path evaluates
// the slot and says what is wrong, exactly as it would have.
type fastSlot struct {
	kind slotKind
	tag  stages.Tag
	// slotTArg: tensor param targ is accepted when its dtype is dtype (or
	// dtype is invalid) and, with ndims >= 0, its shape is shape, dims past
	// ndims zero.
	ndims int8
	dtype stages.DType
	targ  int32
	viewFast
	shape [stages.MaxDims]int64
}

// fastSlot compiles boundary slot s's fast form: for a view over an entry
// tensor whose dtype and shape are the declared ones whatever the call
// (runner.boundary then checks neither), or a tensor param as it is.
func (l *loader) fastSlot(s *boundSlot) fastSlot {
	fs := fastSlot{tag: s.tag, targ: -1, dtype: s.dtype, ndims: -1}
	v := s.view
	if ev := l.m.entryViews; v.kind == baseEntry && v.base < len(ev) {
		f, ok := compileFast(v, ev[v.base])
		if !ok || s.dtype != stages.DTypeInvalid && f.tmpl.DType != s.dtype || s.shape != nil && !sameShape(f.tmpl.ShapeSlice(), s.shape) {
			return fs
		}
		fs.viewFast, fs.kind = f, slotView
		switch {
		case (!f.row.used || f.row.slot < 0) && (!f.at.used || f.at.slot < 0):
			// No env in it: the same view every call, or the same error.
			var out stages.View
			if f.eval(nil, &out) {
				fs.kind, fs.tmpl = slotConst, out
			} else {
				fs.kind = slotGeneral
			}
		case f.row.used && f.row.slot >= 0 && !f.at.used && f.row.c0 == int64(int32(f.row.c0)) && f.rowImpliesBounds(ev[v.base]):
			fs.kind = slotRow
		}
		return fs
	}
	if v.kind == baseTArg && v.plain() && len(s.shape) <= stages.MaxDims {
		fs.kind, fs.targ = slotTArg, int32(v.base)
		if s.shape != nil {
			fs.ndims = int8(len(s.shape))
			copy(fs.shape[:], s.shape)
		}
	}
	return fs
}

// rowImpliesBounds reports whether every valid row start keeps the result
// inside its base, so that a slotRow slot checks the row start alone.
func (f *viewFast) rowImpliesBounds(base stages.View) bool {
	if f.stride0 < 0 {
		return false
	}
	last, ok := mulOK(f.rowMax, f.stride0)
	if !ok {
		return false
	}
	end, ok := addOK(last, f.tmpl.Elems())
	return ok && end <= base.Elems()
}

// eval writes the slot's view into out, or reports false when the general
// path must decide. rows says that every env value the block's slotRow
// slots read fits 32 bits (runner.boundary checks it once per call).
func (fs *fastSlot) eval(env []int64, rows bool, targs []stages.View, out *stages.View) bool {
	switch fs.kind {
	case slotConst:
		*out = fs.tmpl
		return true
	case slotRow:
		if !rows {
			return fs.viewFast.eval(env, out)
		}
		s := fs.row.c0 + fs.row.coef*env[fs.row.slot]
		if s < 0 || s > fs.rowMax {
			return false
		}
		*out = fs.tmpl
		out.Offset = fs.base + s*fs.stride0
		return true
	case slotView:
		return fs.viewFast.eval(env, out)
	case slotTArg:
		if v := &targs[fs.targ]; fs.accepts(v) {
			*out = *v
			return true
		}
	}
	return false
}

// accepts compares the dims one by one: it must change with MaxDims.
var _ = [1]struct{}{}[stages.MaxDims-5]

// accepts reports whether a slotTArg slot takes tensor param v as it is.
func (fs *fastSlot) accepts(v *stages.View) bool {
	if fs.dtype != stages.DTypeInvalid && v.DType != fs.dtype {
		return false
	}
	if fs.ndims < 0 {
		return true
	}
	// Element by element: an array == is a call to memequal.
	return int8(v.NDims) == fs.ndims && v.Shape[0] == fs.shape[0] && v.Shape[1] == fs.shape[1] &&
		v.Shape[2] == fs.shape[2] && v.Shape[3] == fs.shape[3] && v.Shape[4] == fs.shape[4]
}

// maxTemplates bounds the templates one call site keeps: a site whose
// tensor params take more layouts than that evaluates the boundaries of
// the others whole.
const maxTemplates = 4

// siteTemplates is a call site's templates, in the order they were made;
// a stored one is never changed (learnTemplate stores a copy).
type siteTemplates []*stages.BoundaryTemplate

// callLocs evaluates a Graph call's boundary by one of its site's
// templates, the first that fits: each slot's root and offset into slots
// lw lends. It returns a nil template when none fits (the site has none
// yet, a tensor param of another layout, a row the fast form cannot vouch
// for, a slot the general path fails): runner.boundary then evaluates the
// boundary whole, and says what is wrong where something is.
func (r *runner) callLocs(lw stages.LocWriter, caller, cf *frame, c *callOp) (*stages.BoundaryTemplate, []stages.Loc) {
	ts := c.tmpls.Load()
	if ts == nil {
		return nil, nil
	}
	env := cf.env
	for _, sl := range cf.block.rowSlots {
		if y := env[sl]; y != int64(int32(y)) {
			return nil, nil
		}
	}
	locs := lw.GraphLocs(len(cf.block.fastBoundary))
	for _, t := range *ts {
		if r.locsBy(t, caller, cf, c, locs) {
			return t, locs
		}
		if r.err != nil {
			break
		}
	}
	return nil, nil
}

// locsBy evaluates the call's boundary into locs by template t, reporting
// whether every slot fits it.
func (r *runner) locsBy(t *stages.BoundaryTemplate, caller, cf *frame, c *callOp, locs []stages.Loc) bool {
	env, fb := cf.env, cf.block.fastBoundary
	for s := range fb {
		f := &fb[s]
		switch f.kind {
		case slotConst:
			locs[s] = stages.Loc{Root: f.tmpl.Root, Offset: f.tmpl.Offset}
		case slotRow:
			y := f.row.c0 + f.row.coef*env[f.row.slot]
			if y < 0 || y > f.rowMax {
				return false
			}
			locs[s] = stages.Loc{Root: f.tmpl.Root, Offset: f.base + y*f.stride0}
		case slotTArg:
			v := &cf.tensorArgs[f.targ]
			if !f.accepts(v) || !t.Fits(s, v) {
				return false
			}
			locs[s] = stages.Loc{Root: v.Root, Offset: v.Offset}
		default:
			var v stages.View
			if !f.eval(env, true, cf.tensorArgs, &v) && !r.generalSlot(cf, s, &v) || !t.Fits(s, &v) {
				return false
			}
			locs[s] = stages.Loc{Root: v.Root, Offset: v.Offset}
		}
	}
	// Inside an auto block, as runner.call does to a boundary evaluated
	// whole.
	for s, m := range remapped(caller, c) {
		if m >= 0 {
			v := &caller.ownBoundary.Tensors[m].View
			if !t.Fits(s, v) {
				return false
			}
			locs[s] = stages.Loc{Root: v.Root, Offset: v.Offset}
		}
	}
	return true
}

// generalSlot evaluates boundary slot s as runner.boundary's general path
// does, reporting false where that path fails or reports: a view outside
// its root fails the run here as there (r.err), a slot of another dtype or
// shape than declared is left to runner.boundary to report.
func (r *runner) generalSlot(cf *frame, s int, v *stages.View) bool {
	b := cf.block.boundary[s]
	if !r.view(cf, b.view, v) {
		return false
	}
	return (b.dtype == stages.DTypeInvalid || v.DType == b.dtype) && (b.shape == nil || sameShape(v.ShapeSlice(), b.shape))
}

// remapped is, inside an auto block, which of call c's boundary slots the
// block's own boundary supplies (ownSlotOf), or nil.
func remapped(caller *frame, c *callOp) []int32 {
	if caller.ownBoundary == nil || caller.ownSlotOf == nil {
		return nil
	}
	return caller.ownSlotOf[c.index]
}

// learnTemplate adds a template to call site c's, made of a boundary
// evaluated whole (args) because none of them fit it. A slot whose
// fast form fixes its layout (slotConst, slotRow) must have that layout in
// the template, or callLocs would pass the template's for another.
func (r *runner) learnTemplate(caller, cf *frame, c *callOp, args []stages.Arg) {
	old := c.tmpls.Load()
	if old != nil && len(*old) >= maxTemplates {
		return
	}
	fb, remap := cf.block.fastBoundary, remapped(caller, c)
	for s := range fb {
		if s < len(remap) && remap[s] >= 0 {
			continue // its layout is checked at every call (callLocs)
		}
		if f := &fb[s]; (f.kind == slotConst || f.kind == slotRow) && (args[s].Tag != f.tag || !args[s].View.SameLayout(&f.tmpl)) {
			return
		}
	}
	var ts siteTemplates
	if old != nil {
		ts = append(ts, *old...)
	}
	ts = append(ts, stages.NewBoundaryTemplate(args))
	// Ranks share the site: one that lost the race makes its template
	// again at a later call.
	c.tmpls.CompareAndSwap(old, &ts)
}
