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

// imageCheck is one check of a run image: the plan as derived so far and
// what the rules pass between them.
type imageCheck struct {
	d       *Die
	img     *stages.RunImage
	p       *plan
	refused string // the rule that refused

	edges   uint64        // fanin edges of the tasks checked so far
	forward bool          // some fanin names a task not before its consumer
	maxID   stages.RootID // largest root id
	regions []region      // alloc roots and Graph heap blocks
	next    int32         // next Graph node's task number
	def     *defObj       // the GRAPH task's Definition, once looked up
}

// region is a block of the run heap: an alloc root or a Graph heap block.
type region struct {
	lo, hi uint64
	root   stages.RootID // or -1 for a Graph heap block
	task   int           // the GRAPH task of a heap block
}

func (r region) String() string {
	if r.root >= 0 {
		return fmt.Sprintf("root %d", r.root)
	}
	return fmt.Sprintf("GRAPH task %d heap block", r.task)
}

// viewAt names a view: task i's argument arg, or its predicate (arg < 0).
type viewAt struct{ task, arg int }

func (a viewAt) String() string {
	if a.arg < 0 {
		return "predicate"
	}
	return fmt.Sprintf("argument %d", a.arg)
}

// refuse is a refusal by the named rule: every refusal of check goes
// through here, and TestCheckRules finds the rules by these calls (each
// must have a case in testdata/check). The rules are plain methods, called
// in order by the phases below: a table of funcs would cost an indirect
// call per view on every launch.
func (c *imageCheck) refuse(rule string, err error, format string, args ...any) error {
	c.refused = rule
	return refuse(err, format, args...)
}

// fanin: every producer is an earlier task of the image. A forward
// reference is refused; if the forward references close a cycle, the cycle
// is named. The spans must fit the pool together (the decoder checks they
// are disjoint): the fanout CSR is sized by the pool.
func (c *imageCheck) fanin() error {
	for i := range c.img.Tasks {
		if err := c.faninInPool(i); err != nil {
			return err
		}
		if err := c.faninInImage(i); err != nil {
			return err
		}
	}
	if err := c.noCycle(); err != nil {
		return err
	}
	return c.noForward()
}

func (c *imageCheck) taskFanin(i int) []stages.TaskID {
	s := c.img.Tasks[i].Fanin
	return c.img.Fanin[s.Off : s.Off+s.N]
}

func (c *imageCheck) faninInPool(i int) error {
	s, pool := c.img.Tasks[i].Fanin, uint64(len(c.img.Fanin))
	if c.edges += uint64(s.N); uint64(s.Off)+uint64(s.N) > pool || c.edges > pool {
		return c.refuse("fanin-pool", ErrFanin, "task %d fanin [%d, +%d) runs past the fanin pool of %d (%d edges so far)", i, s.Off, s.N, len(c.img.Fanin), c.edges)
	}
	return nil
}

func (c *imageCheck) faninInImage(i int) error {
	nt := len(c.img.Tasks)
	for _, f := range c.taskFanin(i) {
		if f < 0 || int(f) >= nt {
			return c.refuse("fanin-task", ErrFanin, "task %d fanin names task %d, which is not in the image (%d tasks)", i, f, nt)
		}
		if int(f) >= i {
			c.forward = true
		}
	}
	return nil
}

func (c *imageCheck) noCycle() error {
	if !c.forward {
		return nil
	}
	if cyc := findCycle(c.img); cyc != nil {
		parts := make([]string, len(cyc))
		for i, t := range cyc {
			parts[i] = fmt.Sprint(t)
		}
		return c.refuse("fanin-cycle", ErrCycle, "tasks %s (each waits on the next)", strings.Join(parts, " -> "))
	}
	return nil
}

func (c *imageCheck) noForward() error {
	if !c.forward {
		return nil
	}
	for i := range c.img.Tasks {
		for _, f := range c.taskFanin(i) {
			if int(f) >= i {
				return c.refuse("fanin-forward", ErrFanin, "task %d fanin names task %d, a later task (submission order must be topological)", i, f)
			}
		}
	}
	return nil
}

// roots: entry roots are 0..nEntry-1; run roots take the next objects.
func (c *imageCheck) roots() error {
	p := c.p
	c.maxID = stages.RootID(p.nEntry - 1)
	for i := range c.img.Roots {
		if err := c.rootID(i); err != nil {
			return err
		}
	}
	if err := c.rootsDense(); err != nil {
		return err
	}
	p.rootObj = make([]int32, int(c.maxID)+1)
	for i := range p.rootObj {
		p.rootObj[i] = -1
	}
	for i := 0; i < p.nEntry; i++ {
		p.rootObj[i] = int32(i)
	}
	p.nObjs = p.nEntry
	for i := range c.img.Roots {
		if err := c.rootOnce(i); err != nil {
			return err
		}
		if err := c.rootElemsOK(i); err != nil {
			return err
		}
		r := &c.img.Roots[i]
		p.rootObj[r.ID] = int32(p.nObjs)
		p.nObjs++
		b := uint64(r.Elems * r.DType.Size())
		p.allocBytes += int64(b)
		if b > 0 {
			c.regions = append(c.regions, region{r.Addr, r.Addr + b, r.ID, -1})
		}
	}
	p.runRoot = c.img.Roots
	return nil
}

func (c *imageCheck) rootID(i int) error {
	r, nEntry := &c.img.Roots[i], c.p.nEntry
	if r.ID < stages.RootID(nEntry) || r.ID.IsPrivate() {
		return c.refuse("root-id", ErrInvalidImage, "run root %d has id %d (entry roots are 0..%d; private recording roots never reach the device)", i, r.ID, nEntry-1)
	}
	c.maxID = max(c.maxID, r.ID)
	return nil
}

func (c *imageCheck) rootsDense() error {
	if n := len(c.img.Roots); int64(c.maxID) > int64(c.p.nEntry)+16*int64(n)+(1<<16) {
		return c.refuse("root-sparse", ErrInvalidImage, "run root ids up to %d are too sparse for %d roots", c.maxID, n)
	}
	return nil
}

func (c *imageCheck) rootOnce(i int) error {
	if r := &c.img.Roots[i]; c.p.rootObj[r.ID] >= 0 {
		return c.refuse("root-twice", ErrInvalidImage, "run root id %d listed twice", r.ID)
	}
	return nil
}

func (c *imageCheck) rootElemsOK(i int) error {
	if r := &c.img.Roots[i]; r.Elems < 0 || r.Elems > 1<<50 {
		return c.refuse("root-elems", ErrInvalidImage, "run root %d has %d elements", r.ID, r.Elems)
	}
	return nil
}

// rootElems is the element count of an entry root or a root of this run.
func (c *imageCheck) rootElems(id stages.RootID) (int64, bool) {
	p := c.p
	if id < 0 || int(id) >= len(p.rootObj) || p.rootObj[id] < 0 {
		return 0, false
	}
	if int(id) < p.nEntry {
		return c.d.entries[id].Elems, true
	}
	return c.img.Roots[int(p.rootObj[id])-p.nEntry].Elems, true
}

// tasks checks every task and numbers the Graph instances' nodes after
// the image's own tasks.
func (c *imageCheck) tasks() error {
	img, p := c.img, c.p
	nt := len(img.Tasks)
	p.instOf = make([]int32, nt)
	p.lh = make([]uint64, len(img.Args))
	for i := range img.Args {
		p.lh[i] = layoutHash(&img.Args[i].View)
	}
	c.next = int32(nt)
	for i := range img.Tasks {
		p.instOf[i] = -1
		if err := c.task(i); err != nil {
			return err
		}
	}
	p.nTasks = int(c.next)
	return nil
}

// task checks task i (kernel slots, views, Graph link) and, for a GRAPH
// task, numbers its instance.
func (c *imageCheck) task(i int) error {
	t := &c.img.Tasks[i]
	if err := c.kernelSlots(i); err != nil {
		return err
	}
	if err := c.blockNum(i); err != nil {
		return err
	}
	if err := c.launchFlags(i); err != nil {
		return err
	}
	if err := c.syncStart(i); err != nil {
		return err
	}
	for a := t.Args.Off; a < t.Args.Off+t.Args.N; a++ {
		if err := c.view(&c.img.Args[a].View, viewAt{i, int(a - t.Args.Off)}); err != nil {
			return err
		}
	}
	if t.Pred.Valid {
		if err := c.view(&t.Pred.View, viewAt{i, -1}); err != nil {
			return err
		}
	}
	if err := c.graphLink(i); err != nil || t.Kind != stages.KindGraph {
		return err
	}
	if err := c.graph(i); err != nil {
		return err
	}
	p, o := c.p, c.def
	g := &c.img.Graphs[t.Graph]
	if o.heapBytes > 0 {
		c.regions = append(c.regions, region{g.HeapBase, g.HeapBase + uint64(o.heapBytes), -1, i})
	}
	p.graphBytes += o.heapBytes
	p.instOf[i] = int32(len(p.insts))
	p.insts = append(p.insts, instPlan{g: t.Graph, def: o, shell: int32(i), base: c.next, objBase: int32(p.nObjs)})
	c.next += int32(len(o.nodes))
	p.nObjs += len(o.roots)
	return nil
}

func (c *imageCheck) kernelSlots(i int) error {
	if t := &c.img.Tasks[i]; !kernelSlotsOK(t.Kind, t.Kernel) {
		return c.refuse("task-kernel-slots", ErrInvalidImage, "task %d of kind %s has kernel slots %v", i, t.Kind, t.Kernel)
	}
	return nil
}

func (c *imageCheck) blockNum(i int) error {
	if t := &c.img.Tasks[i]; t.BlockNum > maxBlockNum {
		return c.refuse("task-block-num", ErrInvalidImage, "task %d has block_num %d (at most %d)", i, t.BlockNum, maxBlockNum)
	}
	return nil
}

func (c *imageCheck) launchFlags(i int) error {
	if t := &c.img.Tasks[i]; !t.Launch.Valid() {
		return c.refuse("task-launch-flags", ErrInvalidImage, "task %d has launch flags %#x", i, uint8(t.Launch))
	}
	return nil
}

func (c *imageCheck) syncStart(i int) error {
	t, cfg := &c.img.Tasks[i], &c.d.cfg
	if t.Launch&stages.LaunchSyncStart != 0 && max(t.BlockNum, 1) > syncCapacity(cfg, t.Kind) {
		return c.refuse("task-sync-start", ErrInvalidImage, "task %d is sync_start with block_num %d: its blocks start together, and the die has %d %s slots", i, t.BlockNum, syncCapacity(cfg, t.Kind), t.Kind)
	}
	return nil
}

// view checks one view of a task. A GRAPH task's boundary slot may come
// without a layout (DTypeInvalid): checkBoundary gives it the Definition's.
// Any other view has a dtype the device knows and at most MaxDims dims,
// else its element count and strides would read past the shape.
func (c *imageCheck) view(v *stages.View, at viewAt) error {
	// Every launch checks every view: the common case is one pass over
	// the rules' own conditions, inlined; a view that fails one goes
	// through the rules in order, which name it. (A rule left out of this
	// pass would never refuse: its case in testdata/check would fail.)
	kind := c.img.Tasks[at.task].Kind
	if el, ok := c.rootElems(v.Root); dtypeOK(v, kind, at) && dimsOK(v) && ok && offsetOK(v, el) && shapeOK(v) && elemsOK(v) {
		return nil
	}
	if err := c.viewDType(v, at); err != nil {
		return err
	}
	if err := c.viewDims(v, at); err != nil {
		return err
	}
	if err := c.viewRoot(v, at); err != nil {
		return err
	}
	if err := c.viewOffset(v, at); err != nil {
		return err
	}
	if err := c.viewShape(v, at); err != nil {
		return err
	}
	return c.viewElems(v, at)
}

func dtypeOK(v *stages.View, kind stages.Kind, at viewAt) bool {
	layoutLess := v.DType == stages.DTypeInvalid && at.arg >= 0 && kind == stages.KindGraph
	return layoutLess || v.DType != stages.DTypeInvalid && v.DType <= stages.UINT64
}

func dimsOK(v *stages.View) bool { return v.NDims <= stages.MaxDims }

func offsetOK(v *stages.View, el int64) bool { return v.Offset >= 0 && v.Offset <= el }

func shapeOK(v *stages.View) bool {
	for k := 0; k < int(v.NDims); k++ {
		if v.Shape[k] < 0 || v.Shape[k] > 1<<40 {
			return false
		}
	}
	return true
}

func elemsOK(v *stages.View) bool { n := v.Elems(); return n <= 1<<50 && n >= 0 }

func (c *imageCheck) viewDType(v *stages.View, at viewAt) error {
	if kind := c.img.Tasks[at.task].Kind; !dtypeOK(v, kind, at) {
		return c.refuse("view-dtype", ErrInvalidImage, "task %d (%s) %s has dtype %s", at.task, kind, at, v.DType)
	}
	return nil
}

func (c *imageCheck) viewDims(v *stages.View, at viewAt) error {
	if !dimsOK(v) {
		return c.refuse("view-dims", ErrInvalidImage, "task %d %s has %d dims (at most %d)", at.task, at, v.NDims, stages.MaxDims)
	}
	return nil
}

func (c *imageCheck) viewRoot(v *stages.View, at viewAt) error {
	if _, ok := c.rootElems(v.Root); !ok {
		return c.refuse("view-root", ErrInvalidImage, "task %d %s views root %d, which is neither an entry root nor a root of this run", at.task, at, v.Root)
	}
	return nil
}

func (c *imageCheck) viewOffset(v *stages.View, at viewAt) error {
	if el, _ := c.rootElems(v.Root); !offsetOK(v, el) {
		return c.refuse("view-offset", ErrInvalidImage, "task %d %s offset %d is outside root %d (%d elements)", at.task, at, v.Offset, v.Root, el)
	}
	return nil
}

func (c *imageCheck) viewShape(v *stages.View, at viewAt) error {
	for k := 0; k < int(v.NDims); k++ {
		if v.Shape[k] < 0 || v.Shape[k] > 1<<40 {
			return c.refuse("view-shape", ErrInvalidImage, "task %d %s has dimension %d", at.task, at, v.Shape[k])
		}
	}
	return nil
}

func (c *imageCheck) viewElems(v *stages.View, at viewAt) error {
	if !elemsOK(v) {
		return c.refuse("view-elems", ErrInvalidImage, "task %d %s has %d elements", at.task, at, v.Elems())
	}
	return nil
}

func (c *imageCheck) graphLink(i int) error {
	if t := &c.img.Tasks[i]; (t.Kind == stages.KindGraph) != (t.Graph >= 0) {
		return c.refuse("task-graph-link", ErrInvalidImage, "task %d of kind %s names graph submission %d", i, t.Kind, t.Graph)
	}
	return nil
}

// graph checks GRAPH task i against its submission and Definition.
func (c *imageCheck) graph(i int) error {
	c.def = nil
	if err := c.graphOwner(i); err != nil {
		return err
	}
	if err := c.graphUploaded(i); err != nil {
		return err
	}
	if err := c.graphReads(i); err != nil {
		return err
	}
	if err := c.graphBoundary(i); err != nil {
		return err
	}
	if err := c.graphHeapAligned(i); err != nil {
		return err
	}
	return c.graphTensorsInRoot(i)
}

// sub is GRAPH task i's submission.
func (c *imageCheck) sub(i int) *stages.GraphSubmission {
	return &c.img.Graphs[c.img.Tasks[i].Graph]
}

func (c *imageCheck) graphOwner(i int) error {
	if g := c.sub(i); g.Task != stages.TaskID(i) {
		return c.refuse("graph-owner", ErrInvalidImage, "task %d names graph submission %d, which belongs to task %d", i, c.img.Tasks[i].Graph, g.Task)
	}
	return nil
}

func (c *imageCheck) graphUploaded(i int) error {
	g := c.sub(i)
	if c.def = c.d.byHash[g.DefHash]; c.def == nil {
		return c.refuse("graph-uploaded", ErrUnknownDefinition, "GRAPH task %d replays Definition %#016x (full_key %#016x), which was never uploaded", i, g.DefHash, g.FullKey)
	}
	return nil
}

func (c *imageCheck) graphReads(i int) error {
	if err := c.d.materialize(c.def); err != nil {
		g := c.sub(i)
		return &DefinitionError{Hash: g.DefHash, FullKey: g.FullKey,
			Err: c.refuse("graph-reads", ErrInvalidImage, "GRAPH task %d replays Definition %#016x (full_key %#016x), whose image does not read: %v", i, g.DefHash, g.FullKey, err)}
	}
	return nil
}

func (c *imageCheck) graphBoundary(i int) error {
	if err := checkBoundary(c.img, c.sub(i), c.def, c.rootElems); err != nil {
		return c.refuse("graph-boundary", ErrBoundaryMismatch, "GRAPH task %d (%q): %v", i, c.def.key, err)
	}
	return nil
}

func (c *imageCheck) graphHeapAligned(i int) error {
	if g := c.sub(i); g.HeapBase%objAlign != 0 && c.def.heapBytes > 0 {
		return c.refuse("graph-heap-align", ErrInvalidImage, "GRAPH task %d heap block at %#x is not %d-byte aligned", i, g.HeapBase, objAlign)
	}
	return nil
}

// graphTensorsInRoot: boundary views stay inside their roots at this
// call's offsets.
func (c *imageCheck) graphTensorsInRoot(i int) error {
	g, o := c.sub(i), c.def
	for k := range o.tensors {
		ref := &o.tensors[k]
		if ref.src != stages.SrcBoundaryView {
			continue
		}
		b := &c.img.Args[g.Boundary.Off+uint32(ref.slot)].View
		el, _ := c.rootElems(b.Root)
		if off := b.Offset + ref.delta; off < 0 || off > el {
			return c.refuse("graph-tensor-offset", ErrInvalidImage, "GRAPH task %d (%q) tensor %d lands at offset %d of a %d-element root", i, o.key, k, off, el)
		}
	}
	return nil
}

// heap: every alloc root and Graph heap block inside [0, HeapBytes), none
// overlapping another.
func (c *imageCheck) heap() error {
	slices.SortFunc(c.regions, func(a, b region) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	for i := range c.regions {
		if err := c.regionInHeap(i); err != nil {
			return err
		}
		if err := c.regionAlone(i); err != nil {
			return err
		}
	}
	return nil
}

func (c *imageCheck) regionInHeap(i int) error {
	if r := c.regions[i]; r.hi < r.lo || r.hi > uint64(c.img.HeapBytes) {
		return c.refuse("heap-bounds", ErrInvalidImage, "%s [%#x, %#x) is outside the run heap of %d bytes", r, r.lo, r.hi, c.img.HeapBytes)
	}
	return nil
}

func (c *imageCheck) regionAlone(i int) error {
	if r := c.regions[i]; i > 0 && c.regions[i-1].hi > r.lo {
		q := c.regions[i-1]
		return c.refuse("heap-overlap", ErrInvalidImage, "%s [%#x, %#x) overlaps %s [%#x, %#x)", r, r.lo, r.hi, q, q.lo, q.hi)
	}
	return nil
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
