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
	if mm := m.matchCounts(sig, wantScalars, wantExt, call); mm != nil {
		return mm
	}
	key, args := call.Key, call.Boundary
	gen := m.begin()
	for i := range args {
		a, s := &args[i], &sig[i]
		if a.Tag != s.Tag || !a.View.SameLayout(&s.Layout) {
			return layoutMismatch(key, i, a, s)
		}
		if n := roots.RootElems(a.View.Root); n != s.RootElems {
			return sizeMismatch(key, i, n, s)
		}
		if rep := m.alias(a.View.Root, int32(i), gen); rep != s.AliasRep {
			return aliasMismatch(key, i, rep, s)
		}
	}
	return nil
}

// matchCounts checks a call's tensor, scalar and external dependency
// counts against a signature's.
func (m *Matcher) matchCounts(sig []BoundarySlot, wantScalars, wantExt int, call *GraphCall) *BoundaryMismatch {
	key := call.Key
	if n := len(call.Boundary); n != len(sig) {
		return &BoundaryMismatch{Key: key, Slot: -1, What: "tensor count", Got: fmt.Sprint(n), Want: fmt.Sprint(len(sig))}
	}
	if n := len(call.Scalars); n != wantScalars {
		return &BoundaryMismatch{Key: key, Slot: -1, What: "scalar count", Got: fmt.Sprint(n), Want: fmt.Sprint(wantScalars)}
	}
	if n := len(call.ExtDeps); n != wantExt {
		return &BoundaryMismatch{Key: key, Slot: -1, What: "external dependency count", Got: fmt.Sprint(n), Want: fmt.Sprint(wantExt)}
	}
	return nil
}

// begin starts a call's alias partition and returns its generation.
func (m *Matcher) begin() uint32 {
	m.gen++
	if m.gen == 0 {
		clear(m.stamp)
		m.gen = 1
	}
	return m.gen
}

// alias is the first slot of this call (generation gen) that viewed root r,
// or -1 when slot i is the first, which it then becomes.
func (m *Matcher) alias(r RootID, i int32, gen uint32) int32 {
	if int(r) >= len(m.stamp) {
		grown := make([]aliasStamp, max(2*len(m.stamp), int(r)+1, 256))
		copy(grown, m.stamp)
		m.stamp = grown
	}
	st := &m.stamp[r]
	if st.gen == gen {
		return st.slot
	}
	*st = aliasStamp{gen: gen, slot: i}
	return -1
}

// layoutMismatch says which of a slot's tag and layout differ from the
// signature's.
func layoutMismatch(key string, i int, a *Arg, s *BoundarySlot) *BoundaryMismatch {
	if a.Tag != s.Tag {
		return &BoundaryMismatch{Key: key, Slot: i, What: "tag", Got: a.Tag.String(), Want: s.Tag.String()}
	}
	return &BoundaryMismatch{Key: key, Slot: i, What: "layout", Got: layoutString(&a.View), Want: layoutString(&s.Layout)}
}

func sizeMismatch(key string, i int, n int64, s *BoundarySlot) *BoundaryMismatch {
	return &BoundaryMismatch{Key: key, Slot: i, What: "root size", Got: fmt.Sprint(n), Want: fmt.Sprint(s.RootElems)}
}

func aliasMismatch(key string, i int, rep int32, s *BoundarySlot) *BoundaryMismatch {
	return &BoundaryMismatch{Key: key, Slot: i, What: "alias partition", Got: aliasString(rep), Want: aliasString(s.AliasRep)}
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
