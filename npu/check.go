package npu

import (
	"fmt"
	"slices"
	"strings"

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
func (d *Die) check(img *stages.RunImage) (*plan, error) {
	nt := len(img.Tasks)
	p := &plan{img: img, nOrd: nt, nEntry: len(d.entries)}

	// Fanin: every producer is an earlier task of the image. A forward
	// reference is refused; if the forward references close a cycle, the
	// cycle is named. The spans must fit the pool together (the decoder
	// checks they are disjoint): the fanout CSR is sized by the pool.
	forward := false
	var edges uint64
	for i := range img.Tasks {
		s := img.Tasks[i].Fanin
		if edges += uint64(s.N); uint64(s.Off)+uint64(s.N) > uint64(len(img.Fanin)) || edges > uint64(len(img.Fanin)) {
			return nil, refuse(ErrFanin, "task %d fanin [%d, +%d) runs past the fanin pool of %d (%d edges so far)", i, s.Off, s.N, len(img.Fanin), edges)
		}
		for _, f := range img.Fanin[s.Off : s.Off+s.N] {
			if f < 0 || int(f) >= nt {
				return nil, refuse(ErrFanin, "task %d fanin names task %d, which is not in the image (%d tasks)", i, f, nt)
			}
			if int(f) >= i {
				forward = true
			}
		}
	}
	if forward {
		if cyc := findCycle(img); cyc != nil {
			parts := make([]string, len(cyc))
			for i, t := range cyc {
				parts[i] = fmt.Sprint(t)
			}
			return nil, refuse(ErrCycle, "tasks %s (each waits on the next)", strings.Join(parts, " -> "))
		}
		for i := range img.Tasks {
			s := img.Tasks[i].Fanin
			for _, f := range img.Fanin[s.Off : s.Off+s.N] {
				if int(f) >= i {
					return nil, refuse(ErrFanin, "task %d fanin names task %d, a later task (submission order must be topological)", i, f)
				}
			}
		}
	}

	// Roots: entry roots are 0..nEntry-1; run roots take the next objects.
	maxID := stages.RootID(p.nEntry - 1)
	for i := range img.Roots {
		r := &img.Roots[i]
		if r.ID < stages.RootID(p.nEntry) || r.ID.IsPrivate() {
			return nil, refuse(ErrInvalidImage, "run root %d has id %d (entry roots are 0..%d; private recording roots never reach the device)", i, r.ID, p.nEntry-1)
		}
		maxID = max(maxID, r.ID)
	}
	if int64(maxID) > int64(p.nEntry)+16*int64(len(img.Roots))+(1<<16) {
		return nil, refuse(ErrInvalidImage, "run root ids up to %d are too sparse for %d roots", maxID, len(img.Roots))
	}
	p.rootObj = make([]int32, int(maxID)+1)
	for i := range p.rootObj {
		p.rootObj[i] = -1
	}
	for i := 0; i < p.nEntry; i++ {
		p.rootObj[i] = int32(i)
	}
	p.nObjs = p.nEntry
	type region struct {
		lo, hi uint64
		root   stages.RootID // or -1 for a Graph heap block
		task   int           // the GRAPH task of a heap block
	}
	what := func(r region) string {
		if r.root >= 0 {
			return fmt.Sprintf("root %d", r.root)
		}
		return fmt.Sprintf("GRAPH task %d heap block", r.task)
	}
	var regions []region
	for i := range img.Roots {
		r := &img.Roots[i]
		if p.rootObj[r.ID] >= 0 {
			return nil, refuse(ErrInvalidImage, "run root id %d listed twice", r.ID)
		}
		if r.Elems < 0 || r.Elems > 1<<50 {
			return nil, refuse(ErrInvalidImage, "run root %d has %d elements", r.ID, r.Elems)
		}
		p.rootObj[r.ID] = int32(p.nObjs)
		p.nObjs++
		b := uint64(r.Elems * r.DType.Size())
		p.allocBytes += int64(b)
		if b > 0 {
			regions = append(regions, region{r.Addr, r.Addr + b, r.ID, -1})
		}
	}
	p.runRoot = img.Roots
	rootElems := func(id stages.RootID) (int64, bool) {
		if id < 0 || int(id) >= len(p.rootObj) || p.rootObj[id] < 0 {
			return 0, false
		}
		if int(id) < p.nEntry {
			return d.entries[id].Elems, true
		}
		return img.Roots[int(p.rootObj[id])-p.nEntry].Elems, true
	}
	// checkView checks a view of task i; arg < 0 names its predicate. A
	// GRAPH task's boundary slot may come without a layout (DTypeInvalid):
	// checkBoundary gives it the Definition's. Any other view has a dtype
	// the device knows and at most MaxDims dims, else its element count and
	// strides would read past the shape.
	checkView := func(v *stages.View, i, arg int) error {
		name := func() string {
			if arg < 0 {
				return "predicate"
			}
			return fmt.Sprintf("argument %d", arg)
		}
		layoutLess := v.DType == stages.DTypeInvalid && arg >= 0 && img.Tasks[i].Kind == stages.KindGraph
		if !layoutLess && (v.DType == stages.DTypeInvalid || v.DType > stages.UINT64) {
			return refuse(ErrInvalidImage, "task %d (%s) %s has dtype %s", i, img.Tasks[i].Kind, name(), v.DType)
		}
		if v.NDims > stages.MaxDims {
			return refuse(ErrInvalidImage, "task %d %s has %d dims (at most %d)", i, name(), v.NDims, stages.MaxDims)
		}
		el, ok := rootElems(v.Root)
		if !ok {
			return refuse(ErrInvalidImage, "task %d %s views root %d, which is neither an entry root nor a root of this run", i, name(), v.Root)
		}
		if v.Offset < 0 || v.Offset > el {
			return refuse(ErrInvalidImage, "task %d %s offset %d is outside root %d (%d elements)", i, name(), v.Offset, v.Root, el)
		}
		for k := 0; k < int(v.NDims); k++ {
			if v.Shape[k] < 0 || v.Shape[k] > 1<<40 {
				return refuse(ErrInvalidImage, "task %d %s has dimension %d", i, name(), v.Shape[k])
			}
		}
		if v.Elems() > 1<<50 || v.Elems() < 0 {
			return refuse(ErrInvalidImage, "task %d %s has %d elements", i, name(), v.Elems())
		}
		return nil
	}

	// Tasks: kernel slots, views, Graph links.
	p.instOf = make([]int32, nt)
	p.lh = make([]uint64, len(img.Args))
	for i := range img.Args {
		p.lh[i] = layoutHash(&img.Args[i].View)
	}
	next := int32(nt)
	for i := range img.Tasks {
		t := &img.Tasks[i]
		p.instOf[i] = -1
		if !kernelSlotsOK(t.Kind, t.Kernel) {
			return nil, refuse(ErrInvalidImage, "task %d of kind %s has kernel slots %v", i, t.Kind, t.Kernel)
		}
		if t.BlockNum > maxBlockNum {
			return nil, refuse(ErrInvalidImage, "task %d has block_num %d (at most %d)", i, t.BlockNum, maxBlockNum)
		}
		if !t.Launch.Valid() {
			return nil, refuse(ErrInvalidImage, "task %d has launch flags %#x", i, uint8(t.Launch))
		}
		if t.Launch&stages.LaunchSyncStart != 0 && max(t.BlockNum, 1) > syncCapacity(&d.cfg, t.Kind) {
			return nil, refuse(ErrInvalidImage, "task %d is sync_start with block_num %d: its blocks start together, and the die has %d %s slots", i, t.BlockNum, syncCapacity(&d.cfg, t.Kind), t.Kind)
		}
		for a := t.Args.Off; a < t.Args.Off+t.Args.N; a++ {
			if err := checkView(&img.Args[a].View, i, int(a-t.Args.Off)); err != nil {
				return nil, err
			}
		}
		if t.Pred.Valid {
			if err := checkView(&t.Pred.View, i, -1); err != nil {
				return nil, err
			}
		}
		if (t.Kind == stages.KindGraph) != (t.Graph >= 0) {
			return nil, refuse(ErrInvalidImage, "task %d of kind %s names graph submission %d", i, t.Kind, t.Graph)
		}
		if t.Kind != stages.KindGraph {
			continue
		}
		g := &img.Graphs[t.Graph]
		if g.Task != stages.TaskID(i) {
			return nil, refuse(ErrInvalidImage, "task %d names graph submission %d, which belongs to task %d", i, t.Graph, g.Task)
		}
		o := d.byHash[g.DefHash]
		if o == nil {
			return nil, refuse(ErrUnknownDefinition, "GRAPH task %d replays Definition %#016x (full_key %#016x), which was never uploaded", i, g.DefHash, g.FullKey)
		}
		if err := d.materialize(o); err != nil {
			return nil, &DefinitionError{Hash: g.DefHash, FullKey: g.FullKey,
				Err: refuse(ErrInvalidImage, "GRAPH task %d replays Definition %#016x (full_key %#016x), whose image does not read: %v", i, g.DefHash, g.FullKey, err)}
		}
		if err := checkBoundary(img, g, o, rootElems); err != nil {
			return nil, refuse(ErrBoundaryMismatch, "GRAPH task %d (%q): %v", i, o.key, err)
		}
		if g.HeapBase%objAlign != 0 && o.heapBytes > 0 {
			return nil, refuse(ErrInvalidImage, "GRAPH task %d heap block at %#x is not %d-byte aligned", i, g.HeapBase, objAlign)
		}
		if o.heapBytes > 0 {
			regions = append(regions, region{g.HeapBase, g.HeapBase + uint64(o.heapBytes), -1, i})
		}
		p.graphBytes += o.heapBytes
		// Boundary views stay inside their roots at this call's offsets.
		for k := range o.tensors {
			ref := &o.tensors[k]
			if ref.src != stages.SrcBoundaryView {
				continue
			}
			b := &img.Args[g.Boundary.Off+uint32(ref.slot)].View
			el, _ := rootElems(b.Root)
			if off := b.Offset + ref.delta; off < 0 || off > el {
				return nil, refuse(ErrInvalidImage, "GRAPH task %d (%q) tensor %d lands at offset %d of a %d-element root", i, o.key, k, off, el)
			}
		}
		p.instOf[i] = int32(len(p.insts))
		p.insts = append(p.insts, instPlan{g: t.Graph, def: o, shell: int32(i), base: next, objBase: int32(p.nObjs)})
		next += int32(len(o.nodes))
		p.nObjs += len(o.roots)
	}
	p.nTasks = int(next)

	// Heap: every alloc root and Graph heap block inside [0, HeapBytes),
	// none overlapping another.
	slices.SortFunc(regions, func(a, b region) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	for i, r := range regions {
		if r.hi < r.lo || r.hi > uint64(img.HeapBytes) {
			return nil, refuse(ErrInvalidImage, "%s [%#x, %#x) is outside the run heap of %d bytes", what(r), r.lo, r.hi, img.HeapBytes)
		}
		if i > 0 && regions[i-1].hi > r.lo {
			return nil, refuse(ErrInvalidImage, "%s [%#x, %#x) overlaps %s [%#x, %#x)", what(r), r.lo, r.hi, what(regions[i-1]), regions[i-1].lo, regions[i-1].hi)
		}
	}

	// Ordinary fanout CSR (consumers ascending).
	p.foOff, p.foIdx = fanoutCSR[stages.TaskID, int32](nt, len(img.Fanin), func(c int) []stages.TaskID {
		s := img.Tasks[c].Fanin
		return img.Fanin[s.Off : s.Off+s.N]
	})
	return p, nil
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
