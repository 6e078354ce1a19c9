package stages

// TensorMap is the producer index that turns tags into edges: for every root,
// the regions written by earlier tasks and who wrote them. It follows
// upstream's pto_dep_compute rule (workloads.md §6).
//
// Entries are kept per root in submission order; a lookup scans the root's
// entries, which stay few because an inout that covers an entry retires it.
// A root written slice after slice in increasing order (a cache that each
// layer's call writes its own slice of) is the exception: its entries pile
// up, disjoint and in order, and a lookup finds the ones it overlaps by
// binary search instead of a scan.
type TensorMap struct {
	pub  []tmRoot // caller roots, indexed by RootID
	priv []tmRoot // roots private to a recording
}

type tmEntry struct {
	start, end int64
	producer   TaskID
}

// tmRoot is one root's entries, in submission order.
type tmRoot struct {
	es []tmEntry
	// unordered: some entry starts before the previous one ends. While it
	// is false, submission order is also the order of starts and of ends,
	// so the entries a region overlaps are one run found by binary search.
	unordered bool
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

func (m *TensorMap) slot(r RootID) *tmRoot {
	tab, i := &m.pub, int(r)
	if r.IsPrivate() {
		tab, i = &m.priv, int(r-privateRootBase)
	}
	if i >= len(*tab) {
		n := max(2*len(*tab), i+1, 64)
		grown := make([]tmRoot, n)
		copy(grown, *tab)
		*tab = grown
	}
	return &(*tab)[i]
}

// region is a view's interval on its root, what the TensorMap keys on.
type region struct {
	root       RootID
	start, end int64
}

func regionOf(v *View) region { return region{v.Root, v.Offset, v.End()} }

// live is r's entries when it has any, else nil: a root nobody wrote (a
// weight, most of a boundary) needs no lookup. It never grows the table,
// so the pointer holds until the next Register.
func (m *TensorMap) live(r RootID) *tmRoot {
	tab, i := m.pub, int(r)
	if r.IsPrivate() {
		tab, i = m.priv, int(r-privateRootBase)
	}
	if i < len(tab) && len(tab[i].es) > 0 {
		return &tab[i]
	}
	return nil
}

// run is the part of es that [start, end) may overlap: all of it, or, for
// ordered entries, the run that does (ends past start, starts before end).
func (t *tmRoot) run(start, end int64) (lo, hi int) {
	es := t.es
	if t.unordered || len(es) <= 8 {
		return 0, len(es)
	}
	// Ordered entries have nondecreasing starts and ends.
	if es[len(es)-1].end <= start {
		// Past every entry: the next slice of a root written slice after
		// slice, which a binary search over its 10^5 slices would find
		// through as many cache misses as steps.
		return len(es), len(es)
	}
	lo, hi = 0, len(es)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if es[mid].end <= start {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	hi = lo
	for hi < len(es) && es[hi].start < end {
		hi++
	}
	return lo, hi
}

// Lookup adds to fs the producer of every entry of v's root that overlaps
// v's region. With retire set (an inout), entries the region covers are
// removed after being reported.
func (m *TensorMap) Lookup(v *View, retire bool, fs *FaninSet) {
	t := m.live(v.Root)
	if t == nil {
		return // no region to compute
	}
	if start, end := v.Offset, v.End(); t.find(start, end, fs) && retire {
		t.retire(start, end)
	}
}

// find adds to fs the producer of every entry that overlaps [start, end),
// in submission order, and reports whether the region covers any (an inout
// of it would retire them). It writes nothing in the map.
func (t *tmRoot) find(start, end int64, fs *FaninSet) (covers bool) {
	if len(t.es) == 1 { // most written roots: one writer so far
		e := &t.es[0]
		ov := e.overlap(start, end)
		if ov != OverlapNone {
			fs.Add(e.producer)
		}
		return ov == OverlapCovered
	}
	lo, hi := t.run(start, end)
	for i := lo; i < hi; i++ {
		switch t.es[i].overlap(start, end) {
		case OverlapCovered:
			covers = true
			fs.Add(t.es[i].producer)
		case OverlapPartial:
			fs.Add(t.es[i].producer)
		}
	}
	return covers
}

// retire removes the entries [start, end) covers, keeping the others in
// order.
func (t *tmRoot) retire(start, end int64) {
	lo, hi := t.run(start, end)
	kept := lo
	for i := lo; i < hi; i++ {
		if t.es[i].overlap(start, end) != OverlapCovered {
			t.es[kept] = t.es[i]
			kept++
		}
	}
	switch {
	case kept == hi:
		return
	case hi == len(t.es):
		t.es = t.es[:kept]
	default:
		t.es = append(t.es[:kept], t.es[hi:]...)
	}
	if len(t.es) == 0 {
		t.unordered = false
	}
}

// Register records task as the producer of v's region.
func (m *TensorMap) Register(v *View, task TaskID) { m.register(regionOf(v), task) }

func (m *TensorMap) register(g region, task TaskID) {
	t := m.slot(g.root)
	if n := len(t.es); g.end < g.start || n > 0 && g.start < t.es[n-1].end {
		t.unordered = true
	}
	t.es = append(t.es, tmEntry{start: g.start, end: g.end, producer: task})
}

// Reset forgets every entry but keeps the storage for the next run.
func (m *TensorMap) Reset() {
	for i := range m.pub {
		m.pub[i] = tmRoot{es: m.pub[i].es[:0]}
	}
	for i := range m.priv {
		m.priv[i] = tmRoot{es: m.priv[i].es[:0]}
	}
}

// Entries is the number of live entries, for tests and accounting.
func (m *TensorMap) Entries() int {
	n := 0
	for _, s := range m.pub {
		n += len(s.es)
	}
	for _, s := range m.priv {
		n += len(s.es)
	}
	return n
}
