package stages

import (
	"encoding/binary"
	"math"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// DecodeDefinition verifies and decodes a Definition image.
func DecodeDefinition(b []byte) (*Definition, error) {
	d := new(Definition)
	if err := DecodeDefinitionInto(b, d); err != nil {
		return nil, err
	}
	return d, nil
}

// DecodeDefinitionInto is DecodeDefinition into d, whose pools' storage it
// reuses: a decoder that keeps its own form of each Definition (the
// device) decodes every upload into one scratch Definition instead of
// allocating a fresh one (its tensor templates are 120 bytes each, about a
// megabyte for DSv4's eight). On error d holds a partial decode.
func DecodeDefinitionInto(b []byte, d *Definition) error {
	return DecodeDefinitionFunc(b, d, nil)
}

// DecodeDefinitionFunc is DecodeDefinitionInto, except that, with keep set,
// the tensor templates are handed to keep one at a time (template i of n,
// decoded and checked; t is reused) instead of kept in d.Tensors, which is
// left empty. A decoder with a narrower form of its own (the device) so
// never holds the 120-byte TensorRefs of a whole Definition.
func DecodeDefinitionFunc(b []byte, d *Definition, keep func(t *TensorRef, i, n int)) error {
	if err := imagefmt.CheckHeader(b, DefinitionMagic, DefinitionVersion, defHeaderSize, imagefmt.DefTotalAt, hashOff, "definition"); err != nil {
		return err
	}
	return decodeDefinition(b, d, keep)
}

// decodeDefinition decodes a Definition image whose header has been checked
// into d, section by section, in the sections' order but for the internal
// roots, which come before the tensor templates that are checked against
// them.
func decodeDefinition(b []byte, d *Definition, keep func(t *TensorRef, i, n int)) error {
	h, sec, err := defLayout(b)
	if err != nil {
		return err
	}
	h.definition(b, d)
	if err := h.faninSpans(b, sec, d.Nodes); err != nil {
		return err
	}
	if d.Fanin, err = h.faninEdges(b, sec, d.Nodes, d.Fanin); err != nil {
		return err
	}
	if err := h.checkFanout(b, sec, d); err != nil {
		return err
	}
	if d.ExtDeps, err = decodeExtDeps(b, sec, h); err != nil {
		return err
	}
	if err := h.nodeTable(b, sec, d.Nodes); err != nil {
		return err
	}
	if d.Roots, err = h.roots(b[sec[dsRoots]:sec[dsBoundary]], d.Roots); err != nil {
		return err
	}
	if d.Tensors, err = h.tensors(b[sec[dsTensors]:sec[dsScalars]], d.Tensors, d.Roots, keep); err != nil {
		return err
	}
	if d.Scalars, err = h.scalars(b[sec[dsScalars]:sec[dsRoots]], d.Scalars); err != nil {
		return err
	}
	if d.Boundary, err = decodeBoundary(b[sec[dsBoundary]:sec[dsPreds]], h.nbound, d.Boundary); err != nil {
		return err
	}
	if err := h.predicates(b[sec[dsPreds]:sec[dsKey]], d); err != nil {
		return err
	}
	d.Key = string(b[sec[dsKey]:sec[dsEnd]])
	return nil
}

// reuse is s resized to n zero elements, on s's storage when it fits (a
// nil s gets a fresh slice, as make gives).
func reuse[T any](s []T, n int) []T {
	if s == nil || cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// defCounts is a Definition image's header counts, checked against its
// sections by defLayout.
type defCounts struct {
	heapBytes                                       int64
	nodes, edges, ntens, nsc, nroots, nbound, npred int
	nbsc, keyLen                                    int
	next, waits                                     int // external dependency slots and their waits
}

// defLayout reads a Definition image's counts and section offsets (its
// header checked by imagefmt.CheckHeader) and checks them against one
// another, before anything is allocated.
func defLayout(b []byte) (defCounts, []int, error) {
	le := binary.LittleEndian
	h := defCounts{
		heapBytes: int64(le.Uint64(b[imagefmt.DefHeapAt:])),
		nodes:     int(le.Uint32(b[imagefmt.DefNodesAt:])),
		edges:     int(le.Uint32(b[imagefmt.DefEdgesAt:])),
		ntens:     int(le.Uint32(b[imagefmt.DefTensorsAt:])),
		nsc:       int(le.Uint32(b[imagefmt.DefScalarsAt:])),
		nroots:    int(le.Uint32(b[imagefmt.DefRootsAt:])),
		nbound:    int(le.Uint32(b[imagefmt.DefBoundaryAt:])),
		npred:     int(le.Uint32(b[imagefmt.DefPredicatesAt:])),
		keyLen:    int(le.Uint32(b[imagefmt.DefKeyLenAt:])),
		next:      int(le.Uint32(b[imagefmt.DefExtSlotsAt:])),
		waits:     int(le.Uint32(b[imagefmt.DefExtWaitsAt:])),
	}
	if h.heapBytes < 0 {
		return h, nil, badf("definition heap bytes %d negative", h.heapBytes)
	}
	nbsc := le.Uint32(b[imagefmt.DefBoundaryScalarsAt:])
	if nbsc > math.MaxInt32 {
		return h, nil, badf("definition boundary scalar count %d out of range", nbsc)
	}
	h.nbsc = int(nbsc)
	sec, err := imagefmt.Sections(b, defSecAt, dsCount, defHeaderSize, "definition")
	if err != nil {
		return h, nil, err
	}
	secLen := func(i int) int { return sec[i+1] - sec[i] }
	n, edges, next, waits := uint64(h.nodes), uint64(h.edges), uint64(h.next), uint64(h.waits)
	// Fixed sections must have exactly their size (the ext section may be
	// followed by up to 7 bytes of alignment padding).
	if uint64(secLen(dsFaninOff)) != 4*(n+1) || uint64(secLen(dsFaninIdx)) != 4*edges ||
		uint64(secLen(dsFanoutOff)) != 4*(n+1) || uint64(secLen(dsFanoutIdx)) != 4*edges ||
		uint64(secLen(dsExtOff)) != 4*(next+1) ||
		uint64(secLen(dsExtIdx)) < 4*waits || uint64(secLen(dsExtIdx)) > 4*waits+7 ||
		uint64(secLen(dsNodes)) != nodeRecSize*n || secLen(dsKey) != h.keyLen {
		return h, nil, badf("definition section sizes do not match its counts (%d nodes, %d edges, %d external dependency slots with %d waits, key %d bytes)", h.nodes, h.edges, h.next, h.waits, h.keyLen)
	}
	// Minimum record sizes bound the counts before allocating.
	if h.ntens*5 > secLen(dsTensors) || h.nsc*2 > secLen(dsScalars) || h.nroots*5 > secLen(dsRoots) ||
		h.nbound*6 > secLen(dsBoundary) || h.npred*8 > secLen(dsPreds) {
		return h, nil, badf("definition record counts exceed their sections")
	}
	return h, sec, nil
}

// definition makes d the Definition the header describes, its nodes
// allocated (on d's storage when it fits) and nothing else decoded.
func (h *defCounts) definition(b []byte, d *Definition) {
	le := binary.LittleEndian
	*d = Definition{
		FullKey:         le.Uint64(b[imagefmt.DefFullKeyAt:]),
		ContentHash:     le.Uint64(b[hashOff:]),
		HeapBytes:       h.heapBytes,
		BoundaryScalars: h.nbsc,
		Nodes:           reuse(d.Nodes, h.nodes),
		Fanin:           d.Fanin[:0],
		Tensors:         d.Tensors[:0],
		Scalars:         d.Scalars[:0],
		Roots:           d.Roots[:0],
		Boundary:        d.Boundary[:0],
		Preds:           d.Preds[:0],
	}
}

// faninSpans sets each node's Fanin span from the fanin CSR offsets, which
// start at 0, never decrease and end at edges.
func (h *defCounts) faninSpans(b []byte, sec []int, nodes []NodeDesc) error {
	le := binary.LittleEndian
	fo := b[sec[dsFaninOff]:]
	if le.Uint32(fo) != 0 || int(le.Uint32(fo[4*h.nodes:])) != h.edges {
		return badf("definition fanin CSR offsets do not span [0, %d)", h.edges)
	}
	for i := range nodes {
		lo, hi := le.Uint32(fo[4*i:]), le.Uint32(fo[4*i+4:])
		if hi < lo || int(hi) > h.edges {
			return badf("definition fanin CSR offsets of node %d are [%d, %d) of %d", i, lo, hi, h.edges)
		}
		nodes[i].Fanin = Span{Off: lo, N: hi - lo}
	}
	return nil
}

// faninEdges decodes the fanin CSR's producers: each precedes its consumer
// (node order is topological, so no cycle can be expressed).
func (h *defCounts) faninEdges(b []byte, sec []int, nodes []NodeDesc, dst []uint32) ([]uint32, error) {
	le := binary.LittleEndian
	fi := b[sec[dsFaninIdx]:]
	fanin := reuse(dst, h.edges)
	for i := range nodes {
		s := nodes[i].Fanin
		for e := s.Off; e < s.Off+s.N; e++ {
			p := le.Uint32(fi[4*e:])
			if int(p) >= i {
				return nil, badf("definition node %d has fanin %d: a producer must precede its consumer (a later node or a cycle)", i, p)
			}
			fanin[e] = p
		}
	}
	return fanin, nil
}

// checkFanout checks that the fanout CSR is the transpose of fanin,
// consumers ascending.
func (h *defCounts) checkFanout(b []byte, sec []int, d *Definition) error {
	le := binary.LittleEndian
	n, edges := h.nodes, h.edges
	oo := b[sec[dsFanoutOff]:]
	oi := b[sec[dsFanoutIdx]:]
	if le.Uint32(oo) != 0 || int(le.Uint32(oo[4*n:])) != edges {
		return badf("definition fanout CSR offsets do not span [0, %d)", edges)
	}
	// Walking consumers in order, each (p, c) edge must be the next unused
	// entry of p's fanout list. Cursor storage reuses a count array.
	cur := make([]uint32, n)
	for i := 0; i < n; i++ {
		lo, hi := le.Uint32(oo[4*i:]), le.Uint32(oo[4*i+4:])
		if hi < lo || int(hi) > edges {
			return badf("definition fanout CSR offsets of node %d are [%d, %d) of %d", i, lo, hi, edges)
		}
		cur[i] = lo
	}
	for c := 0; c < n; c++ {
		s := d.Nodes[c].Fanin
		for _, p := range d.Fanin[s.Off : s.Off+s.N] {
			if cur[p] >= le.Uint32(oo[4*p+4:]) || le.Uint32(oi[4*cur[p]:]) != uint32(c) {
				return badf("definition fanout CSR does not match its fanin CSR at edge %d -> %d", p, c)
			}
			cur[p]++
		}
	}
	for p := 0; p < n; p++ {
		if cur[p] != le.Uint32(oo[4*p+4:]) {
			return badf("definition fanout CSR lists extra consumers of node %d", p)
		}
	}
	return nil
}

// decodeExtDeps decodes the external dependency CSR: offsets from 0 to
// waits, each slot's nodes strictly ascending and in range.
func decodeExtDeps(b []byte, sec []int, h defCounts) ([][]uint32, error) {
	le := binary.LittleEndian
	n, next, waits := h.nodes, h.next, h.waits
	eo := b[sec[dsExtOff]:]
	ei := b[sec[dsExtIdx]:]
	if le.Uint32(eo) != 0 || int(le.Uint32(eo[4*next:])) != waits {
		return nil, badf("definition external dependency CSR offsets do not span [0, %d)", waits)
	}
	var ext [][]uint32
	if next > 0 {
		ext = make([][]uint32, next)
	}
	all := make([]uint32, waits)
	for j := 0; j < next; j++ {
		lo, hi := le.Uint32(eo[4*j:]), le.Uint32(eo[4*j+4:])
		if hi < lo || int(hi) > waits {
			return nil, badf("definition external dependency slot %d offsets are [%d, %d) of %d", j, lo, hi, waits)
		}
		for e := lo; e < hi; e++ {
			nd := le.Uint32(ei[4*e:])
			if int(nd) >= n || (e > lo && nd <= all[e-1]) {
				return nil, badf("definition external dependency slot %d names node %d (nodes must be ascending and below %d)", j, nd, n)
			}
			all[e] = nd
		}
		ext[j] = all[lo:hi:hi]
	}
	return ext, nil
}

// nodeTable decodes the node records into nodes (their Fanin spans set
// already), each with its 1-based predicate index (0: none).
func (h *defCounts) nodeTable(b []byte, sec []int, nodes []NodeDesc) error {
	le := binary.LittleEndian
	nb := b[sec[dsNodes]:]
	for i := range nodes {
		rec := nb[nodeRecSize*i:]
		nd := &nodes[i]
		nd.Kind = Kind(rec[imagefmt.NodeKindAt])
		if nd.Kind < KindAIC || nd.Kind > KindGraph {
			return badf("definition node %d has kind %d (want aic, aiv, mix, dummy, alloc or graph)", i, rec[imagefmt.NodeKindAt])
		}
		if nd.Launch = Launch(rec[imagefmt.NodeLaunchAt]); !nd.Launch.Valid() {
			return badf("definition node %d has launch flags %#x (want early 1, sync_start 2)", i, rec[imagefmt.NodeLaunchAt])
		}
		nd.Implied = uint32(le.Uint16(rec[imagefmt.NodeImpliedAt:]))
		nd.BlockNum = int32(le.Uint32(rec[imagefmt.NodeBlockNumAt:]))
		for k := 0; k < 3; k++ {
			nd.Kernel[k] = KernelID(int32(le.Uint32(rec[imagefmt.NodeKernelAt+4*k:])))
		}
		nd.Tensors = Span{Off: le.Uint32(rec[imagefmt.NodeTensorOffAt:]), N: le.Uint32(rec[imagefmt.NodeTensorNAt:])}
		nd.Scalars = Span{Off: le.Uint32(rec[imagefmt.NodeScalarOffAt:]), N: le.Uint32(rec[imagefmt.NodeScalarNAt:])}
		pred := le.Uint32(rec[imagefmt.NodePredicateAt:])
		if uint64(nd.Tensors.Off)+uint64(nd.Tensors.N) > uint64(h.ntens) {
			return badf("definition node %d tensors [%d, +%d) exceed %d tensors", i, nd.Tensors.Off, nd.Tensors.N, h.ntens)
		}
		if uint64(nd.Scalars.Off)+uint64(nd.Scalars.N) > uint64(h.nsc) {
			return badf("definition node %d scalars [%d, +%d) exceed %d scalars", i, nd.Scalars.Off, nd.Scalars.N, h.nsc)
		}
		if uint64(pred) > uint64(h.npred) {
			return badf("definition node %d names predicate %d of %d", i, pred, h.npred)
		}
		nd.Pred = int32(pred) // npred < 2^29: its section bounds it (defLayout)
	}
	return nil
}

// tensors decodes the tensor template section (on dst's storage), each
// template's slot checked, and an internal one's offset inside its root
// (roots, decoded already). With keep set, each is handed to keep instead
// of kept, and the result is dst emptied.
func (h *defCounts) tensors(b []byte, dst []TensorRef, roots []InternalRoot, keep func(t *TensorRef, i, n int)) ([]TensorRef, error) {
	var ts []TensorRef
	var one TensorRef
	if keep == nil {
		ts = reuse(dst, h.ntens)
	} else {
		ts = dst[:0]
	}
	r := newReader(b, "tensor")
	for i := 0; i < h.ntens; i++ {
		t := &one
		if keep == nil {
			t = &ts[i]
		} else {
			one = TensorRef{}
		}
		r.tensorRef(t)
		if r.Err != nil {
			return nil, r.Err
		}
		if err := h.checkRef(t, "tensor", i); err != nil {
			return nil, err
		}
		if (t.Src == SrcInternal || t.Src == SrcOwnOutput) && (t.Delta < 0 || t.Delta > roots[t.Slot].Elems) {
			return nil, badf("definition tensor %d offset %d is outside internal root %d (%d elems)", i, t.Delta, t.Slot, roots[t.Slot].Elems)
		}
		if keep != nil {
			keep(t, i, h.ntens)
		}
	}
	r.Done()
	if r.Err != nil {
		return nil, r.Err
	}
	return ts, nil
}

// scalars decodes the scalar section: static values and boundary slots.
func (h *defCounts) scalars(b []byte, dst []ScalarRef) ([]ScalarRef, error) {
	nbsc := uint32(h.nbsc)
	ss := reuse(dst, h.nsc)
	r := newReader(b, "scalar")
	for i := range ss {
		s := &ss[i]
		switch r.U8() {
		case imagefmt.ScalarStatic:
			s.Slot, s.Value = -1, r.Uvarint()
		case imagefmt.ScalarBoundary:
			slot := r.Uint32()
			if r.Err == nil && slot >= nbsc {
				return nil, badf("definition scalar %d names boundary scalar %d of %d", i, slot, nbsc)
			}
			s.Boundary, s.Slot = true, int32(slot)
		default:
			r.Fail("bad scalar source")
		}
		if r.Err != nil {
			return nil, r.Err
		}
	}
	r.Done()
	if r.Err != nil {
		return nil, r.Err
	}
	return ss, nil
}

// roots decodes the internal roots, each created by a node and inside the
// heap block.
func (h *defCounts) roots(b []byte, dst []InternalRoot) ([]InternalRoot, error) {
	rs := reuse(dst, h.nroots)
	r := newReader(b, "root")
	for i := range rs {
		rt := &rs[i]
		dt := r.U8()
		fl := r.U8()
		rt.Elems = r.Nonneg()
		cr := r.Uint32()
		rt.HeapOffset = r.Nonneg()
		if r.Err != nil {
			return nil, r.Err
		}
		if dt == 0 || int(dt) >= len(dtypeNames) || fl > imagefmt.RootManualDep {
			return nil, badf("definition internal root %d has dtype %d flags %d", i, dt, fl)
		}
		rt.DType, rt.ManualDep, rt.Creator = DType(dt), fl == imagefmt.RootManualDep, cr
		if int(cr) >= h.nodes {
			return nil, badf("definition internal root %d has creator node %d of %d", i, cr, h.nodes)
		}
		if rt.Elems > math.MaxInt64/8 || rt.HeapOffset > h.heapBytes || rt.Elems*rt.DType.Size() > h.heapBytes-rt.HeapOffset {
			return nil, badf("definition internal root %d ([%d, +%d elems of %s)) exceeds the %d-byte heap", i, rt.HeapOffset, rt.Elems, rt.DType, h.heapBytes)
		}
	}
	r.Done()
	if r.Err != nil {
		return nil, r.Err
	}
	return rs, nil
}

// decodeBoundary decodes the boundary signature section (on dst's storage).
func decodeBoundary(b []byte, nbound int, dst []BoundarySlot) ([]BoundarySlot, error) {
	sig := reuse(dst, nbound)
	r := newReader(b, "boundary")
	for i := range sig {
		if err := r.boundarySlot(sig, i); err != nil {
			return nil, err
		}
	}
	r.Done()
	if r.Err != nil {
		return nil, r.Err
	}
	return sig, nil
}

// checkRef checks that a tensor record's slot names a boundary slot or an
// internal root the image has.
func (h *defCounts) checkRef(t *TensorRef, what string, i int) error {
	switch t.Src {
	case SrcBoundaryExact, SrcBoundaryView:
		if int(t.Slot) >= h.nbound {
			return badf("definition %s %d names boundary slot %d of %d", what, i, t.Slot, h.nbound)
		}
	case SrcInternal, SrcOwnOutput:
		if int(t.Slot) >= h.nroots {
			return badf("definition %s %d names internal root %d of %d", what, i, t.Slot, h.nroots)
		}
	}
	return nil
}

// boundarySlot reads boundary slot i into sig[i], its alias representative
// checked against the slots before it.
func (r *reader) boundarySlot(sig []BoundarySlot, i int) error {
	bs := &sig[i]
	bs.Tag = Tag(r.U8())
	strided := r.layoutHead(&bs.Layout)
	rep := r.Uint32()
	if r.Varint() != 0 {
		r.Fail("boundary slot %d: nonzero reserved field", i)
	}
	r.layoutTail(&bs.Layout, strided)
	bs.RootElems = r.Nonneg()
	if r.Err != nil {
		return r.Err
	}
	if !validTag(bs.Tag) {
		return badf("definition boundary slot %d has tag %d", i, bs.Tag)
	}
	bs.AliasRep = int32(rep) - 1
	if rep > uint32(i) {
		return badf("definition boundary slot %d has alias representative %d (must be an earlier slot or -1)", i, bs.AliasRep)
	}
	if bs.AliasRep >= 0 && sig[bs.AliasRep].AliasRep != -1 {
		return badf("definition boundary slot %d aliases slot %d, which is not a representative", i, bs.AliasRep)
	}
	return nil
}

// predRef reads one predicate record (the recorder keeps its predicates as
// these records until Build).
func (r *reader) predRef(p *PredRef) {
	p.Valid = true
	p.Op = PredOp(r.U8())
	r.tensorRef(&p.Tensor)
	p.Index = r.Varint()
	p.Target = r.Varint()
}

// predicates decodes and checks a Definition's predicate section into
// d.Preds (on its storage), which the nodes name by index (nodeTable); the
// full and the host decode share it.
func (h *defCounts) predicates(b []byte, d *Definition) error {
	pr := reuse(d.Preds, h.npred)
	d.Preds = pr
	r := newReader(b, "predicate")
	for i := range pr {
		p := &pr[i]
		r.predRef(p)
		if r.Err != nil {
			return r.Err
		}
		if !validPredOp(p.Op) {
			return badf("definition predicate %d has op %d", i, p.Op)
		}
		if err := h.checkRef(&p.Tensor, "predicate", i); err != nil {
			return err
		}
	}
	r.Done()
	return r.Err
}
