package stages

import (
	"encoding/binary"
	"math"
)

// DecodeDefinitionHost verifies a Definition image's header, length,
// content hash and section table as DecodeDefinition does, and decodes only
// what a host replays it with: full_key, key, content hash, heap size, the
// boundary signature and scalar count, the external dependency slots, and
// the node table (Nodes in full,
// predicates included; their spans index pools left out). The tensor
// templates are scanned for the boundary slots the body writes (written, in
// slot order, as Definition.WrittenSlots lists them) and not kept: the pools
// Tensors, Scalars, Fanin and Roots stay nil.
//
// Why: a Definition loaded from disk goes to the device, which decodes and
// checks the whole image at upload (npu.Die.Upload); decoding it in full
// on the host as well paid for the decode twice, and the host's copy (a
// 104-byte view per tensor template) was most of a load's cost. The content
// hash still covers every byte, so a torn or flipped file is caught here.
// An image DecodeDefinition accepts, this accepts, and agrees with it on
// every field it fills; the reverse does not hold (the pools' own checks
// are the device's).
func DecodeDefinitionHost(b []byte) (d *Definition, written []int32, err error) {
	if err := checkHeader(b, DefinitionMagic, DefinitionVersion, defHeaderSize, 32, hashOff, "definition"); err != nil {
		return nil, nil, err
	}
	le := binary.LittleEndian
	h, sec, err := defLayout(b)
	if err != nil {
		return nil, nil, err
	}
	d = &Definition{
		FullKey:         le.Uint64(b[8:]),
		ContentHash:     le.Uint64(b[hashOff:]),
		HeapBytes:       h.heapBytes,
		BoundaryScalars: h.nbsc,
	}
	n := h.nodes
	fo := b[sec[dsFaninOff]:]
	if le.Uint32(fo) != 0 || int(le.Uint32(fo[4*n:])) != h.edges {
		return nil, nil, badf("definition fanin CSR offsets do not span [0, %d)", h.edges)
	}
	d.Nodes = make([]NodeDesc, n)
	if d.ExtDeps, err = decodeExtDeps(b, sec, h); err != nil {
		return nil, nil, err
	}
	preds := make([]uint32, n)
	nb := b[sec[dsNodes]:]
	for i := range d.Nodes {
		nd := &d.Nodes[i]
		lo, hi := le.Uint32(fo[4*i:]), le.Uint32(fo[4*i+4:])
		if hi < lo || int(hi) > h.edges {
			return nil, nil, badf("definition fanin CSR offsets of node %d are [%d, %d) of %d", i, lo, hi, h.edges)
		}
		nd.Fanin = Span{Off: lo, N: hi - lo}
		rec := nb[nodeRecSize*i:]
		nd.Kind = Kind(rec[0])
		if nd.Kind < KindAIC || nd.Kind > KindAlloc {
			return nil, nil, badf("definition node %d has kind %d (want aic, aiv, mix, dummy or alloc; a GRAPH node cannot nest)", i, rec[0])
		}
		nd.BlockNum = int32(le.Uint32(rec[4:]))
		for k := 0; k < 3; k++ {
			nd.Kernel[k] = KernelID(int32(le.Uint32(rec[8+4*k:])))
		}
		nd.Tensors = Span{Off: le.Uint32(rec[20:]), N: le.Uint32(rec[24:])}
		nd.Scalars = Span{Off: le.Uint32(rec[28:]), N: le.Uint32(rec[32:])}
		preds[i] = le.Uint32(rec[36:])
		if uint64(nd.Tensors.Off)+uint64(nd.Tensors.N) > uint64(h.ntens) {
			return nil, nil, badf("definition node %d tensors [%d, +%d) exceed %d tensors", i, nd.Tensors.Off, nd.Tensors.N, h.ntens)
		}
		if uint64(nd.Scalars.Off)+uint64(nd.Scalars.N) > uint64(h.nsc) {
			return nil, nil, badf("definition node %d scalars [%d, +%d) exceed %d scalars", i, nd.Scalars.Off, nd.Scalars.N, h.nsc)
		}
		if int(preds[i]) > h.npred {
			return nil, nil, badf("definition node %d names predicate %d of %d", i, preds[i], h.npred)
		}
	}

	// Tensor templates: each record checked as DecodeDefinition checks it
	// (tag, source, layout, slot), then dropped; what is kept is whether it
	// writes its boundary slot.
	wrote := make([]bool, h.nbound)
	r := reader{b: b[sec[dsTensors]:sec[dsScalars]], sec: "tensor"}
	for i := 0; i < h.ntens; i++ {
		t := r.skipTensorRef()
		if r.err != nil {
			return nil, nil, r.err
		}
		if err := h.checkRef(&t, "tensor", i); err != nil {
			return nil, nil, err
		}
		if (t.Src == SrcBoundaryExact || t.Src == SrcBoundaryView) && (t.Tag == TagInOut || t.Tag == TagOutputExisting) {
			wrote[t.Slot] = true
		}
	}
	r.done()
	if r.err != nil {
		return nil, nil, r.err
	}
	for i, w := range wrote {
		if w {
			written = append(written, int32(i))
		}
	}

	if d.Boundary, err = decodeBoundary(b[sec[dsBoundary]:sec[dsPreds]], h.nbound); err != nil {
		return nil, nil, err
	}

	pr, err := h.predicates(b[sec[dsPreds]:sec[dsKey]], h.npred)
	if err != nil {
		return nil, nil, err
	}
	for i := range d.Nodes {
		if k := preds[i]; k > 0 {
			d.Nodes[i].Pred = pr[k-1]
		}
	}
	d.Key = string(b[sec[dsKey]:sec[dsEnd]])
	return d, written, nil
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
// header checked by checkHeader) and checks them against one another,
// before anything is allocated.
func defLayout(b []byte) (defCounts, []int, error) {
	le := binary.LittleEndian
	h := defCounts{
		heapBytes: int64(le.Uint64(b[24:])),
		nodes:     int(le.Uint32(b[36:])),
		edges:     int(le.Uint32(b[40:])),
		ntens:     int(le.Uint32(b[44:])),
		nsc:       int(le.Uint32(b[48:])),
		nroots:    int(le.Uint32(b[52:])),
		nbound:    int(le.Uint32(b[56:])),
		npred:     int(le.Uint32(b[64:])),
		keyLen:    int(le.Uint32(b[68:])),
		next:      int(le.Uint32(b[72:])),
		waits:     int(le.Uint32(b[76:])),
	}
	if h.heapBytes < 0 {
		return h, nil, badf("definition heap bytes %d negative", h.heapBytes)
	}
	nbsc := le.Uint32(b[60:])
	if nbsc > math.MaxInt32 {
		return h, nil, badf("definition boundary scalar count %d out of range", nbsc)
	}
	h.nbsc = int(nbsc)
	sec, err := sections(b, defSecAt, dsCount, defHeaderSize, "definition")
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

// decodeBoundary decodes the boundary signature section.
func decodeBoundary(b []byte, nbound int) ([]BoundarySlot, error) {
	sig := make([]BoundarySlot, nbound)
	r := reader{b: b, sec: "boundary"}
	for i := range sig {
		if err := r.boundarySlot(sig, i); err != nil {
			return nil, err
		}
	}
	r.done()
	if r.err != nil {
		return nil, r.err
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
	bs.Tag = Tag(r.u8())
	strided := r.layoutHead(&bs.Layout)
	rep := r.u32v()
	if r.sv() != 0 {
		r.fail("boundary slot %d: nonzero reserved field", i)
	}
	r.layoutTail(&bs.Layout, strided)
	bs.RootElems = r.nonneg()
	if r.err != nil {
		return r.err
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

// skipTensorRef reads a tensor record as tensorRef does, with the same
// checks of its tag, source, dtype, rank and slot, but steps over the delta,
// shape and strides (each checked to be a well-formed varint, not decoded):
// the returned TensorRef has Tag, Src and Slot only.
func (r *reader) skipTensorRef() TensorRef {
	var t TensorRef
	if !r.need(3) {
		return t
	}
	b, dt, nd := r.b[r.off], r.b[r.off+1], r.b[r.off+2]
	t.Tag, t.Src = Tag(b&0xf), SourceKind(b>>4)
	switch {
	case !validTag(t.Tag):
		r.fail("bad tag %d", t.Tag)
	case t.Src < SrcBoundaryExact || t.Src > SrcOwnOutput:
		r.fail("bad source kind %d", t.Src)
	case dt == 0 || int(dt) >= len(dtypeNames):
		r.off++
		r.fail("bad dtype %d", dt)
	case nd&^stridesFlag > MaxDims:
		r.off += 2
		r.fail("rank %d exceeds %d", nd&^stridesFlag, MaxDims)
	}
	if r.err != nil {
		return t
	}
	r.off += 3
	slot := r.u32v()
	if slot > math.MaxInt32 {
		r.fail("slot %d out of range", slot)
	}
	t.Slot = int32(slot)
	// The delta, then the shape and the strides if stored.
	k := 1 + int(nd&^stridesFlag)
	if nd&stridesFlag != 0 {
		k += int(nd &^ stridesFlag)
	}
	for ; k > 0 && r.err == nil; k-- {
		r.skipVarint()
	}
	return t
}

// skipVarint steps over one varint, failing as uv does on a bad one.
func (r *reader) skipVarint() {
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if r.off+i >= len(r.b) {
			break
		}
		if r.b[r.off+i] < 0x80 {
			if i == binary.MaxVarintLen64-1 && r.b[r.off+i] > 1 {
				break // overflows 64 bits
			}
			r.off += i + 1
			return
		}
	}
	r.fail("bad varint")
}

// predicates decodes and checks a Definition's predicate section; the full
// and the host decode share it.
func (h *defCounts) predicates(b []byte, n int) ([]PredRef, error) {
	pr := make([]PredRef, n)
	r := reader{b: b, sec: "predicate"}
	for i := range pr {
		p := &pr[i]
		p.Valid = true
		p.Op = PredOp(r.u8())
		r.tensorRef(&p.Tensor)
		p.Index = r.sv()
		p.Target = r.sv()
		if r.err != nil {
			return nil, r.err
		}
		if !validPredOp(p.Op) {
			return nil, badf("definition predicate %d has op %d", i, p.Op)
		}
		if err := h.checkRef(&p.Tensor, "predicate", i); err != nil {
			return nil, err
		}
	}
	r.done()
	if r.err != nil {
		return nil, r.err
	}
	return pr, nil
}
