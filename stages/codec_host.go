package stages

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// DecodeDefinitionHost verifies a Definition image's header, length,
// content hash and section table as DecodeDefinition does, and decodes only
// what a host replays it with: full_key, key, content hash, heap size, the
// boundary scalar count, the external dependency slots, and the node table
// (Nodes in full; their spans and predicate indexes name pools left out).
// The tensor templates are scanned for the boundary slots the body writes
// (written, in slot order, as Definition.WrittenSlots lists them) and not
// kept: the pools Tensors, Scalars, Fanin, Roots and Preds and the boundary
// signature stay nil.
//
// Why: a Definition loaded from disk goes to the device, which decodes and
// checks the whole image itself (npu: its header at upload, its records
// when it first replays it); decoding it in full on the host as well paid
// for the decode twice, and the host's copy (a
// 104-byte view per tensor template, predicate and boundary slot) was most
// of a load's cost. The host matches later calls against the signature of
// the key's first call, never the Definition's, so it needs neither. The
// content hash still covers every byte, so a torn or flipped file is caught
// here. An image DecodeDefinition accepts, this accepts, and agrees with it
// on every field it fills; the reverse does not hold (the pools' own checks
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
	d.Boundary, d.Preds = nil, nil
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
	d.Key = string(b[sec[dsKey]:sec[dsEnd]])
	return d, written, nil
}

// writtenSlots scans the tensor templates for the boundary slots the body
// writes, each record checked as DecodeDefinition checks its tag, source,
// dtype, rank and slot, and its varints for being well formed, then
// dropped: the slots written, in slot order.
func (h *defCounts) writtenSlots(b []byte) ([]int32, error) {
	wrote := make([]uint64, (h.nbound+63)/64)
	if !h.scanTensors(b, wrote) {
		// Something is wrong: the checked scan says what.
		return nil, h.scanTensorsChecked(b)
	}
	n := 0
	for _, w := range wrote {
		n += bits.OnesCount64(w)
	}
	if n == 0 {
		return nil, nil
	}
	written := make([]int32, 0, n)
	for i, w := range wrote {
		for ; w != 0; w &= w - 1 {
			written = append(written, int32(64*i+bits.TrailingZeros64(w)))
		}
	}
	return written, nil
}

// scanTensors is the tensor records' loop on the bytes, a load's hottest:
// it marks in wrote the boundary slots written and reports whether every
// record is well formed. A record is a tag and source byte, a dtype byte,
// a rank byte (with stridesFlag and manualDepFlag), the slot as a uvarint, then the delta
// and the shape (and the strides if flagged) as varints.
func (h *defCounts) scanTensors(b []byte, wrote []uint64) bool {
	off := 0
	for i := 0; i < h.ntens; i++ {
		if len(b)-off < 4 {
			return false
		}
		tb, dt, nd := b[off], b[off+1], b[off+2]
		tag, src, rank := Tag(tb&0xf), SourceKind(tb>>4), int(nd&^layoutFlags)
		if !validTag(tag) || src < SrcBoundaryExact || src > SrcOwnOutput || dt == 0 || int(dt) >= len(dtypeNames) || rank > MaxDims {
			return false
		}
		off += 3
		// The slot: a uvarint (encoding/binary's rules) that fits an
		// int32.
		var slot uint64
		for j, shift := 0, uint(0); ; j, shift = j+1, shift+7 {
			if off >= len(b) || j == binary.MaxVarintLen64 {
				return false
			}
			c := b[off]
			off++
			if c < 0x80 {
				if j == binary.MaxVarintLen64-1 && c > 1 {
					return false
				}
				slot |= uint64(c) << shift
				break
			}
			slot |= uint64(c&0x7f) << shift
		}
		if slot > math.MaxInt32 {
			return false
		}
		switch src {
		case SrcBoundaryExact, SrcBoundaryView:
			if slot >= uint64(h.nbound) {
				return false
			}
			if tag == TagInOut || tag == TagOutputExisting {
				wrote[slot/64] |= 1 << (slot % 64)
			}
		default:
			if slot >= uint64(h.nroots) {
				return false
			}
		}
		// The delta and the shape, and the strides if stored: varints
		// of at most 10 bytes, the tenth at most 1.
		k := 1 + rank
		if nd&stridesFlag != 0 {
			k += rank
		}
		for ; k > 0; k-- {
			j := 0
			for ; off+j < len(b) && b[off+j] >= 0x80; j++ {
				if j == binary.MaxVarintLen64-1 {
					return false
				}
			}
			if off+j >= len(b) || (j == binary.MaxVarintLen64-1 && b[off+j] > 1) {
				return false
			}
			off += j + 1
		}
	}
	return off == len(b)
}

// scanTensorsChecked is the tensor records' scan with every check's error,
// for an image scanTensors refused.
func (h *defCounts) scanTensorsChecked(b []byte) error {
	r := newReader(b, "tensor")
	for i := 0; i < h.ntens; i++ {
		t := r.skipTensorRef()
		if r.Err != nil {
			return r.Err
		}
		if err := h.checkRef(&t, "tensor", i); err != nil {
			return err
		}
	}
	r.Done()
	if r.Err != nil {
		return r.Err
	}
	panic("stages: the checked tensor scan accepts what the fast scan refused")
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
	case nd&^layoutFlags > MaxDims:
		r.Off += 2
		r.Fail("rank %d exceeds %d", nd&^layoutFlags, MaxDims)
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
	k := 1 + int(nd&^layoutFlags)
	if nd&stridesFlag != 0 {
		k += int(nd &^ layoutFlags)
	}
	for ; k > 0 && r.Err == nil; k-- {
		r.SkipVarint()
	}
	return t
}
