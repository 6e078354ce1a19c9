package config

import "github.com/hbg-dev/hbg/stages"

// autoBoundary computes an auto block's boundary: the boundaries of its
// calls, minus tensors the block allocates itself, deduplicated (same root,
// offset, layout and tag); the scalars likewise by name and value.
func (r *runner) autoBoundary(af *frame) ([]stages.Arg, []uint64, [][]int32, [][]int32) {
	args, scal, sname := af.autoArgs[:0], af.autoScalarVals[:0], af.autoScalarNames[:0]
	if af.autoSlotOf == nil {
		af.autoSlotOf = make([][]int32, len(af.block.calls))
		af.autoScalarOf = make([][]int32, len(af.block.calls))
		for ci, c := range af.block.calls {
			af.autoSlotOf[ci] = make([]int32, len(c.callee.boundary))
			af.autoScalarOf[ci] = make([]int32, len(c.callee.scalars))
		}
	}
	slotOf, scalarOf := af.autoSlotOf, af.autoScalarOf
	if af.autoRootHead == nil {
		af.autoRootHead = map[stages.RootID]int32{}
	}
	clear(af.autoRootHead)
	next := af.autoNextSlot[:0]
	defer func() { af.autoArgs, af.autoScalarVals, af.autoScalarNames, af.autoNextSlot = args, scal, sname, next }()
	copy(af.tensors, af.tensorArgs)
	for ci, c := range af.block.calls {
		cf := r.frame(c.callee)
		r.prepare(af, cf, c, true)
		r.boundary(cf, c.localSlots, cf.boundaryArgs)
		if r.err != nil {
			return nil, nil, nil, nil
		}
		for s := range c.callee.boundary {
			slotOf[ci][s] = -1
			if c.localSlots[s] {
				continue
			}
			a := &cf.boundaryArgs[s]
			head, ok := af.autoRootHead[a.View.Root]
			if !ok {
				head = -1
			}
			idx := head
			for idx >= 0 && args[idx] != *a {
				idx = next[idx]
			}
			if idx < 0 {
				idx = int32(len(args))
				args = append(args, *a)
				next = append(next, head)
				af.autoRootHead[a.View.Root] = idx
			}
			slotOf[ci][s] = idx
		}
		for i, si := range c.callee.callScalars(cf.env) {
			s := c.callee.scalars[si]
			idx := -1
			for j := range scal {
				if sname[j] == s.name && scal[j] == cf.scalarVals[i] {
					idx = j
				}
			}
			if idx < 0 {
				idx = len(scal)
				scal = append(scal, cf.scalarVals[i])
				sname = append(sname, s.name)
			}
			scalarOf[ci][i] = int32(idx)
		}
	}
	// The same view may be a slot twice, with different tags: upstream's pair
	// boundary (118 tensors) has the running hidden state as input (CSA
	// attention) and as inout (HCA MoE). The body writes it, so an input twin
	// would hide that write from the caller (the input-written defect): every
	// twin of a written view is tagged inout, and the width stays upstream's.
	if af.autoWritten == nil {
		af.autoWritten = map[stages.View]bool{}
	}
	clear(af.autoWritten)
	for i := range args {
		if args[i].Tag.Writes() {
			af.autoWritten[args[i].View] = true
		}
	}
	for i := range args {
		if args[i].Tag == stages.TagInput && af.autoWritten[args[i].View] {
			args[i].Tag = stages.TagInOut
		}
	}
	return args, scal, slotOf, scalarOf
}
