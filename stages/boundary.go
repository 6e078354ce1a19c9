package stages

import "fmt"

// RootSizer answers the size of a root, which a boundary slot may not change.
type RootSizer interface {
	RootElems(RootID) int64
}

// RootElems implements RootSizer for the run's roots.
func (o *OrdinaryPath) RootElems(r RootID) int64 { return o.info[r].elems }

// BoundaryMismatch says why a call cannot replay a Definition: the boundary
// contract lets a replay change addresses and scalar values, never shape,
// strides, dtype, tag, byte size or the alias partition.
type BoundaryMismatch struct {
	Key  string
	Slot int // -1 for a count mismatch
	What string
	Got  string
	Want string
}

func (m *BoundaryMismatch) Error() string {
	if m.Slot < 0 {
		return fmt.Sprintf("graph %q: boundary %s is %s, the Definition has %s", m.Key, m.What, m.Got, m.Want)
	}
	return fmt.Sprintf("graph %q: boundary slot %d: %s is %s, the Definition has %s", m.Key, m.Slot, m.What, m.Got, m.Want)
}

// Matcher checks calls against a Definition's boundary signature in time
// linear in the boundary width: the alias partition is computed with a
// generation-stamped table indexed by root, not by comparing slot pairs.
// A Matcher is reused across calls and is not safe for concurrent use.
type Matcher struct {
	stamp []aliasStamp
	gen   uint32
}

type aliasStamp struct {
	gen  uint32
	slot int32
}

// Match reports nil when a call fits the Definition's boundary.
func (m *Matcher) Match(d *Definition, call *GraphCall, roots RootSizer) *BoundaryMismatch {
	return m.MatchSignature(d.Boundary, d.BoundaryScalars, len(d.ExtDeps), call, roots)
}

// Signature is the fixed part of a call's boundary: what every later call
// of the same key must repeat.
func Signature(args []Arg, roots RootSizer) []BoundarySlot {
	sig := make([]BoundarySlot, len(args))
	for i := range args {
		a := &args[i]
		s := BoundarySlot{Tag: a.Tag, Layout: a.View, RootElems: roots.RootElems(a.View.Root), AliasRep: -1}
		s.Layout.Root, s.Layout.Offset = 0, 0
		for j := 0; j < i; j++ { // once per recording, not per call
			if args[j].View.Root == a.View.Root {
				s.AliasRep = int32(j)
				break
			}
		}
		sig[i] = s
	}
	return sig
}

// MatchSignature checks a call against a boundary signature (a Definition's,
// or an in-flight recording's first call): its tensor slots, its scalar
// count and its external dependency count. Which tasks the external slots
// name may change from call to call, as addresses do: the outer task waits
// on this call's.
func (m *Matcher) MatchSignature(sig []BoundarySlot, wantScalars, wantExt int, call *GraphCall, roots RootSizer) *BoundaryMismatch {
	return matchSignature(m, sig, wantScalars, wantExt, call, roots)
}

// matchSignature is MatchSignature, generic so that the ordinary path's root
// table is read inline on the replay's hot path.
func matchSignature[R RootSizer](m *Matcher, sig []BoundarySlot, wantScalars, wantExt int, call *GraphCall, roots R) *BoundaryMismatch {
	key, args := call.Key, call.Boundary
	if len(args) != len(sig) {
		return &BoundaryMismatch{Key: key, Slot: -1, What: "tensor count", Got: fmt.Sprint(len(args)), Want: fmt.Sprint(len(sig))}
	}
	if n := len(call.Scalars); n != wantScalars {
		return &BoundaryMismatch{Key: key, Slot: -1, What: "scalar count", Got: fmt.Sprint(n), Want: fmt.Sprint(wantScalars)}
	}
	if n := len(call.ExtDeps); n != wantExt {
		return &BoundaryMismatch{Key: key, Slot: -1, What: "external dependency count", Got: fmt.Sprint(n), Want: fmt.Sprint(wantExt)}
	}
	m.gen++
	if m.gen == 0 {
		clear(m.stamp)
		m.gen = 1
	}
	for i := range args {
		a, s := &args[i], &sig[i]
		if a.Tag != s.Tag {
			return &BoundaryMismatch{Key: key, Slot: i, What: "tag", Got: a.Tag.String(), Want: s.Tag.String()}
		}
		if !a.View.SameLayout(&s.Layout) {
			return &BoundaryMismatch{Key: key, Slot: i, What: "layout", Got: layoutString(&a.View), Want: layoutString(&s.Layout)}
		}
		if n := roots.RootElems(a.View.Root); n != s.RootElems {
			return &BoundaryMismatch{Key: key, Slot: i, What: "root size", Got: fmt.Sprint(n), Want: fmt.Sprint(s.RootElems)}
		}
		r := int(a.View.Root)
		if r >= len(m.stamp) {
			grown := make([]aliasStamp, max(2*len(m.stamp), r+1, 256))
			copy(grown, m.stamp)
			m.stamp = grown
		}
		rep := int32(-1)
		if st := &m.stamp[r]; st.gen == m.gen {
			rep = st.slot
		} else {
			*st = aliasStamp{gen: m.gen, slot: int32(i)}
		}
		if rep != s.AliasRep {
			return &BoundaryMismatch{Key: key, Slot: i, What: "alias partition", Got: aliasString(rep), Want: aliasString(s.AliasRep)}
		}
	}
	return nil
}

func aliasString(rep int32) string {
	if rep < 0 {
		return "its own root"
	}
	return fmt.Sprintf("the root of slot %d", rep)
}

func layoutString(v *View) string {
	return fmt.Sprintf("%s%v strides %v", v.DType, v.Shape[:v.NDims], v.Strides[:v.NDims])
}
