package npu

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hbg-dev/hbg/stages"
)

// The rules of Die.check, one method per refusal, and the phases that call
// them in order (testdata/check has a forged image for each).

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
