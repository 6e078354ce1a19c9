package stages

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// EncodeDefinition builds d's flat device image, sets d.ContentHash to the
// image's content hash and returns the image. It sizes the image first and
// allocates once. The fanin CSR is written in node order from each node's
// Fanin span, and the fanout CSR is derived from it in place.
func EncodeDefinition(d *Definition) []byte { return encodeDefinition(d, nil) }

// encodeDefinition is EncodeDefinition; with rec non-nil, d's tensor
// templates and predicates are rec's records, already encoded (a
// Recorder's), and d.Tensors and d.Preds are not read.
func encodeDefinition(d *Definition, rec *encodedRecords) []byte {
	s := sizeDefinition(d, rec)
	total := s.sec[dsEnd]
	w := writer{imagefmt.Writer{B: make([]byte, 0, total)}}
	w.defHeader(d, &s)
	w.faninCSR(d)
	w.fanoutCSR(d, s.edges)
	w.extCSR(d)
	w.Pad8()
	w.nodeTable(d)
	w.defRecords(d, &s)
	w.B = append(w.B, d.Key...)
	if len(w.B) != total {
		panic(fmt.Sprintf("stages: definition image sized %d, wrote %d", total, len(w.B)))
	}
	h := imageHash(w.B, hashOff)
	binary.LittleEndian.PutUint64(w.B[hashOff:], h)
	d.ContentHash = h
	return w.B
}

// defSizes is what EncodeDefinition computes before writing: the counts
// that are not slice lengths, and the section offsets.
type defSizes struct {
	edges, npred, waits int
	sec                 [dsCount]int
	// rec is the tensor and predicate records when they come encoded.
	rec           *encodedRecords
	ntens, nbound int
}

func sizeDefinition(d *Definition, rec *encodedRecords) defSizes {
	s := defSizes{rec: rec, ntens: len(d.Tensors), npred: len(d.Preds), nbound: len(d.Boundary)}
	if rec != nil {
		s.ntens, s.npred, s.nbound = rec.ntens, rec.npred, rec.nbound
	}
	n := len(d.Nodes)
	for i := range d.Nodes {
		s.edges += int(d.Nodes[i].Fanin.N)
	}
	for _, w := range d.ExtDeps {
		s.waits += len(w)
	}
	sec := &s.sec
	off := defHeaderSize
	sec[dsFaninOff] = off
	off += 4 * (n + 1)
	sec[dsFaninIdx] = off
	off += 4 * s.edges
	sec[dsFanoutOff] = off
	off += 4 * (n + 1)
	sec[dsFanoutIdx] = off
	off += 4 * s.edges
	sec[dsExtOff] = off
	off += 4 * (len(d.ExtDeps) + 1)
	sec[dsExtIdx] = off
	off += 4 * s.waits
	off = imagefmt.Align8(off)
	sec[dsNodes] = off
	off += nodeRecSize * n
	sec[dsTensors] = off
	if rec != nil {
		off += len(rec.tens.B)
	} else {
		for i := range d.Tensors {
			off += tensorRefLen(&d.Tensors[i])
		}
	}
	sec[dsScalars] = off
	for i := range d.Scalars {
		sc := &d.Scalars[i]
		if sc.Boundary {
			off += 1 + uvLen(uint64(uint32(sc.Slot)))
		} else {
			off += 1 + uvLen(sc.Value)
		}
	}
	sec[dsRoots] = off
	for i := range d.Roots {
		rt := &d.Roots[i]
		off += 2 + uvLen(uint64(rt.Elems)) + uvLen(uint64(rt.Creator)) + uvLen(uint64(rt.HeapOffset))
	}
	sec[dsBoundary] = off
	if rec != nil {
		off += len(rec.bound.B)
	} else {
		for i := range d.Boundary {
			b := &d.Boundary[i]
			off += 1 + layoutLen(&b.Layout) + uvLen(uint64(int64(b.AliasRep)+1)) + svLen(0) + uvLen(uint64(b.RootElems))
		}
	}
	sec[dsPreds] = off
	if rec != nil {
		off += len(rec.preds.B)
	} else {
		for i := range d.Preds {
			p := &d.Preds[i]
			off += 1 + tensorRefLen(&p.Tensor) + svLen(p.Index) + svLen(p.Target)
		}
	}
	sec[dsKey] = off
	off += len(d.Key)
	sec[dsEnd] = off
	return s
}

// defHeader writes the Definition header, its content hash zero.
func (w *writer) defHeader(d *Definition, s *defSizes) {
	w.B = append(w.B, DefinitionMagic...)
	w.U16(DefinitionVersion)
	w.U16(defHeaderSize)
	w.U64(d.FullKey)
	w.U64(0) // content hash, filled last
	w.U64(uint64(d.HeapBytes))
	w.U32(uint32(s.sec[dsEnd]))
	w.U32(uint32(len(d.Nodes)))
	w.U32(uint32(s.edges))
	w.U32(uint32(s.ntens))
	w.U32(uint32(len(d.Scalars)))
	w.U32(uint32(len(d.Roots)))
	w.U32(uint32(s.nbound))
	w.U32(uint32(d.BoundaryScalars))
	w.U32(uint32(s.npred))
	w.U32(uint32(len(d.Key)))
	w.U32(uint32(len(d.ExtDeps)))
	w.U32(uint32(s.waits))
	for _, off := range s.sec {
		w.U32(uint32(off))
	}
	w.Pad8()
}

// grow extends w.B by n bytes and returns them, to be written in place:
// the fixed-width sections are written with one bounds check per record
// rather than an append per field.
func (w *writer) grow(n int) []byte {
	off := len(w.B)
	w.B = w.B[:off+n]
	return w.B[off:]
}

func (w *writer) faninCSR(d *Definition) {
	le := binary.LittleEndian
	offs := w.grow(4 * (len(d.Nodes) + 1))
	le.PutUint32(offs, 0)
	acc := uint32(0)
	for i := range d.Nodes {
		acc += d.Nodes[i].Fanin.N
		le.PutUint32(offs[4*i+4:], acc)
	}
	idx := w.grow(4 * int(acc))
	k := 0
	for i := range d.Nodes {
		f := d.Nodes[i].Fanin
		for _, p := range d.Fanin[f.Off : f.Off+f.N] {
			le.PutUint32(idx[k:], p)
			k += 4
		}
	}
}

// fanoutCSR writes the transpose of the fanin CSR in place: count,
// prefix-sum, scatter using the offsets as cursors, then shift the offsets
// back by one slot.
func (w *writer) fanoutCSR(d *Definition, edges int) {
	le := binary.LittleEndian
	n := len(d.Nodes)
	offs := w.grow(4 * (n + 1))
	idx := w.grow(4 * edges)
	clear(offs)
	for i := range d.Nodes {
		f := d.Nodes[i].Fanin
		for _, p := range d.Fanin[f.Off : f.Off+f.N] {
			if int(p) < n {
				o := offs[4*p+4:]
				le.PutUint32(o, le.Uint32(o)+1)
			}
		}
	}
	acc := uint32(0)
	for i := 1; i <= n; i++ {
		o := offs[4*i:]
		acc += le.Uint32(o)
		le.PutUint32(o, acc)
	}
	for c := range d.Nodes {
		f := d.Nodes[c].Fanin
		for _, p := range d.Fanin[f.Off : f.Off+f.N] {
			if int(p) < n {
				o := offs[4*p:]
				cur := le.Uint32(o)
				le.PutUint32(idx[4*cur:], uint32(c))
				le.PutUint32(o, cur+1)
			}
		}
	}
	copy(offs[4:], offs[:4*n])
	le.PutUint32(offs, 0)
}

func (w *writer) extCSR(d *Definition) {
	acc := uint32(0)
	w.U32(0)
	for _, ws := range d.ExtDeps {
		acc += uint32(len(ws))
		w.U32(acc)
	}
	for _, ws := range d.ExtDeps {
		for _, nd := range ws {
			w.U32(nd)
		}
	}
}

func (w *writer) nodeTable(d *Definition) {
	le := binary.LittleEndian
	b := w.grow(nodeRecSize * len(d.Nodes))
	for i := range d.Nodes {
		nd := &d.Nodes[i]
		rec := b[nodeRecSize*i : nodeRecSize*i+nodeRecSize]
		rec[imagefmt.NodeKindAt] = uint8(nd.Kind)
		rec[imagefmt.NodeLaunchAt] = uint8(nd.Launch)
		if nd.Implied > math.MaxUint16 {
			panic(fmt.Sprintf("stages: definition node %d has %d implied edges, more than its record holds", i, nd.Implied))
		}
		le.PutUint16(rec[imagefmt.NodeImpliedAt:], uint16(nd.Implied))
		le.PutUint32(rec[imagefmt.NodeBlockNumAt:], uint32(nd.BlockNum))
		for k := 0; k < 3; k++ {
			le.PutUint32(rec[imagefmt.NodeKernelAt+4*k:], uint32(nd.Kernel[k]))
		}
		le.PutUint32(rec[imagefmt.NodeTensorOffAt:], nd.Tensors.Off)
		le.PutUint32(rec[imagefmt.NodeTensorNAt:], nd.Tensors.N)
		le.PutUint32(rec[imagefmt.NodeScalarOffAt:], nd.Scalars.Off)
		le.PutUint32(rec[imagefmt.NodeScalarNAt:], nd.Scalars.N)
		le.PutUint32(rec[imagefmt.NodePredicateAt:], uint32(nd.Pred))
	}
}

// defRecords writes the variable-width sections: tensor templates,
// scalars, internal roots, the boundary signature and predicates.
func (w *writer) defRecords(d *Definition, s *defSizes) {
	if s.rec != nil {
		w.B = append(w.B, s.rec.tens.B...)
	} else {
		for i := range d.Tensors {
			w.tensorRef(&d.Tensors[i])
		}
	}
	for i := range d.Scalars {
		s := &d.Scalars[i]
		if s.Boundary {
			w.U8(imagefmt.ScalarBoundary)
			w.Uvarint(uint64(uint32(s.Slot)))
		} else {
			w.U8(imagefmt.ScalarStatic)
			w.Uvarint(s.Value)
		}
	}
	for i := range d.Roots {
		rt := &d.Roots[i]
		w.dtypeFlags(rt.DType, rt.ManualDep)
		w.Uvarint(uint64(rt.Elems))
		w.Uvarint(uint64(rt.Creator))
		w.Uvarint(uint64(rt.HeapOffset))
	}
	if s.rec != nil {
		w.B = append(w.B, s.rec.bound.B...)
	} else {
		for i := range d.Boundary {
			b := &d.Boundary[i]
			w.U8(uint8(b.Tag))
			w.layoutSlotDelta(&b.Layout, uint64(int64(b.AliasRep)+1), 0)
			w.Uvarint(uint64(b.RootElems))
		}
	}
	if s.rec != nil {
		w.B = append(w.B, s.rec.preds.B...)
		return
	}
	for i := range d.Preds {
		p := &d.Preds[i]
		w.U8(uint8(p.Op))
		w.tensorRef(&p.Tensor)
		w.Varint(p.Index)
		w.Varint(p.Target)
	}
}

// DefinitionHash returns the content hash recorded in a Definition image's
// header without decoding or verifying it (0 if b is too short).
func DefinitionHash(b []byte) uint64 {
	if len(b) < hashOff+8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[hashOff:])
}
