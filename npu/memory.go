package npu

import (
	"math/bits"
	"slices"

	"github.com/hbg-dev/hbg/stages"
)

// Digest rules (ARCHITECTURE §4). Device memory is an address space of
// memory objects, one per root: entry roots (registered once), the run's
// alloc roots and every Graph instance's internal roots. Each object holds a
// sorted list of segments covering its elements [0, elems), each carrying a
// 64-bit digest:
//
//   - an entry root starts as one segment with digest mix(name hash);
//   - a freshly allocated root (alloc root, runtime output, Graph internal
//     root) starts as mix(dtype, elems): not where, nor in which form, it was
//     allocated;
//   - a read of the element interval [off, off+elems) of a view (the
//     interval the dependency rule uses, model.go View.End) hashes the
//     interval's root-relative offset and length, then every overlapping
//     segment's digest with its interval relative to the view start: never
//     an absolute address, so it is the same in every form;
//   - a kernel's input digest is mix(code identity of its kernel slots
//     (stages.Kernel.Code), kind, block_num, the kernel's folded literals
//     (stages.Kernel.Folded) and its scalars, then per argument in order:
//     (index, read digest ⊕ layout) for input arguments and (index, layout)
//     for every other tag. Only input-tagged arguments are read: the same
//     code is declared inout at one site and output_existing at another
//     (upstream's direction-only kernel classes), and an output_existing's
//     old contents are not ordered by the TensorMap, so neither inout nor
//     output_existing contents are read, and the tag itself is not hashed;
//   - when its last block ends it writes every output argument's interval
//     as one segment of digest mix(input digest, argument index), and adds
//     that value to the digest of every segment of each inout and
//     output_existing argument's interval (split at its ends). A write into
//     memory that already holds something keeps what it held: a residual
//     add, an accumulator, a KV cache append are functions of it, so a wrong
//     kernel, scalar or input in any earlier writer, or an update applied
//     twice, changes the final digest, and adding (not mixing) keeps
//     unordered accumulations the same in every order. inout and
//     output_existing are treated alike because upstream's kernel classes
//     give only a direction: one kernel is declared inout at one site and
//     output_existing at another (DSv4's first layer against the rest), and
//     both must hash alike. For the same reason the old contents are not
//     read into the input digest. A kernel of a declared race group
//     (stages.Kernel.RaceGroup) overwrites instead: the model declares that
//     its views overstate what it touches (tiles of one accumulator picked
//     by a scalar), so what a tile adds and when a reader sees it is no
//     content the digest can model, and only its last write is compared.
//
// The hash is a 64-bit multiply-xorshift mix (wyhash/splitmix-style
// finalizer), chosen for speed; it is deterministic across platforms.

const (
	mixK1 = 0x9e3779b97f4a7c15
	mixK2 = 0xbf58476d1ce4e5b9
	mixK3 = 0x94d049bb133111eb
)

// mix folds v into h.
func mix(h, v uint64) uint64 {
	hi, lo := bits.Mul64(h^mixK1, v^mixK2)
	x := hi ^ lo
	x ^= x >> 31
	x *= mixK3
	return x ^ x>>29
}

// strHash is FNV-1a 64 of s, folded through mix.
func strHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix(h, uint64(len(s)))
}

// layoutHash hashes a view's dtype, rank, shape and strides.
func layoutHash(v *stages.View) uint64 {
	nd := int(v.NDims)
	if nd > stages.MaxDims {
		nd = stages.MaxDims
	}
	h := mix(uint64(v.DType), uint64(nd))
	for i := 0; i < nd; i++ {
		h = mix(h, uint64(v.Shape[i]))
		h = mix(h, uint64(v.Strides[i]))
	}
	return h
}

// freshDigest is the digest of a newly allocated region.
func freshDigest(dt stages.DType, elems int64) uint64 {
	return mix(mix(0xa110c, uint64(dt)), uint64(elems))
}

// entryDigest is the starting digest of an entry root.
func entryDigest(name string) uint64 { return mix(0xe47e1, strHash(name)) }

type seg struct {
	lo, hi int64
	d      uint64
	w      int32 // the sim task that wrote it, -1 for the initial contents
}

// memObj is one root's contents as digests.
type memObj struct {
	elems   int64
	segs    []seg
	written bool
	// vals is an entry root's contents as the model gave them (Root.Data),
	// until a task writes the root: predicates read them.
	vals []int64
}

// reset gives the object one segment of digest d.
func (o *memObj) reset(elems int64, d uint64) {
	o.elems, o.written, o.vals = elems, false, nil
	o.segs = o.segs[:0]
	if elems > 0 {
		o.segs = append(o.segs, seg{0, elems, d, -1})
	}
}

// clip bounds [lo, hi) to the object.
func (o *memObj) clip(lo, hi int64) (int64, int64) {
	if lo < 0 {
		lo = 0
	}
	if hi > o.elems {
		hi = o.elems
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

// first is the index of the first segment ending after lo.
func (o *memObj) first(lo int64) int {
	a, b := 0, len(o.segs)
	for a < b {
		m := int(uint(a+b) >> 1)
		if o.segs[m].hi > lo {
			b = m
		} else {
			a = m + 1
		}
	}
	return a
}

// read hashes the segments overlapping [lo, hi), relative to lo, and where
// the window sits in its root: a read of the wrong rows of an untouched
// weight must not look like a read of the right ones. Offsets are
// root-relative, so they are the same in every form.
func (o *memObj) read(lo, hi int64) uint64 {
	lo, hi = o.clip(lo, hi)
	h := mix(mix(0x4ead, uint64(lo)), uint64(hi-lo))
	for i := o.first(lo); i < len(o.segs) && o.segs[i].lo < hi; i++ {
		s := &o.segs[i]
		h = mix(h, uint64(max(s.lo, lo)-lo))
		h = mix(h, uint64(min(s.hi, hi)-lo))
		h = mix(h, s.d)
	}
	return h
}

// write sets [lo, hi) to digest d, written by sim task w.
func (o *memObj) write(lo, hi int64, d uint64, w int32) {
	lo, hi = o.clip(lo, hi)
	if hi <= lo {
		return
	}
	o.written, o.vals = true, nil
	i := o.first(lo)
	j := i
	for j < len(o.segs) && o.segs[j].lo < hi {
		j++
	}
	// Segments i..j-1 overlap [lo, hi); keep their outer remainders.
	var repl [3]seg
	n := 0
	if o.segs[i].lo < lo {
		repl[n] = seg{o.segs[i].lo, lo, o.segs[i].d, o.segs[i].w}
		n++
	}
	repl[n] = seg{lo, hi, d, w}
	n++
	if last := o.segs[j-1]; last.hi > hi {
		repl[n] = seg{hi, last.hi, last.d, last.w}
		n++
	}
	old := j - i
	switch {
	case n == old:
	case n > old:
		grow := n - old
		o.segs = append(o.segs, repl[:grow]...)
		copy(o.segs[j+grow:], o.segs[j:len(o.segs)-grow])
	default:
		copy(o.segs[i+n:], o.segs[j:])
		o.segs = o.segs[:len(o.segs)-(old-n)]
	}
	copy(o.segs[i:], repl[:n])
}

// add adds d to the digest of every segment in [lo, hi), splitting the
// segments at lo and hi; sim task w is their last writer (an inout write).
func (o *memObj) add(lo, hi int64, d uint64, w int32) {
	lo, hi = o.clip(lo, hi)
	if hi <= lo {
		return
	}
	o.written, o.vals = true, nil
	o.split(lo)
	o.split(hi)
	for i := o.first(lo); i < len(o.segs) && o.segs[i].lo < hi; i++ {
		o.segs[i].d += d
		o.segs[i].w = w
	}
}

// split makes e a segment boundary.
func (o *memObj) split(e int64) {
	i := o.first(e)
	if i == len(o.segs) || o.segs[i].lo >= e {
		return
	}
	s := o.segs[i]
	o.segs = slices.Insert(o.segs, i+1, seg{e, s.hi, s.d, s.w})
	o.segs[i].hi = e
}

// elemValue is the small integer a predicate reads at element e: the
// model's data where it gave the root contents and no task has written it
// since, else derived from the digest of the segment holding e and e's
// position inside that segment, so it is the same in every form. Derived
// values are 0 or 1, so a
// "count > 0" predicate runs about half of its tasks.
func (o *memObj) elemValue(e int64) int64 {
	if e < 0 || e >= o.elems {
		return 0
	}
	if o.vals != nil {
		return o.vals[e]
	}
	s := &o.segs[o.first(e)]
	return int64(mix(s.d, uint64(e-s.lo)) >> 63)
}

// digest is the object's whole-content digest.
func (o *memObj) digest() uint64 {
	h := mix(0xd16e57, uint64(o.elems))
	for i := range o.segs {
		s := &o.segs[i]
		h = mix(mix(mix(h, uint64(s.lo)), uint64(s.hi)), s.d)
	}
	return h
}

// predTrue compares v with the target.
func predTrue(op stages.PredOp, v, target int64) bool {
	switch op {
	case stages.PredGT:
		return v > target
	case stages.PredGE:
		return v >= target
	case stages.PredEQ:
		return v == target
	case stages.PredNE:
		return v != target
	case stages.PredLT:
		return v < target
	case stages.PredLE:
		return v <= target
	}
	return false
}
