package stages

// A warm Graph call spends most of its time on its boundary: a DSv4 full
// pass evaluates 2,962 boundary args, each a 104-byte Arg the interpreter
// writes and the replay reads back to compare its layout with the
// signature's, though at one call site only the root and the offset ever
// change. A BoundaryTemplate is that call site's layouts, fixed once: a call
// by template passes each slot's root and offset (a Loc, 12 bytes), and a
// replay compares the template with the key's signature once, not slot by
// slot at every call.

// Loc is where a boundary slot's view lies: its root and element offset.
// The rest of the view (dtype, shape, strides) is its template's.
type Loc struct {
	Root   RootID
	Offset int64
}

// BoundaryTemplate is the tags and layouts of a Graph call site's
// boundary: slot i of a call by template is the template's slot i at
// Locs[i]. It is immutable once made, so that pointer equality is layout
// equality: a key's state keeps the template its signature matched, and a
// later call carrying the same template needs no layout compared.
type BoundaryTemplate struct {
	slots []Arg   // tag and layout; Root and Offset zero
	span  []int64 // each slot's View.Span, which the layout decides
}

// NewBoundaryTemplate makes the template of a call site from one call's
// boundary (its roots and offsets are dropped).
func NewBoundaryTemplate(args []Arg) *BoundaryTemplate {
	t := &BoundaryTemplate{slots: make([]Arg, len(args)), span: make([]int64, len(args))}
	for i := range args {
		a := args[i]
		a.View.Root, a.View.Offset = 0, 0
		t.slots[i] = a
		t.span[i] = a.View.Span()
	}
	return t
}

// Len is the number of boundary slots.
func (t *BoundaryTemplate) Len() int { return len(t.slots) }

// Fits reports whether v has slot i's layout, so that a call may pass it
// as a Loc.
func (t *BoundaryTemplate) Fits(i int, v *View) bool { return t.slots[i].View.SameLayout(v) }

// Materialize writes the boundary a call by template stands for into out
// (len(out) == t.Len()).
func (t *BoundaryTemplate) Materialize(locs []Loc, out []Arg) {
	out = out[:len(t.slots)]
	copy(out, t.slots)
	for i, l := range locs[:len(t.slots)] {
		out[i].View.Root, out[i].View.Offset = l.Root, l.Offset
	}
}

// LocWriter is a Submitter that takes a Graph call's boundary by template
// (GraphCall.Template and Locs): GraphLocs lends n Loc slots, as a
// BoundaryWriter lends Args, the caller's until its next call on the
// Submitter. Only a LocWriter is passed a call by template.
type LocWriter interface {
	GraphLocs(n int) []Loc
}

// locSlot is what a replay by template checks and resolves of a slot,
// compiled from the key's signature and the template it matched: a
// slot's layout is settled, its root's size and alias partition are not.
type locSlot struct {
	elems int64 // the signature's RootElems
	span  int64
	alias int32
	tag   Tag
	mdep  bool // the slot's view is manual_dep (View.ManualDep)
}

// compileLocs reports whether template t's layouts are signature sig's,
// and then what a replay by t checks per slot.
func compileLocs(sig []BoundarySlot, t *BoundaryTemplate) ([]locSlot, bool) {
	if len(sig) != len(t.slots) {
		return nil, false
	}
	out := make([]locSlot, len(sig))
	for i := range sig {
		s, a := &sig[i], &t.slots[i]
		if a.Tag != s.Tag || !a.View.SameLayout(&s.Layout) {
			return nil, false
		}
		out[i] = locSlot{elems: s.RootElems, span: t.span[i], alias: s.AliasRep, tag: s.Tag, mdep: a.View.ManualDep}
	}
	return out, true
}
