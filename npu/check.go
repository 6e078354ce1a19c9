package npu

import (
	"fmt"
	"slices"

	"github.com/hbg-dev/hbg/stages"
)

// plan is a checked run image with everything the simulation needs derived
// once: task numbering (ordinary tasks, then each Graph instance's nodes),
// the ordinary fanout CSR, the root-to-memory-object map and each instance's
// Definition. A plan is reused by later launches of the same image.
type plan struct {
	img     *stages.RunImage
	nOrd    int // ordinary tasks and GRAPH shells: image task ids 0..nOrd-1
	nTasks  int // nOrd + every instance's nodes
	foOff   []uint32
	foIdx   []int32
	insts   []instPlan
	instOf  []int32 // per image task: its instance, or -1
	rootObj []int32 // RootID -> memory object, -1 unknown
	nEntry  int
	// objects: entries, then run roots (in image order), then internal roots
	runRoot    []stages.RootDesc
	nObjs      int
	allocBytes int64
	graphBytes int64
	lh         []uint64 // layout hash per image arg
}

// instPlan is one Graph submission: its Definition and where its nodes and
// internal roots are numbered.
type instPlan struct {
	g       int32 // index in img.Graphs
	def     *defObj
	shell   int32 // the outer task's id
	base    int32 // first node's task number
	objBase int32 // first internal root's memory object
}

// DefinitionError is a launch refused for one uploaded Definition whose
// image does not read or breaks the device's rules (it wraps
// ErrInvalidImage): the host can tell which Definition to stop replaying.
type DefinitionError struct {
	Hash, FullKey uint64
	Err           error
}

func (e *DefinitionError) Error() string { return e.Err.Error() }
func (e *DefinitionError) Unwrap() error { return e.Err }

func refuse(err error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))
}

// check validates a decoded run image against the device's state (entry
// roots, uploaded Definitions) and derives the plan. It changes nothing.
// The device trusts nothing the decoder did: each rule is one method and
// one refusal, and the phases (fanin, roots, tasks, heap) try them in
// order, the first refusal ending the check.
func (d *Die) check(img *stages.RunImage) (*plan, error) {
	p, _, err := d.checkRules(img)
	return p, err
}

// checkRules is check that also names the rule that refused (the tests
// pin one corrupt image per rule).
func (d *Die) checkRules(img *stages.RunImage) (*plan, string, error) {
	c := &imageCheck{d: d, img: img, p: &plan{img: img, nOrd: len(img.Tasks), nEntry: len(d.entries)}}
	for _, phase := range []func() error{c.fanin, c.roots, c.tasks, c.heap} {
		if err := phase(); err != nil {
			return nil, c.refused, err
		}
	}
	// Ordinary fanout CSR (consumers ascending).
	c.p.foOff, c.p.foIdx = fanoutCSR[stages.TaskID, int32](len(img.Tasks), len(img.Fanin), func(t int) []stages.TaskID {
		s := img.Tasks[t].Fanin
		return img.Fanin[s.Off : s.Off+s.N]
	})
	return c.p, "", nil
}

// fanoutCSR transposes a fanin list: fanin(c) is consumer c's producers
// (each < n, edges in all); the result lists each producer's consumers, in
// ascending order, as a CSR of n+1 offsets. Both the run image and every
// Definition are walked producer to consumer on the device.
func fanoutCSR[P, C ~int32 | ~uint32](n, edges int, fanin func(c int) []P) ([]uint32, []C) {
	off := make([]uint32, n+1)
	for c := 0; c < n; c++ {
		for _, p := range fanin(c) {
			off[p+1]++
		}
	}
	for i := 1; i <= n; i++ {
		off[i] += off[i-1]
	}
	idx := make([]C, edges)
	cur := slices.Clone(off[:n])
	for c := 0; c < n; c++ {
		for _, p := range fanin(c) {
			idx[cur[p]] = C(c)
			cur[p]++
		}
	}
	return off, idx
}

// checkBoundary checks one submission against its Definition's signature:
// same width and scalar count, and per slot the same tag, layout and root
// size, and the same alias partition. A slot shipped as (root, offset) only
// takes the signature's layout here. Linear in the width: the alias check
// keeps, per root, the first slot that viewed it.
func checkBoundary(img *stages.RunImage, g *stages.GraphSubmission, def *defObj, rootElems func(stages.RootID) (int64, bool)) error {
	if g.FullKey != def.fullKey {
		return fmt.Errorf("full_key %#016x, the Definition's is %#016x", g.FullKey, def.fullKey)
	}
	if int(g.Boundary.N) != len(def.boundary) {
		return fmt.Errorf("%d boundary tensors, the Definition has %d", g.Boundary.N, len(def.boundary))
	}
	if int(g.Scalars.N) != def.boundaryScalars {
		return fmt.Errorf("%d boundary scalars, the Definition has %d", g.Scalars.N, def.boundaryScalars)
	}
	args := img.Args[g.Boundary.Off : g.Boundary.Off+g.Boundary.N]
	first := make(map[stages.RootID]int32, len(args)) // lookups only
	for i := range args {
		a, s := &args[i], &def.boundary[i]
		if a.Tag != s.Tag {
			return fmt.Errorf("slot %d tag %s, the Definition has %s", i, a.Tag, s.Tag)
		}
		if a.View.DType == stages.DTypeInvalid {
			// Shipped as (root, offset): the layout is the signature's.
			root, off := a.View.Root, a.View.Offset
			a.View = s.Layout
			a.View.Root, a.View.Offset = root, off
		}
		if !a.View.SameLayout(&s.Layout) {
			return fmt.Errorf("slot %d layout %s%v, the Definition has %s%v", i, a.View.DType, a.View.ShapeSlice(), s.Layout.DType, s.Layout.ShapeSlice())
		}
		el, _ := rootElems(a.View.Root)
		if el != s.RootElems {
			return fmt.Errorf("slot %d views a root of %d elements, the Definition's has %d", i, el, s.RootElems)
		}
		rep := int32(-1)
		if f, ok := first[a.View.Root]; ok {
			rep = f
		} else {
			first[a.View.Root] = int32(i)
		}
		if rep != s.AliasRep {
			return fmt.Errorf("slot %d aliases slot %d, the Definition's aliases %d", i, rep, s.AliasRep)
		}
	}
	return nil
}

// findCycle returns one dependency cycle (as task ids, first repeated at
// the end) or nil. Iterative DFS over fanin edges.
func findCycle(img *stages.RunImage) []stages.TaskID {
	n := len(img.Tasks)
	color := make([]uint8, n) // 0 new, 1 on stack, 2 done
	type frame struct {
		t int
		k uint32
	}
	var stack []frame
	for s := 0; s < n; s++ {
		if color[s] != 0 {
			continue
		}
		stack = append(stack[:0], frame{s, 0})
		color[s] = 1
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			fs := img.Tasks[top.t].Fanin
			if top.k == fs.N {
				color[top.t] = 2
				stack = stack[:len(stack)-1]
				continue
			}
			f := int(img.Fanin[fs.Off+top.k])
			top.k++
			switch color[f] {
			case 0:
				color[f] = 1
				stack = append(stack, frame{f, 0})
			case 1:
				// f is on the stack: the cycle is f ... top, then f.
				var cyc []stages.TaskID
				for j := len(stack) - 1; j >= 0; j-- {
					cyc = append(cyc, stages.TaskID(stack[j].t))
					if stack[j].t == f {
						break
					}
				}
				slices.Reverse(cyc)
				return append(cyc, stages.TaskID(f))
			}
		}
	}
	return nil
}
