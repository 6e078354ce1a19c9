package stages

// TensorMap is the producer index that turns tags into edges: for every root,
// the regions written by earlier tasks and who wrote them. It follows
// upstream's pto_dep_compute rule (workloads.md §6).
//
// Entries are kept per root in submission order; a lookup scans the root's
// entries, which stay few because an inout that covers an entry retires it.
type TensorMap struct {
	pub  [][]tmEntry // caller roots, indexed by RootID
	priv [][]tmEntry // roots private to a recording
}

type tmEntry struct {
	start, end int64
	producer   TaskID
}

// Overlap classifies a region against a registered one.
type Overlap uint8

const (
	OverlapNone Overlap = iota
	// OverlapCovered: the new region contains the entry entirely.
	OverlapCovered
	// OverlapPartial: they intersect but the entry sticks out.
	OverlapPartial
)

// overlap classifies [start,end) against entry e.
func (e *tmEntry) overlap(start, end int64) Overlap {
	if end <= e.start || e.end <= start {
		return OverlapNone
	}
	if start <= e.start && e.end <= end {
		return OverlapCovered
	}
	return OverlapPartial
}

func (m *TensorMap) slot(r RootID) *[]tmEntry {
	tab, i := &m.pub, int(r)
	if r.IsPrivate() {
		tab, i = &m.priv, int(r-privateRootBase)
	}
	if i >= len(*tab) {
		n := max(2*len(*tab), i+1, 64)
		grown := make([][]tmEntry, n)
		copy(grown, *tab)
		*tab = grown
	}
	return &(*tab)[i]
}

// Lookup adds to fs the producer of every entry of v's root that overlaps
// v's region. With retire set (an inout), entries the region covers are
// removed after being reported.
func (m *TensorMap) Lookup(v *View, retire bool, fs *FaninSet) {
	s := m.slot(v.Root)
	es := *s
	if len(es) == 0 {
		return // a root nobody wrote (a weight): no region to compute
	}
	start, end := v.Offset, v.End()
	if !retire {
		// A read retires nothing: the entries stay as they are (an input
		// of a root nobody wrote, a weight, costs a load and no store).
		for i := range es {
			if es[i].overlap(start, end) != OverlapNone {
				fs.Add(es[i].producer)
			}
		}
		return
	}
	kept := es[:0]
	for i := range es {
		e := es[i]
		ov := e.overlap(start, end)
		if ov != OverlapNone {
			fs.Add(e.producer)
		}
		if retire && ov == OverlapCovered {
			continue
		}
		kept = append(kept, e)
	}
	*s = kept
}

// Register records task as the producer of v's region.
func (m *TensorMap) Register(v *View, task TaskID) {
	s := m.slot(v.Root)
	*s = append(*s, tmEntry{start: v.Offset, end: v.End(), producer: task})
}

// Reset forgets every entry but keeps the storage for the next run.
func (m *TensorMap) Reset() {
	for i := range m.pub {
		m.pub[i] = m.pub[i][:0]
	}
	for i := range m.priv {
		m.priv[i] = m.priv[i][:0]
	}
}

// Entries is the number of live entries, for tests and accounting.
func (m *TensorMap) Entries() int {
	n := 0
	for _, s := range m.pub {
		n += len(s)
	}
	for _, s := range m.priv {
		n += len(s)
	}
	return n
}
