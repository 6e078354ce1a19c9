package stages

import (
	"math"

	"github.com/hbg-dev/hbg/stages/imagefmt"
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
	if err := imagefmt.CheckHeader(b, DefinitionMagic, DefinitionVersion, defHeaderSize, imagefmt.DefTotalAt, hashOff, "definition"); err != nil {
		return nil, nil, err
	}
	h, sec, err := defLayout(b)
	if err != nil {
		return nil, nil, err
	}
	d = new(Definition)
	h.definition(b, d)
	if err := h.faninSpans(b, sec, d.Nodes); err != nil {
		return nil, nil, err
	}
	if d.ExtDeps, err = decodeExtDeps(b, sec, h); err != nil {
		return nil, nil, err
	}
	if err := h.nodeTable(b, sec, d.Nodes); err != nil {
		return nil, nil, err
	}
	if written, err = h.writtenSlots(b[sec[dsTensors]:sec[dsScalars]]); err != nil {
		return nil, nil, err
	}
	if d.Boundary, err = decodeBoundary(b[sec[dsBoundary]:sec[dsPreds]], h.nbound, nil); err != nil {
		return nil, nil, err
	}
	if err := h.predicates(b[sec[dsPreds]:sec[dsKey]], d); err != nil {
		return nil, nil, err
	}
	d.Key = string(b[sec[dsKey]:sec[dsEnd]])
	return d, written, nil
}

// writtenSlots scans the tensor templates, each record checked as
// DecodeDefinition checks it (tag, source, layout, slot), then dropped; what
// is kept is whether it writes its boundary slot: the slots written, in slot
// order.
func (h *defCounts) writtenSlots(b []byte) ([]int32, error) {
	wrote := make([]bool, h.nbound)
	r := newReader(b, "tensor")
	for i := 0; i < h.ntens; i++ {
		t := r.skipTensorRef()
		if r.Err != nil {
			return nil, r.Err
		}
		if err := h.checkRef(&t, "tensor", i); err != nil {
			return nil, err
		}
		if (t.Src == SrcBoundaryExact || t.Src == SrcBoundaryView) && (t.Tag == TagInOut || t.Tag == TagOutputExisting) {
			wrote[t.Slot] = true
		}
	}
	r.Done()
	if r.Err != nil {
		return nil, r.Err
	}
	var written []int32
	for i, w := range wrote {
		if w {
			written = append(written, int32(i))
		}
	}
	return written, nil
}

// skipTensorRef reads a tensor record as tensorRef does, with the same
// checks of its tag, source, dtype, rank and slot, but steps over the delta,
// shape and strides (each checked to be a well-formed varint, not decoded):
// the returned TensorRef has Tag, Src and Slot only.
func (r *reader) skipTensorRef() TensorRef {
	var t TensorRef
	if !r.Need(3) {
		return t
	}
	b, dt, nd := r.B[r.Off], r.B[r.Off+1], r.B[r.Off+2]
	t.Tag, t.Src = Tag(b&0xf), SourceKind(b>>4)
	switch {
	case !validTag(t.Tag):
		r.Fail("bad tag %d", t.Tag)
	case t.Src < SrcBoundaryExact || t.Src > SrcOwnOutput:
		r.Fail("bad source kind %d", t.Src)
	case dt == 0 || int(dt) >= len(dtypeNames):
		r.Off++
		r.Fail("bad dtype %d", dt)
	case nd&^stridesFlag > MaxDims:
		r.Off += 2
		r.Fail("rank %d exceeds %d", nd&^stridesFlag, MaxDims)
	}
	if r.Err != nil {
		return t
	}
	r.Off += 3
	slot := r.Uint32()
	if slot > math.MaxInt32 {
		r.Fail("slot %d out of range", slot)
	}
	t.Slot = int32(slot)
	// The delta, then the shape and the strides if stored.
	k := 1 + int(nd&^stridesFlag)
	if nd&stridesFlag != 0 {
		k += int(nd &^ stridesFlag)
	}
	for ; k > 0 && r.Err == nil; k-- {
		r.SkipVarint()
	}
	return t
}
