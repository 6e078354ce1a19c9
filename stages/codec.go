package stages

// codec.go holds what the image codecs share: the format's constants under
// the names stages uses, and the records made of stages types (layouts,
// tensor templates, views) over imagefmt's byte primitives. The byte layout
// of both images is documented in package imagefmt (go doc
// ./stages/imagefmt); codec_def_encode.go, codec_def_decode.go,
// codec_host.go and codec_run.go are the encoders and decoders.

import (
	"math"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// Image format constants.
const (
	DefinitionMagic   = imagefmt.DefinitionMagic
	RunImageMagic     = imagefmt.RunImageMagic
	DefinitionVersion = imagefmt.DefinitionVersion
	RunImageVersion   = imagefmt.RunImageVersion

	defHeaderSize = imagefmt.DefHeaderSize
	defSecAt      = imagefmt.DefSectionsAt // the definition header's section offsets
	runHeaderSize = imagefmt.RunHeaderSize
	nodeRecSize   = imagefmt.NodeRecordSize
	hashOff       = imagefmt.DefHashAt
	runHashOff    = imagefmt.RunHashAt
	runTotalOff   = imagefmt.RunTotalAt
	compactArg    = imagefmt.CompactArg
	stridesFlag   = imagefmt.StridesFlag
	manualDepFlag = imagefmt.ManualDepFlag
	// layoutFlags are the bits of a layout's ndims byte that are not its
	// rank.
	layoutFlags = stridesFlag | manualDepFlag
)

// ErrBadImage is wrapped by every Decode error.
var ErrBadImage = imagefmt.ErrBadImage

// Definition section indices.
const (
	dsFaninOff  = imagefmt.DefSecFaninOff
	dsFaninIdx  = imagefmt.DefSecFaninIdx
	dsFanoutOff = imagefmt.DefSecFanoutOff
	dsFanoutIdx = imagefmt.DefSecFanoutIdx
	dsExtOff    = imagefmt.DefSecExtOff
	dsExtIdx    = imagefmt.DefSecExtIdx
	dsNodes     = imagefmt.DefSecNodes
	dsTensors   = imagefmt.DefSecTensors
	dsScalars   = imagefmt.DefSecScalars
	dsRoots     = imagefmt.DefSecRoots
	dsBoundary  = imagefmt.DefSecBoundary
	dsPreds     = imagefmt.DefSecPredicates
	dsKey       = imagefmt.DefSecKey
	dsEnd       = imagefmt.DefSecEnd
	dsCount     = imagefmt.DefSecCount
)

// Run image section indices.
const (
	rsTasks   = imagefmt.RunSecTasks
	rsArgs    = imagefmt.RunSecArgs
	rsScalars = imagefmt.RunSecScalars
	rsFanin   = imagefmt.RunSecFanin
	rsRoots   = imagefmt.RunSecRoots
	rsGraphs  = imagefmt.RunSecGraphs
	rsEnd     = imagefmt.RunSecEnd
	rsCount   = imagefmt.RunSecCount
)

func badf(format string, args ...any) error { return imagefmt.Badf(format, args...) }

// imageHash is xxHash64 of b with the 8 bytes at off read as zero.
func imageHash(b []byte, off int) uint64 { return imagefmt.Hash(b, off) }

// ---------------------------------------------------------------- sizes

func uvLen(x uint64) int { return imagefmt.UvarintLen(x) }
func svLen(x int64) int  { return imagefmt.VarintLen(x) }

// contiguous reports whether v's strides are the row-major strides of its
// shape (then they are not stored).
func contiguous(v *View) bool {
	s := int64(1)
	for i := min(int(v.NDims), MaxDims) - 1; i >= 0; i-- {
		if v.Strides[i] != s {
			return false
		}
		s *= v.Shape[i]
	}
	return true
}

// layoutLen is the size of a layout: dtype, ndims, shape, [strides].
func layoutLen(v *View) int {
	n := 2
	nd := int(v.NDims)
	if nd > MaxDims {
		nd = MaxDims
	}
	for i := 0; i < nd; i++ {
		n += uvLen(uint64(v.Shape[i]))
	}
	if !contiguous(v) {
		for i := 0; i < nd; i++ {
			n += svLen(v.Strides[i])
		}
	}
	return n
}

func tensorRefLen(t *TensorRef) int {
	return 1 + layoutLen(&t.Layout) + uvLen(uint64(uint32(t.Slot))) + svLen(t.Delta)
}

// ---------------------------------------------------------------- writer

// writer writes records of stages types with imagefmt's primitives.
type writer struct{ imagefmt.Writer }

// layout writes dtype, ndims|flag, shape and (if not contiguous) strides.
func (w *writer) layout(v *View) {
	nd, c := w.layoutHead(v)
	w.layoutDims(v, nd, c)
}

func (w *writer) tensorRef(t *TensorRef) {
	w.U8(uint8(t.Tag) | uint8(t.Src)<<4)
	w.layoutSlotDelta(&t.Layout, uint64(uint32(t.Slot)), t.Delta)
}

// layoutSlotDelta is layout with a slot and delta between header and shape.
func (w *writer) layoutSlotDelta(v *View, slot uint64, delta int64) {
	nd, c := w.layoutHead(v)
	w.Uvarint(slot)
	w.Varint(delta)
	w.layoutDims(v, nd, c)
}

// layoutHead writes a layout's dtype and ndims|flag, and returns the dims
// written and whether the strides are the contiguous ones (then omitted).
func (w *writer) layoutHead(v *View) (nd uint8, contig bool) {
	nd = min(v.NDims, MaxDims)
	contig = contiguous(v)
	w.U8(uint8(v.DType))
	f := nd
	if !contig {
		f |= stridesFlag
	}
	if v.ManualDep {
		f |= manualDepFlag
	}
	w.U8(f)
	return nd, contig
}

// layoutDims writes a layout's shape and, unless contiguous, its strides.
func (w *writer) layoutDims(v *View, nd uint8, contig bool) {
	for i := 0; i < int(nd); i++ {
		w.Uvarint(uint64(v.Shape[i]))
	}
	if !contig {
		for i := 0; i < int(nd); i++ {
			w.Varint(v.Strides[i])
		}
	}
}

// dtypeFlags writes a root's dtype and flags byte.
func (w *writer) dtypeFlags(dt DType, manualDep bool) {
	w.U8(uint8(dt))
	if manualDep {
		w.U8(imagefmt.RootManualDep)
	} else {
		w.U8(0)
	}
}

func (w *writer) view(v *View) {
	w.Varint(int64(v.Root))
	w.Varint(v.Offset)
	w.layout(v)
}

// ---------------------------------------------------------------- reader

// reader reads records of stages types from one section with imagefmt's
// primitives (a sticky error: decoders check r.Err once per record).
type reader struct{ imagefmt.Reader }

func newReader(b []byte, sec string) reader { return reader{imagefmt.Reader{B: b, Section: sec}} }

// layoutHead reads dtype and ndims; the shape follows any middle fields.
func (r *reader) layoutHead(v *View) (strided bool) {
	dt := r.U8()
	nd := r.U8()
	if r.Err != nil {
		return false
	}
	strided = nd&stridesFlag != 0
	v.ManualDep = nd&manualDepFlag != 0
	nd &^= layoutFlags
	if dt == 0 || int(dt) >= len(dtypeNames) {
		r.Fail("bad dtype %d", dt)
		return false
	}
	if nd > MaxDims {
		r.Fail("rank %d exceeds %d", nd, MaxDims)
		return false
	}
	v.DType, v.NDims = DType(dt), nd
	return strided
}

// layoutTail reads shape and strides (or derives contiguous strides).
func (r *reader) layoutTail(v *View, strided bool) {
	if r.Err != nil {
		return
	}
	nd := int(v.NDims)
	for i := 0; i < nd; i++ {
		v.Shape[i] = r.Nonneg()
	}
	if strided {
		for i := 0; i < nd; i++ {
			v.Strides[i] = r.Varint()
		}
	} else {
		s := int64(1)
		for i := nd - 1; i >= 0; i-- {
			v.Strides[i] = s
			s *= v.Shape[i]
		}
	}
}

func validTag(t Tag) bool { return t >= TagInput && t <= TagNoDep }

func (r *reader) tensorRef(t *TensorRef) {
	b := r.U8()
	t.Tag, t.Src = Tag(b&0xf), SourceKind(b>>4)
	if r.Err == nil && !validTag(t.Tag) {
		r.Fail("bad tag %d", t.Tag)
	}
	if r.Err == nil && (t.Src < SrcBoundaryExact || t.Src > SrcOwnOutput) {
		r.Fail("bad source kind %d", t.Src)
	}
	strided := r.layoutHead(&t.Layout)
	slot := r.Uint32()
	if slot > math.MaxInt32 {
		r.Fail("slot %d out of range", slot)
	}
	t.Slot = int32(slot)
	t.Delta = r.Varint()
	r.layoutTail(&t.Layout, strided)
}

func (r *reader) view(v *View) {
	v.Root = RootID(r.Int32())
	v.Offset = r.Varint()
	strided := r.layoutHead(v)
	r.layoutTail(v, strided)
}

func validPredOp(op PredOp) bool { return op <= PredLE }
