package stages

// codec.go turns the two host-to-device images into flat bytes and back.
//
// Both images are pointer-free, versioned and little-endian: a fixed header
// (magic, version, header size, a 64-bit content hash, counts, section
// offsets) followed by sections. Fixed-width sections (CSR arrays, the node
// table, u64 scalar pools) are plain little-endian arrays; variable-width
// records (tensor templates, views, roots, boundary slots, predicates) are
// written back to back with LEB128 varints (zig-zag for signed values), so a
// rank-2 contiguous tensor template costs ~8-14 bytes instead of the ~100 of
// a fixed five-dimension layout. Strides are stored only when they are not
// the contiguous row-major strides of the shape.
//
// Content hash: xxHash64 (seed 0, github.com/cespare/xxhash/v2) of the whole
// image with the 8-byte hash field set to zero. Decode checks the magic, the
// version, the header size, the total length, the hash, every section offset
// and every index and span inside the image, and returns an error (never
// panics) on bad bytes. Counts are checked against the bytes that carry them
// before anything is allocated, so a forged count cannot make Decode allocate
// more than a small multiple of the input size.
//
// Definition image, version 2 (offsets in bytes; version 2 added the
// external dependency slots):
//
//	 0  magic "HBGD"              4  u16 version        6  u16 header size (136)
//	 8  u64 full_key             16  u64 content_hash  24  i64 heap_bytes
//	32  u32 total_bytes          36  u32 nodes         40  u32 edges
//	44  u32 tensors              48  u32 scalars       52  u32 internal roots
//	56  u32 boundary tensors     60  u32 boundary scalars
//	64  u32 predicates           68  u32 key bytes
//	72  u32 external dependency slots                  76  u32 ext waits
//	80  u32 section offsets[14]: fanin_off, fanin_idx, fanout_off, fanout_idx,
//	    ext_off, ext_idx, nodes, tensors, scalars, roots, boundary,
//	    predicates, key, end
//
//	fanin CSR   u32 off[nodes+1], u32 producer[edges]   (producer < consumer)
//	fanout CSR  u32 off[nodes+1], u32 consumer[edges]   (derived from fanin,
//	            consumers ascending; Decode checks it matches)
//	ext CSR     u32 off[slots+1], u32 node[waits]: per external dependency
//	            slot, the nodes that wait on it (ascending)
//	node        40 B: u8 kind, u8 0, u16 0, i32 block_num, i32 kernel[3],
//	            u32 tensor_off, u32 tensor_n, u32 scalar_off, u32 scalar_n,
//	            u32 predicate (0 = none, else 1-based index)
//	tensor      u8 tag|src<<4, then a layout: u8 dtype, u8 ndims|0x80 if
//	            strides follow, uvarint slot, varint delta, uvarint shape[ndims],
//	            [varint strides[ndims]]
//	scalar      u8 0 + uvarint value (static) | u8 1 + uvarint slot (boundary;
//	            the record-time value is not stored)
//	root        u8 dtype, u8 flags (1 = manual_dep), uvarint elems,
//	            uvarint creator, uvarint heap_offset
//	boundary    u8 tag, layout (as tensor, slot field = alias_rep+1),
//	            uvarint root_elems
//	predicate   u8 op, tensor record, varint index, varint target
//	key         the graph key's bytes
//
// Run image, version 1:
//
//	 0  magic "HBGR"              4  u16 version        6  u16 header size (80)
//	 8  u64 content_hash         16  i64 heap_bytes    24  u32 total_bytes
//	28  u32 tasks  32 u32 args  36 u32 scalars  40 u32 fanin  44 u32 roots
//	48  u32 graphs
//	52  u32 section offsets[7]: tasks, args, scalars, fanin, roots, graphs, end
//
//	task        u8 kind, u8 flags (1 = predicated), varint kernel[3],
//	            varint block_num, uvarint args off,n, scalars off,n,
//	            fanin off,n, varint graph, [u8 op, view, varint index,
//	            varint target]
//	arg         u8 tag, view: varint root, varint offset, layout as above
//	            without slot/delta
//	scalar      u64
//	fanin       u32 task id
//	root        varint id, u8 dtype, u8 flags, uvarint elems, varint creator,
//	            uvarint addr
//	graph       varint task, u64 full_key, u64 def_hash, uvarint boundary
//	            off,n, scalars off,n, uvarint heap_base
//
// Images larger than 4 GiB are not representable (u32 offsets); a Definition
// costs ~150-300 bytes per node, so that is tens of millions of nodes.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Image format constants.
const (
	DefinitionMagic   = "HBGD"
	RunImageMagic     = "HBGR"
	DefinitionVersion = 2 // 2: external dependency slots
	RunImageVersion   = 2 // 2: Graph boundaries as (root, offset)

	defHeaderSize = 136
	defSecAt      = 80 // the definition header's section offsets
	runHeaderSize = 80
	nodeRecSize   = 40
	hashOff       = 8 + 8 // definition: after magic/version/hsize and full_key
	runHashOff    = 8
	// compactArg marks a Graph boundary arg sent as (root, offset) only.
	compactArg  = 0x80
	runTotalOff = 24 // after the hash and the heap size

	stridesFlag = 0x80
)

// ErrBadImage is wrapped by every Decode error.
var ErrBadImage = errors.New("bad image")

// Definition section indices.
const (
	dsFaninOff = iota
	dsFaninIdx
	dsFanoutOff
	dsFanoutIdx
	dsExtOff
	dsExtIdx
	dsNodes
	dsTensors
	dsScalars
	dsRoots
	dsBoundary
	dsPreds
	dsKey
	dsEnd
	dsCount
)

// Run image section indices.
const (
	rsTasks = iota
	rsArgs
	rsScalars
	rsFanin
	rsRoots
	rsGraphs
	rsEnd
	rsCount
)

// ---------------------------------------------------------------- sizes

func uvLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }
func svLen(x int64) int  { return uvLen(uint64(x<<1) ^ uint64(x>>63)) }

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

func align8(n int) int { return (n + 7) &^ 7 }

// ---------------------------------------------------------------- writer

type writer struct{ b []byte }

func (w *writer) u8(x uint8)   { w.b = append(w.b, x) }
func (w *writer) u16(x uint16) { w.b = binary.LittleEndian.AppendUint16(w.b, x) }
func (w *writer) u32(x uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, x) }
func (w *writer) u64(x uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, x) }
func (w *writer) uv(x uint64) {
	if x < 0x80 {
		w.b = append(w.b, byte(x))
		return
	}
	w.b = binary.AppendUvarint(w.b, x)
}
func (w *writer) sv(x int64) { w.uv(uint64(x<<1) ^ uint64(x>>63)) }
func (w *writer) pad8() {
	for len(w.b)&7 != 0 {
		w.b = append(w.b, 0)
	}
}

// layout writes dtype, ndims|flag, shape and (if not contiguous) strides.
func (w *writer) layout(v *View) {
	nd := v.NDims
	if nd > MaxDims {
		nd = MaxDims
	}
	c := contiguous(v)
	w.u8(uint8(v.DType))
	if c {
		w.u8(nd)
	} else {
		w.u8(nd | stridesFlag)
	}
	for i := 0; i < int(nd); i++ {
		w.uv(uint64(v.Shape[i]))
	}
	if !c {
		for i := 0; i < int(nd); i++ {
			w.sv(v.Strides[i])
		}
	}
}

func (w *writer) tensorRef(t *TensorRef) {
	w.u8(uint8(t.Tag) | uint8(t.Src)<<4)
	w.layoutSlotDelta(&t.Layout, uint64(uint32(t.Slot)), t.Delta)
}

// layoutSlotDelta is layout with a slot and delta between header and shape;
// written without a closure so the encoder does not allocate.
func (w *writer) layoutSlotDelta(v *View, slot uint64, delta int64) {
	nd := v.NDims
	if nd > MaxDims {
		nd = MaxDims
	}
	c := contiguous(v)
	w.u8(uint8(v.DType))
	if c {
		w.u8(nd)
	} else {
		w.u8(nd | stridesFlag)
	}
	w.uv(slot)
	w.sv(delta)
	for i := 0; i < int(nd); i++ {
		w.uv(uint64(v.Shape[i]))
	}
	if !c {
		for i := 0; i < int(nd); i++ {
			w.sv(v.Strides[i])
		}
	}
}

func (w *writer) view(v *View) {
	w.sv(int64(v.Root))
	w.sv(v.Offset)
	w.layout(v)
}

// ---------------------------------------------------------------- reader

// reader reads one section with a sticky error: after the first failure
// every read returns zero, so decoders check r.err once per record.
type reader struct {
	b   []byte
	off int
	err error
	sec string
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s section at byte %d: %s", ErrBadImage, r.sec, r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n > len(r.b)-r.off {
		r.fail("truncated (need %d bytes, %d left)", n, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) u8() uint8 {
	if !r.need(1) {
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	r.off += 4
	return binary.LittleEndian.Uint32(r.b[r.off-4:])
}

func (r *reader) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	r.off += 8
	return binary.LittleEndian.Uint64(r.b[r.off-8:])
}

func (r *reader) uv() uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.off += n
	return x
}

func (r *reader) sv() int64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.off += n
	return x
}

// i32 reads a signed varint that must fit an int32.
func (r *reader) i32() int32 {
	x := r.sv()
	if x < math.MinInt32 || x > math.MaxInt32 {
		r.fail("value %d out of int32 range", x)
		return 0
	}
	return int32(x)
}

// u32v reads an unsigned varint that must fit a uint32.
func (r *reader) u32v() uint32 {
	x := r.uv()
	if x > math.MaxUint32 {
		r.fail("value %d out of uint32 range", x)
		return 0
	}
	return uint32(x)
}

// nonneg reads an unsigned varint that must fit a non-negative int64.
func (r *reader) nonneg() int64 {
	x := r.uv()
	if x > math.MaxInt64 {
		r.fail("value %d out of range", x)
		return 0
	}
	return int64(x)
}

func (r *reader) done() {
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d trailing bytes", len(r.b)-r.off)
	}
}

// layoutHead reads dtype and ndims; the shape follows any middle fields.
func (r *reader) layoutHead(v *View) (strided bool) {
	dt := r.u8()
	nd := r.u8()
	if r.err != nil {
		return false
	}
	strided = nd&stridesFlag != 0
	nd &^= stridesFlag
	if dt == 0 || int(dt) >= len(dtypeNames) {
		r.fail("bad dtype %d", dt)
		return false
	}
	if nd > MaxDims {
		r.fail("rank %d exceeds %d", nd, MaxDims)
		return false
	}
	v.DType, v.NDims = DType(dt), nd
	return strided
}

// layoutTail reads shape and strides (or derives contiguous strides).
func (r *reader) layoutTail(v *View, strided bool) {
	if r.err != nil {
		return
	}
	nd := int(v.NDims)
	for i := 0; i < nd; i++ {
		v.Shape[i] = r.nonneg()
	}
	if strided {
		for i := 0; i < nd; i++ {
			v.Strides[i] = r.sv()
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
	b := r.u8()
	t.Tag, t.Src = Tag(b&0xf), SourceKind(b>>4)
	if r.err == nil && !validTag(t.Tag) {
		r.fail("bad tag %d", t.Tag)
	}
	if r.err == nil && (t.Src < SrcBoundaryExact || t.Src > SrcOwnOutput) {
		r.fail("bad source kind %d", t.Src)
	}
	strided := r.layoutHead(&t.Layout)
	slot := r.u32v()
	if slot > math.MaxInt32 {
		r.fail("slot %d out of range", slot)
	}
	t.Slot = int32(slot)
	t.Delta = r.sv()
	r.layoutTail(&t.Layout, strided)
}

func (r *reader) view(v *View) {
	v.Root = RootID(r.i32())
	v.Offset = r.sv()
	strided := r.layoutHead(v)
	r.layoutTail(v, strided)
}

func validPredOp(op PredOp) bool { return op <= PredLE }

// ---------------------------------------------------------------- hashing

// imageHash is xxHash64 of b with the 8 bytes at off read as zero.
func imageHash(b []byte, off int) uint64 {
	var zero [8]byte
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(b[:off])
	_, _ = d.Write(zero[:])
	_, _ = d.Write(b[off+8:])
	return d.Sum64()
}

// ---------------------------------------------------------------- Definition

// EncodeDefinition builds d's flat device image, sets d.ContentHash to the
// image's content hash and returns the image. It sizes the image first and
// allocates once. The fanin CSR is written in node order from each node's
// Fanin span, and the fanout CSR is derived from it in place.
func EncodeDefinition(d *Definition) []byte {
	n := len(d.Nodes)
	edges := 0
	for i := range d.Nodes {
		edges += int(d.Nodes[i].Fanin.N)
	}
	npred := 0
	for i := range d.Nodes {
		if d.Nodes[i].Pred.Valid {
			npred++
		}
	}
	var sec [dsCount]int
	off := defHeaderSize
	sec[dsFaninOff] = off
	off += 4 * (n + 1)
	sec[dsFaninIdx] = off
	off += 4 * edges
	sec[dsFanoutOff] = off
	off += 4 * (n + 1)
	sec[dsFanoutIdx] = off
	off += 4 * edges
	waits := 0
	for _, w := range d.ExtDeps {
		waits += len(w)
	}
	sec[dsExtOff] = off
	off += 4 * (len(d.ExtDeps) + 1)
	sec[dsExtIdx] = off
	off += 4 * waits
	off = align8(off)
	sec[dsNodes] = off
	off += nodeRecSize * n
	sec[dsTensors] = off
	for i := range d.Tensors {
		off += tensorRefLen(&d.Tensors[i])
	}
	sec[dsScalars] = off
	for i := range d.Scalars {
		s := &d.Scalars[i]
		if s.Boundary {
			off += 1 + uvLen(uint64(uint32(s.Slot)))
		} else {
			off += 1 + uvLen(s.Value)
		}
	}
	sec[dsRoots] = off
	for i := range d.Roots {
		rt := &d.Roots[i]
		off += 2 + uvLen(uint64(rt.Elems)) + uvLen(uint64(rt.Creator)) + uvLen(uint64(rt.HeapOffset))
	}
	sec[dsBoundary] = off
	for i := range d.Boundary {
		b := &d.Boundary[i]
		off += 1 + layoutLen(&b.Layout) + uvLen(uint64(int64(b.AliasRep)+1)) + svLen(0) + uvLen(uint64(b.RootElems))
	}
	sec[dsPreds] = off
	for i := range d.Nodes {
		if p := &d.Nodes[i].Pred; p.Valid {
			off += 1 + tensorRefLen(&p.Tensor) + svLen(p.Index) + svLen(p.Target)
		}
	}
	sec[dsKey] = off
	off += len(d.Key)
	sec[dsEnd] = off
	total := off

	w := writer{b: make([]byte, 0, total)}
	w.b = append(w.b, DefinitionMagic...)
	w.u16(DefinitionVersion)
	w.u16(defHeaderSize)
	w.u64(d.FullKey)
	w.u64(0) // content hash, filled below
	w.u64(uint64(d.HeapBytes))
	w.u32(uint32(total))
	w.u32(uint32(n))
	w.u32(uint32(edges))
	w.u32(uint32(len(d.Tensors)))
	w.u32(uint32(len(d.Scalars)))
	w.u32(uint32(len(d.Roots)))
	w.u32(uint32(len(d.Boundary)))
	w.u32(uint32(d.BoundaryScalars))
	w.u32(uint32(npred))
	w.u32(uint32(len(d.Key)))
	w.u32(uint32(len(d.ExtDeps)))
	w.u32(uint32(waits))
	for _, s := range sec {
		w.u32(uint32(s))
	}
	w.pad8()

	// fanin CSR
	acc := uint32(0)
	w.u32(0)
	for i := range d.Nodes {
		acc += d.Nodes[i].Fanin.N
		w.u32(acc)
	}
	for i := range d.Nodes {
		f := d.Nodes[i].Fanin
		for _, p := range d.Fanin[f.Off : f.Off+f.N] {
			w.u32(p)
		}
	}
	// fanout CSR, built in place: count, prefix-sum, scatter using the
	// offsets as cursors, then shift the offsets back by one slot.
	fo := len(w.b)
	w.b = w.b[:fo+4*(n+1)+4*edges]
	clear(w.b[fo:])
	offs := w.b[fo : fo+4*(n+1)]
	idx := w.b[fo+4*(n+1):]
	get := func(i int) uint32 { return binary.LittleEndian.Uint32(offs[4*i:]) }
	put := func(i int, v uint32) { binary.LittleEndian.PutUint32(offs[4*i:], v) }
	for i := range d.Nodes {
		f := d.Nodes[i].Fanin
		for _, p := range d.Fanin[f.Off : f.Off+f.N] {
			if int(p) < n {
				put(int(p)+1, get(int(p)+1)+1)
			}
		}
	}
	for i := 1; i <= n; i++ {
		put(i, get(i)+get(i-1))
	}
	for c := range d.Nodes {
		f := d.Nodes[c].Fanin
		for _, p := range d.Fanin[f.Off : f.Off+f.N] {
			if int(p) < n {
				cur := get(int(p))
				binary.LittleEndian.PutUint32(idx[4*cur:], uint32(c))
				put(int(p), cur+1)
			}
		}
	}
	for i := n; i > 0; i-- {
		put(i, get(i-1))
	}
	put(0, 0)
	// ext CSR
	acc = 0
	w.u32(0)
	for _, ws := range d.ExtDeps {
		acc += uint32(len(ws))
		w.u32(acc)
	}
	for _, ws := range d.ExtDeps {
		for _, nd := range ws {
			w.u32(nd)
		}
	}
	w.pad8()

	// node table
	pslot := uint32(0)
	for i := range d.Nodes {
		nd := &d.Nodes[i]
		w.u8(uint8(nd.Kind))
		w.u8(0)
		w.u16(0)
		w.u32(uint32(nd.BlockNum))
		for k := 0; k < 3; k++ {
			w.u32(uint32(nd.Kernel[k]))
		}
		w.u32(nd.Tensors.Off)
		w.u32(nd.Tensors.N)
		w.u32(nd.Scalars.Off)
		w.u32(nd.Scalars.N)
		if nd.Pred.Valid {
			pslot++
			w.u32(pslot)
		} else {
			w.u32(0)
		}
	}
	for i := range d.Tensors {
		w.tensorRef(&d.Tensors[i])
	}
	for i := range d.Scalars {
		s := &d.Scalars[i]
		if s.Boundary {
			w.u8(1)
			w.uv(uint64(uint32(s.Slot)))
		} else {
			w.u8(0)
			w.uv(s.Value)
		}
	}
	for i := range d.Roots {
		rt := &d.Roots[i]
		w.u8(uint8(rt.DType))
		if rt.ManualDep {
			w.u8(1)
		} else {
			w.u8(0)
		}
		w.uv(uint64(rt.Elems))
		w.uv(uint64(rt.Creator))
		w.uv(uint64(rt.HeapOffset))
	}
	for i := range d.Boundary {
		b := &d.Boundary[i]
		w.u8(uint8(b.Tag))
		w.layoutSlotDelta(&b.Layout, uint64(int64(b.AliasRep)+1), 0)
		w.uv(uint64(b.RootElems))
	}
	for i := range d.Nodes {
		if p := &d.Nodes[i].Pred; p.Valid {
			w.u8(uint8(p.Op))
			w.tensorRef(&p.Tensor)
			w.sv(p.Index)
			w.sv(p.Target)
		}
	}
	w.b = append(w.b, d.Key...)
	if len(w.b) != total {
		panic(fmt.Sprintf("stages: definition image sized %d, wrote %d", total, len(w.b)))
	}
	h := imageHash(w.b, hashOff)
	binary.LittleEndian.PutUint64(w.b[hashOff:], h)
	d.ContentHash = h
	return w.b
}

// DefinitionHash returns the content hash recorded in a Definition image's
// header without decoding or verifying it (0 if b is too short).
func DefinitionHash(b []byte) uint64 {
	if len(b) < hashOff+8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[hashOff:])
}

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadImage, fmt.Sprintf(format, args...))
}

// checkHeader verifies magic, version, header size, total length and hash.
func checkHeader(b []byte, magic string, version uint16, hsize int, totalOff, hOff int, what string) error {
	if len(b) < hsize {
		return badf("%s image of %d bytes is shorter than its %d-byte header", what, len(b), hsize)
	}
	if string(b[:4]) != magic {
		return badf("%s image magic %q, want %q", what, b[:4], magic)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != version {
		return badf("%s image version %d, this device reads version %d", what, v, version)
	}
	if h := binary.LittleEndian.Uint16(b[6:]); int(h) != hsize {
		return badf("%s image header size %d, want %d", what, h, hsize)
	}
	if t := binary.LittleEndian.Uint32(b[totalOff:]); uint64(t) != uint64(len(b)) {
		return badf("%s image says %d bytes, got %d", what, t, len(b))
	}
	want := binary.LittleEndian.Uint64(b[hOff:])
	if got := imageHash(b, hOff); got != want {
		return badf("%s image content hash %#016x does not verify (computed %#016x)", what, want, got)
	}
	return nil
}

// sections reads and checks k+1 section offsets: non-decreasing, inside
// [hsize, total], the last equal to total.
func sections(b []byte, at, k, hsize int, what string) ([]int, error) {
	s := make([]int, k)
	prev := hsize
	for i := 0; i < k; i++ {
		v := int(binary.LittleEndian.Uint32(b[at+4*i:]))
		if v < prev || v > len(b) {
			return nil, badf("%s image section %d offset %d out of order or out of bounds (previous %d, image %d bytes)", what, i, v, prev, len(b))
		}
		s[i] = v
		prev = v
	}
	if s[k-1] != len(b) {
		return nil, badf("%s image sections end at %d, image is %d bytes", what, s[k-1], len(b))
	}
	return s, nil
}

// DecodeDefinition verifies and decodes a Definition image.
func DecodeDefinition(b []byte) (*Definition, error) {
	if err := checkHeader(b, DefinitionMagic, DefinitionVersion, defHeaderSize, 32, hashOff, "definition"); err != nil {
		return nil, err
	}
	return decodeDefinition(b)
}

// decodeDefinition decodes a Definition image whose header has been checked.
func decodeDefinition(b []byte) (*Definition, error) {
	le := binary.LittleEndian
	h, sec, err := defLayout(b)
	if err != nil {
		return nil, err
	}
	d := &Definition{
		FullKey:         le.Uint64(b[8:]),
		ContentHash:     le.Uint64(b[hashOff:]),
		HeapBytes:       h.heapBytes,
		BoundaryScalars: h.nbsc,
	}
	n, edges, ntens, nsc, nroots, nbound, npred := h.nodes, h.edges, h.ntens, h.nsc, h.nroots, h.nbound, h.npred
	nbsc := uint32(h.nbsc)

	// Fanin CSR: offsets start at 0, never decrease, end at edges;
	// producers precede their consumer (node order is topological, so no
	// cycle can be expressed).
	fo := b[sec[dsFaninOff]:]
	fi := b[sec[dsFaninIdx]:]
	if le.Uint32(fo) != 0 || int(le.Uint32(fo[4*n:])) != edges {
		return nil, badf("definition fanin CSR offsets do not span [0, %d)", edges)
	}
	d.Nodes = make([]NodeDesc, n)
	d.Fanin = make([]uint32, edges)
	for i := 0; i < n; i++ {
		lo, hi := le.Uint32(fo[4*i:]), le.Uint32(fo[4*i+4:])
		if hi < lo || int(hi) > edges {
			return nil, badf("definition fanin CSR offsets of node %d are [%d, %d) of %d", i, lo, hi, edges)
		}
		d.Nodes[i].Fanin = Span{Off: lo, N: hi - lo}
		for e := lo; e < hi; e++ {
			p := le.Uint32(fi[4*e:])
			if int(p) >= i {
				return nil, badf("definition node %d has fanin %d: a producer must precede its consumer (a later node or a cycle)", i, p)
			}
			d.Fanin[e] = p
		}
	}
	// Fanout CSR must be the transpose of fanin, consumers ascending.
	oo := b[sec[dsFanoutOff]:]
	oi := b[sec[dsFanoutIdx]:]
	if le.Uint32(oo) != 0 || int(le.Uint32(oo[4*n:])) != edges {
		return nil, badf("definition fanout CSR offsets do not span [0, %d)", edges)
	}
	// Check: walking consumers in order, each (p, c) edge must be the next
	// unused entry of p's fanout list. Cursor storage reuses a count array.
	cur := make([]uint32, n)
	for i := 0; i < n; i++ {
		lo, hi := le.Uint32(oo[4*i:]), le.Uint32(oo[4*i+4:])
		if hi < lo || int(hi) > edges {
			return nil, badf("definition fanout CSR offsets of node %d are [%d, %d) of %d", i, lo, hi, edges)
		}
		cur[i] = lo
	}
	for c := 0; c < n; c++ {
		s := d.Nodes[c].Fanin
		for _, p := range d.Fanin[s.Off : s.Off+s.N] {
			if cur[p] >= le.Uint32(oo[4*p+4:]) || le.Uint32(oi[4*cur[p]:]) != uint32(c) {
				return nil, badf("definition fanout CSR does not match its fanin CSR at edge %d -> %d", p, c)
			}
			cur[p]++
		}
	}
	for p := 0; p < n; p++ {
		if cur[p] != le.Uint32(oo[4*p+4:]) {
			return nil, badf("definition fanout CSR lists extra consumers of node %d", p)
		}
	}

	if d.ExtDeps, err = decodeExtDeps(b, sec, h); err != nil {
		return nil, err
	}

	// Node table.
	preds := make([]uint32, n)
	nb := b[sec[dsNodes]:]
	for i := 0; i < n; i++ {
		rec := nb[nodeRecSize*i:]
		nd := &d.Nodes[i]
		nd.Kind = Kind(rec[0])
		if nd.Kind < KindAIC || nd.Kind > KindAlloc {
			return nil, badf("definition node %d has kind %d (want aic, aiv, mix, dummy or alloc; a GRAPH node cannot nest)", i, rec[0])
		}
		nd.BlockNum = int32(le.Uint32(rec[4:]))
		for k := 0; k < 3; k++ {
			nd.Kernel[k] = KernelID(int32(le.Uint32(rec[8+4*k:])))
		}
		nd.Tensors = Span{Off: le.Uint32(rec[20:]), N: le.Uint32(rec[24:])}
		nd.Scalars = Span{Off: le.Uint32(rec[28:]), N: le.Uint32(rec[32:])}
		preds[i] = le.Uint32(rec[36:])
		if uint64(nd.Tensors.Off)+uint64(nd.Tensors.N) > uint64(ntens) {
			return nil, badf("definition node %d tensors [%d, +%d) exceed %d tensors", i, nd.Tensors.Off, nd.Tensors.N, ntens)
		}
		if uint64(nd.Scalars.Off)+uint64(nd.Scalars.N) > uint64(nsc) {
			return nil, badf("definition node %d scalars [%d, +%d) exceed %d scalars", i, nd.Scalars.Off, nd.Scalars.N, nsc)
		}
		if int(preds[i]) > npred {
			return nil, badf("definition node %d names predicate %d of %d", i, preds[i], npred)
		}
	}

	// Tensor templates.
	d.Tensors = make([]TensorRef, ntens)
	r := reader{b: b[sec[dsTensors]:sec[dsScalars]], sec: "tensor"}
	for i := range d.Tensors {
		r.tensorRef(&d.Tensors[i])
		if r.err != nil {
			return nil, r.err
		}
		if err := h.checkRef(&d.Tensors[i], "tensor", i); err != nil {
			return nil, err
		}
	}
	r.done()
	if r.err != nil {
		return nil, r.err
	}

	// Scalars.
	d.Scalars = make([]ScalarRef, nsc)
	r = reader{b: b[sec[dsScalars]:sec[dsRoots]], sec: "scalar"}
	for i := range d.Scalars {
		s := &d.Scalars[i]
		switch r.u8() {
		case 0:
			s.Slot, s.Value = -1, r.uv()
		case 1:
			slot := r.u32v()
			if r.err == nil && slot >= nbsc {
				return nil, badf("definition scalar %d names boundary scalar %d of %d", i, slot, nbsc)
			}
			s.Boundary, s.Slot = true, int32(slot)
		default:
			r.fail("bad scalar source")
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	r.done()
	if r.err != nil {
		return nil, r.err
	}

	// Internal roots.
	d.Roots = make([]InternalRoot, nroots)
	r = reader{b: b[sec[dsRoots]:sec[dsBoundary]], sec: "root"}
	for i := range d.Roots {
		rt := &d.Roots[i]
		dt := r.u8()
		fl := r.u8()
		rt.Elems = r.nonneg()
		cr := r.u32v()
		rt.HeapOffset = r.nonneg()
		if r.err != nil {
			return nil, r.err
		}
		if dt == 0 || int(dt) >= len(dtypeNames) || fl > 1 {
			return nil, badf("definition internal root %d has dtype %d flags %d", i, dt, fl)
		}
		rt.DType, rt.ManualDep, rt.Creator = DType(dt), fl == 1, cr
		if int(cr) >= n {
			return nil, badf("definition internal root %d has creator node %d of %d", i, cr, n)
		}
		if rt.Elems > math.MaxInt64/8 || rt.HeapOffset > d.HeapBytes || rt.Elems*rt.DType.Size() > d.HeapBytes-rt.HeapOffset {
			return nil, badf("definition internal root %d ([%d, +%d elems of %s)) exceeds the %d-byte heap", i, rt.HeapOffset, rt.Elems, rt.DType, d.HeapBytes)
		}
	}
	r.done()
	if r.err != nil {
		return nil, r.err
	}
	// Internal deltas stay inside their root.
	for i := range d.Tensors {
		t := &d.Tensors[i]
		if (t.Src == SrcInternal || t.Src == SrcOwnOutput) && (t.Delta < 0 || t.Delta > d.Roots[t.Slot].Elems) {
			return nil, badf("definition tensor %d offset %d is outside internal root %d (%d elems)", i, t.Delta, t.Slot, d.Roots[t.Slot].Elems)
		}
	}

	// Boundary signature.
	if d.Boundary, err = decodeBoundary(b[sec[dsBoundary]:sec[dsPreds]], nbound); err != nil {
		return nil, err
	}

	pr, err := h.predicates(b[sec[dsPreds]:sec[dsKey]], npred)
	if err != nil {
		return nil, err
	}
	for i := range d.Nodes {
		if k := preds[i]; k > 0 {
			d.Nodes[i].Pred = pr[k-1]
		}
	}
	d.Key = string(b[sec[dsKey]:sec[dsEnd]])
	return d, nil
}

// ---------------------------------------------------------------- run image

// EncodeRunImage encodes a run image into a new buffer.
func EncodeRunImage(img *RunImage) []byte { return AppendRunImage(nil, img) }

// AppendRunImage encodes img into dst's storage (dst's contents are
// discarded) and returns the image. A caller that ships one image per pass
// passes back the previous pass's buffer once the device has copied it, so a
// warm pass encodes in one pass over the image with no allocation.
func AppendRunImage(dst []byte, img *RunImage) []byte {
	w := writer{b: dst[:0]}
	w.b = append(w.b, RunImageMagic...)
	w.u16(RunImageVersion)
	w.u16(runHeaderSize)
	w.u64(0) // content hash, set last
	w.u64(uint64(img.HeapBytes))
	w.u32(0) // total, set last
	w.u32(uint32(len(img.Tasks)))
	w.u32(uint32(len(img.Args)))
	w.u32(uint32(len(img.Scalars)))
	w.u32(uint32(len(img.Fanin)))
	w.u32(uint32(len(img.Roots)))
	w.u32(uint32(len(img.Graphs)))
	secAt := len(w.b)
	for range rsCount {
		w.u32(0) // section offsets, set as each section starts
	}
	if len(w.b) != runHeaderSize {
		panic(fmt.Sprintf("stages: run image header is %d bytes, want %d", len(w.b), runHeaderSize))
	}
	mark := func(sec int) { binary.LittleEndian.PutUint32(w.b[secAt+4*sec:], uint32(len(w.b))) }
	mark(rsTasks)
	for i := range img.Tasks {
		t := &img.Tasks[i]
		w.u8(uint8(t.Kind))
		if t.Pred.Valid {
			w.u8(1)
		} else {
			w.u8(0)
		}
		for k := 0; k < 3; k++ {
			w.sv(int64(t.Kernel[k]))
		}
		w.sv(int64(t.BlockNum))
		w.uv(uint64(t.Args.Off))
		w.uv(uint64(t.Args.N))
		w.uv(uint64(t.Scalars.Off))
		w.uv(uint64(t.Scalars.N))
		w.uv(uint64(t.Fanin.Off))
		w.uv(uint64(t.Fanin.N))
		w.sv(int64(t.Graph))
		if t.Pred.Valid {
			w.u8(uint8(t.Pred.Op))
			w.view(&t.Pred.View)
			w.sv(t.Pred.Index)
			w.sv(t.Pred.Target)
		}
	}
	mark(rsArgs)
	// A Graph submission's boundary travels as (root, offset) pairs: the
	// rest of each view (dtype, shape, strides) is fixed by the Definition's
	// boundary signature, which the host matched before replaying and the
	// device holds. Graph boundary spans come in increasing order.
	gi := 0
	for i := range img.Args {
		for gi < len(img.Graphs) && uint32(i) >= img.Graphs[gi].Boundary.Off+img.Graphs[gi].Boundary.N {
			gi++
		}
		a := &img.Args[i]
		if gi < len(img.Graphs) && uint32(i) >= img.Graphs[gi].Boundary.Off {
			w.u8(uint8(a.Tag) | compactArg)
			w.sv(int64(a.View.Root))
			w.sv(a.View.Offset)
			continue
		}
		w.u8(uint8(a.Tag))
		w.view(&a.View)
	}
	w.pad8()
	mark(rsScalars)
	for _, s := range img.Scalars {
		w.u64(s)
	}
	mark(rsFanin)
	for _, f := range img.Fanin {
		w.u32(uint32(f))
	}
	mark(rsRoots)
	for i := range img.Roots {
		rt := &img.Roots[i]
		w.sv(int64(rt.ID))
		w.u8(uint8(rt.DType))
		if rt.ManualDep {
			w.u8(1)
		} else {
			w.u8(0)
		}
		w.uv(uint64(rt.Elems))
		w.sv(int64(rt.Creator))
		w.uv(rt.Addr)
	}
	mark(rsGraphs)
	for i := range img.Graphs {
		g := &img.Graphs[i]
		w.sv(int64(g.Task))
		w.u64(g.FullKey)
		w.u64(g.DefHash)
		w.uv(uint64(g.Boundary.Off))
		w.uv(uint64(g.Boundary.N))
		w.uv(uint64(g.Scalars.Off))
		w.uv(uint64(g.Scalars.N))
		w.uv(g.HeapBase)
	}
	mark(rsEnd)
	binary.LittleEndian.PutUint32(w.b[runTotalOff:], uint32(len(w.b)))
	binary.LittleEndian.PutUint64(w.b[runHashOff:], imageHash(w.b, runHashOff))
	return w.b
}

// DecodeRunImage verifies and decodes a run image. It checks every span and
// index inside the image (args, scalars and fanin spans inside their pools,
// fanin spans disjoint and in task order, fanin task ids and Graph indices
// in range, Graph boundaries disjoint, in Graph order and equal to their
// GRAPH task's args, and layout-less args exactly the boundary slots); the
// device checks the rest (topological order, roots, Definitions, boundaries).
func DecodeRunImage(b []byte) (*RunImage, error) {
	if err := checkHeader(b, RunImageMagic, RunImageVersion, runHeaderSize, 24, runHashOff, "run"); err != nil {
		return nil, err
	}
	return decodeRunImage(b)
}

func decodeRunImage(b []byte) (*RunImage, error) {
	le := binary.LittleEndian
	img := &RunImage{HeapBytes: int64(le.Uint64(b[16:]))}
	nt := int(le.Uint32(b[28:]))
	na := int(le.Uint32(b[32:]))
	ns := int(le.Uint32(b[36:]))
	nf := int(le.Uint32(b[40:]))
	nr := int(le.Uint32(b[44:]))
	ng := int(le.Uint32(b[48:]))
	if img.HeapBytes < 0 {
		return nil, badf("run image heap bytes %d negative", img.HeapBytes)
	}
	sec, err := sections(b, 52, rsCount, runHeaderSize, "run")
	if err != nil {
		return nil, err
	}
	secLen := func(i int) int { return sec[i+1] - sec[i] }
	if uint64(secLen(rsScalars)) != 8*uint64(ns) || uint64(secLen(rsFanin)) != 4*uint64(nf) ||
		nt*13 > secLen(rsTasks) || na*3 > secLen(rsArgs) || nr*6 > secLen(rsRoots) || ng*22 > secLen(rsGraphs) {
		return nil, badf("run image section sizes do not match its counts (%d tasks, %d args, %d scalars, %d fanin, %d roots, %d graphs)", nt, na, ns, nf, nr, ng)
	}
	span := func(s Span, n int, what string, i int) error {
		if uint64(s.Off)+uint64(s.N) > uint64(n) {
			return badf("run image task %d %s [%d, +%d) exceed the pool of %d", i, what, s.Off, s.N, n)
		}
		return nil
	}
	img.Tasks = make([]TaskDesc, nt)
	var faninEnd uint32
	r := reader{b: b[sec[rsTasks]:sec[rsArgs]], sec: "task"}
	for i := range img.Tasks {
		t := &img.Tasks[i]
		t.Kind = Kind(r.u8())
		fl := r.u8()
		for k := 0; k < 3; k++ {
			t.Kernel[k] = KernelID(r.i32())
		}
		t.BlockNum = r.i32()
		t.Args = Span{Off: r.u32v(), N: r.u32v()}
		t.Scalars = Span{Off: r.u32v(), N: r.u32v()}
		t.Fanin = Span{Off: r.u32v(), N: r.u32v()}
		t.Graph = r.i32()
		if fl&1 != 0 {
			t.Pred.Valid = true
			t.Pred.Op = PredOp(r.u8())
			r.view(&t.Pred.View)
			t.Pred.Index = r.sv()
			t.Pred.Target = r.sv()
		}
		if r.err != nil {
			return nil, r.err
		}
		if fl > 1 {
			return nil, badf("run image task %d has flags %d", i, fl)
		}
		if t.Kind < KindAIC || t.Kind > KindGraph {
			return nil, badf("run image task %d has kind %d", i, t.Kind)
		}
		if t.Pred.Valid && !validPredOp(t.Pred.Op) {
			return nil, badf("run image task %d predicate op %d", i, t.Pred.Op)
		}
		if err := span(t.Args, na, "args", i); err != nil {
			return nil, err
		}
		if err := span(t.Scalars, ns, "scalars", i); err != nil {
			return nil, err
		}
		if err := span(t.Fanin, nf, "fanin", i); err != nil {
			return nil, err
		}
		// Fanin spans are disjoint and in task order, as the host appends
		// them: overlapping spans would count more edges than the pool
		// holds, and the device sizes its fanout CSR by the pool.
		if t.Fanin.N > 0 {
			if t.Fanin.Off < faninEnd {
				return nil, badf("run image task %d fanin [%d, +%d) overlaps an earlier task's (which end at %d)", i, t.Fanin.Off, t.Fanin.N, faninEnd)
			}
			faninEnd = t.Fanin.Off + t.Fanin.N
		}
		if t.Graph < -1 || int(t.Graph) >= ng {
			return nil, badf("run image task %d names graph submission %d of %d", i, t.Graph, ng)
		}
	}
	r.done()
	if r.err != nil {
		return nil, r.err
	}
	img.Args = make([]Arg, na)
	r = reader{b: b[sec[rsArgs]:sec[rsScalars]], sec: "arg"}
	// compact[i] marks arg i as sent layout-less; the Graph section below
	// checks that these are exactly the Graph boundary slots.
	compact := make([]bool, na)
	for i := range img.Args {
		a := &img.Args[i]
		tag := r.u8()
		if tag&compactArg != 0 {
			// Layout left unset (DTypeInvalid): it is the Definition's.
			a.View.Root = RootID(r.i32())
			a.View.Offset = r.sv()
			compact[i] = true
		} else {
			r.view(&a.View)
		}
		a.Tag = Tag(tag &^ compactArg)
		if r.err != nil {
			return nil, r.err
		}
		if !validTag(a.Tag) {
			return nil, badf("run image arg %d has tag %d", i, a.Tag)
		}
	}
	// The args section may carry up to 7 bytes of alignment padding.
	if rest := len(r.b) - r.off; rest > 7 {
		return nil, badf("run image args section has %d trailing bytes", rest)
	}
	img.Scalars = make([]uint64, ns)
	sb := b[sec[rsScalars]:]
	for i := range img.Scalars {
		img.Scalars[i] = le.Uint64(sb[8*i:])
	}
	img.Fanin = make([]TaskID, nf)
	fb := b[sec[rsFanin]:]
	for i := range img.Fanin {
		v := le.Uint32(fb[4*i:])
		img.Fanin[i] = TaskID(int32(v))
	}
	for i := range img.Tasks {
		s := img.Tasks[i].Fanin
		for _, f := range img.Fanin[s.Off : s.Off+s.N] {
			if f < 0 || int(f) >= nt {
				return nil, badf("run image task %d fanin names task %d, which is not in the image (%d tasks)", i, f, nt)
			}
		}
	}
	img.Roots = make([]RootDesc, nr)
	r = reader{b: b[sec[rsRoots]:sec[rsGraphs]], sec: "root"}
	for i := range img.Roots {
		rt := &img.Roots[i]
		rt.ID = RootID(r.i32())
		dt := r.u8()
		fl := r.u8()
		rt.Elems = r.nonneg()
		rt.Creator = TaskID(r.i32())
		rt.Addr = r.uv()
		if r.err != nil {
			return nil, r.err
		}
		if dt == 0 || int(dt) >= len(dtypeNames) || fl > 1 {
			return nil, badf("run image root %d has dtype %d flags %d", i, dt, fl)
		}
		rt.DType, rt.ManualDep = DType(dt), fl == 1
		if rt.Creator < NoTask || int(rt.Creator) >= nt {
			return nil, badf("run image root %d has creator task %d of %d", i, rt.Creator, nt)
		}
	}
	r.done()
	if r.err != nil {
		return nil, r.err
	}
	img.Graphs = make([]GraphSubmission, ng)
	r = reader{b: b[sec[rsGraphs]:sec[rsEnd]], sec: "graph"}
	// Boundary spans come in Graph order and do not overlap, as the host
	// appends them (the encoder relies on it); boundEnd is where the last
	// one ended, walking the args from there.
	var boundEnd uint32
	for i := range img.Graphs {
		g := &img.Graphs[i]
		g.Task = TaskID(r.i32())
		g.FullKey = r.u64()
		g.DefHash = r.u64()
		g.Boundary = Span{Off: r.u32v(), N: r.u32v()}
		g.Scalars = Span{Off: r.u32v(), N: r.u32v()}
		g.HeapBase = r.uv()
		if r.err != nil {
			return nil, r.err
		}
		if g.Task < 0 || int(g.Task) >= nt || img.Tasks[g.Task].Graph != int32(i) {
			return nil, badf("run image graph submission %d names task %d, whose descriptor does not point back to it", i, g.Task)
		}
		if uint64(g.Boundary.Off)+uint64(g.Boundary.N) > uint64(na) || uint64(g.Scalars.Off)+uint64(g.Scalars.N) > uint64(ns) {
			return nil, badf("run image graph submission %d boundary or scalars exceed their pools", i)
		}
		if t := &img.Tasks[g.Task]; t.Args != g.Boundary {
			return nil, badf("run image graph submission %d boundary [%d, +%d) is not its GRAPH task %d's args [%d, +%d)", i, g.Boundary.Off, g.Boundary.N, g.Task, t.Args.Off, t.Args.N)
		}
		if g.Boundary.N == 0 {
			continue
		}
		if g.Boundary.Off < boundEnd {
			return nil, badf("run image graph submission %d boundary [%d, +%d) overlaps or precedes an earlier submission's (which end at %d)", i, g.Boundary.Off, g.Boundary.N, boundEnd)
		}
		// Every compact arg must be a Graph boundary slot (there is nothing
		// else to take its layout from), and every slot compact.
		for a := boundEnd; a < g.Boundary.Off+g.Boundary.N; a++ {
			if in := a >= g.Boundary.Off; compact[a] != in {
				return nil, compactErr(a, in)
			}
		}
		boundEnd = g.Boundary.Off + g.Boundary.N
	}
	r.done()
	if r.err != nil {
		return nil, r.err
	}
	for a := int(boundEnd); a < na; a++ {
		if compact[a] {
			return nil, compactErr(uint32(a), false)
		}
	}
	// An ordinary task cannot take a layout-less arg: it has no Definition
	// to take the layout from. (GRAPH tasks' args are their boundaries,
	// checked above.) Arg spans may overlap, so count compact args by
	// prefix sums rather than walking each span.
	before := make([]uint32, na+1) // compact args before each index
	for a, c := range compact {
		before[a+1] = before[a]
		if c {
			before[a+1]++
		}
	}
	for i := range img.Tasks {
		t := &img.Tasks[i]
		if t.Kind != KindGraph && before[t.Args.Off+t.Args.N] != before[t.Args.Off] {
			return nil, badf("run image task %d (%s) takes a Graph boundary slot sent without a layout among its args [%d, +%d)", i, t.Kind, t.Args.Off, t.Args.N)
		}
	}
	return img, nil
}

func compactErr(arg uint32, inBoundary bool) error {
	if inBoundary {
		return badf("run image arg %d is a Graph boundary slot sent with a layout (want root and offset only)", arg)
	}
	return badf("run image arg %d is sent without a layout but is no Graph boundary slot", arg)
}

// RunImageHash computes a run image's content hash (the header's hash field
// read as zero); 0 if b is shorter than the field's end.
func RunImageHash(b []byte) uint64 {
	if len(b) < runHashOff+8 {
		return 0
	}
	return imageHash(b, runHashOff)
}
