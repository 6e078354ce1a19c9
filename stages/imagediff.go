package stages

import "bytes"

// A warm pass's run image differs from the last one shipped to its device
// only where a boundary value changed (a decode step's structure is the
// same step to step), so a device whose resident image is the one the host
// last shipped is sent only the changed ranges. The ranges are found by
// comparing blocks, not by knowing the format: a new field of the run image
// cannot be missed by the diff.

// An ImageRange is one changed run of bytes of a run image: [Off, Off+Len).
type ImageRange struct{ Off, Len int }

// diffBlock is the comparison's grain and diffGap the unchanged stretch
// worth a copy of its own: a real H2D copy has a fixed cost (a DMA
// descriptor, a doorbell) that outweighs a few hundred bytes, so nearby
// changes go as one copy.
const (
	diffBlock = 64
	diffGap   = 256
	diffChunk = 4096
)

// DiffRunImage appends to dst the ranges where next differs from prev and
// returns them; ok is false when next cannot be patched over prev (their
// lengths differ: the whole image goes). Equal images give no range.
func DiffRunImage(dst []ImageRange, prev, next []byte) (_ []ImageRange, ok bool) {
	if len(prev) != len(next) {
		return dst, false
	}
	// Most of a warm image is unchanged: whole chunks are compared first,
	// at memcmp's speed, and only a chunk that differs block by block.
	for lo := 0; lo < len(next); lo += diffChunk {
		hi := min(lo+diffChunk, len(next))
		if !bytes.Equal(prev[lo:hi], next[lo:hi]) {
			dst = diffBlocks(dst, prev, next, lo, hi)
		}
	}
	return dst, true
}

// diffBlocks appends the ranges of [lo, hi) where next differs from prev,
// joined to the last range when the gap is within diffGap.
func diffBlocks(dst []ImageRange, prev, next []byte, lo, hi int) []ImageRange {
	for off := lo; off < hi; off += diffBlock {
		end := min(off+diffBlock, hi)
		if bytes.Equal(prev[off:end], next[off:end]) {
			continue
		}
		if n := len(dst); n > 0 && off-(dst[n-1].Off+dst[n-1].Len) <= diffGap {
			dst[n-1].Len = end - dst[n-1].Off
			continue
		}
		dst = append(dst, ImageRange{Off: off, Len: end - off})
	}
	return dst
}

// RangeBytes is the bytes the ranges cover: what a patch sends.
func RangeBytes(rs []ImageRange) int {
	n := 0
	for _, r := range rs {
		n += r.Len
	}
	return n
}
