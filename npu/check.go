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
// The device trusts nothing the decoder did: every rule below is one
// refusal, and imageCheckRules lists them in the order they are tried.
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

// checkRule is one refusal: check refuses item i (a task, a root, a
// region; 0 for a rule over the whole image) or passes it.
type checkRule struct {
	name  string
	check func(c *imageCheck, i int) error
}

// viewRule is one refusal of a task's view; at says which.
type viewRule struct {
	name  string
	check func(c *imageCheck, v *stages.View, at viewAt) error
}

// viewAt names a view: task i's argument arg, or its predicate (arg < 0).
type viewAt struct{ task, arg int }

func (a viewAt) String() string {
	if a.arg < 0 {
		return "predicate"
	}
	return fmt.Sprintf("argument %d", a.arg)
}

// The rules by phase, in the order they are tried. Fanin: every producer is
// an earlier task of the image. A forward reference is refused; if the
// forward references close a cycle, the cycle is named. The spans must fit
// the pool together (the decoder checks they are disjoint): the fanout CSR
// is sized by the pool.
var (
	faninRules = []checkRule{
		{"fanin-pool", (*imageCheck).faninInPool},
		{"fanin-task", (*imageCheck).faninInImage},
	}
	orderRules = []checkRule{
		{"fanin-cycle", (*imageCheck).noCycle},
		{"fanin-forward", (*imageCheck).noForward},
	}
	// Roots: entry roots are 0..nEntry-1; run roots take the next objects.
	rootIDRules   = []checkRule{{"root-id", (*imageCheck).rootID}}
	rootSetRules  = []checkRule{{"root-sparse", (*imageCheck).rootsDense}}
	rootDescRules = []checkRule{
		{"root-twice", (*imageCheck).rootOnce},
		{"root-elems", (*imageCheck).rootElemsOK},
	}
	// Tasks: kernel slots, views, Graph links.
	taskRules = []checkRule{
		{"task-kernel-slots", (*imageCheck).kernelSlots},
		{"task-block-num", (*imageCheck).blockNum},
		{"task-launch-flags", (*imageCheck).launchFlags},
		{"task-sync-start", (*imageCheck).syncStart},
	}
	// A GRAPH task's boundary slot may come without a layout
	// (DTypeInvalid): checkBoundary gives it the Definition's. Any other
	// view has a dtype the device knows and at most MaxDims dims, else its
	// element count and strides would read past the shape.
	viewRules = []viewRule{
		{"view-dtype", (*imageCheck).viewDType},
		{"view-dims", (*imageCheck).viewDims},
		{"view-root", (*imageCheck).viewRoot},
		{"view-offset", (*imageCheck).viewOffset},
		{"view-shape", (*imageCheck).viewShape},
		{"view-elems", (*imageCheck).viewElems},
	}
	linkRules  = []checkRule{{"task-graph-link", (*imageCheck).graphLink}}
	graphRules = []checkRule{
		{"graph-owner", (*imageCheck).graphOwner},
		{"graph-uploaded", (*imageCheck).graphUploaded},
		{"graph-reads", (*imageCheck).graphReads},
		{"graph-boundary", (*imageCheck).graphBoundary},
		{"graph-heap-align", (*imageCheck).graphHeapAligned},
		{"graph-tensor-offset", (*imageCheck).graphTensorsInRoot},
	}
	// Heap: every alloc root and Graph heap block inside [0, HeapBytes),
	// none overlapping another.
	heapRules = []checkRule{
		{"heap-bounds", (*imageCheck).regionInHeap},
		{"heap-overlap", (*imageCheck).regionAlone},
	}
)

// imageCheckRules names every rule, in the order check tries them.
func imageCheckRules() []string {
	var names []string
	for _, rs := range [][]checkRule{faninRules, orderRules, rootIDRules, rootSetRules, rootDescRules, taskRules} {
		for _, r := range rs {
			names = append(names, r.name)
		}
	}
	for _, r := range viewRules {
		names = append(names, r.name)
	}
	for _, rs := range [][]checkRule{linkRules, graphRules, heapRules} {
		for _, r := range rs {
			names = append(names, r.name)
		}
	}
	return names
}

// apply tries rules on item i in order; the first refusal stops it.
func (c *imageCheck) apply(rules []checkRule, i int) error {
	for _, r := range rules {
		if err := r.check(c, i); err != nil {
			c.refused = r.name
			return err
		}
	}
	return nil
}

func (c *imageCheck) applyEach(rules []checkRule, n int) error {
	for i := 0; i < n; i++ {
		if err := c.apply(rules, i); err != nil {
			return err
		}
	}
	return nil
}

func (c *imageCheck) fanin() error {
	if err := c.applyEach(faninRules, len(c.img.Tasks)); err != nil {
		return err
	}
	return c.apply(orderRules, 0)
}

func (c *imageCheck) taskFanin(i int) []stages.TaskID {
	s := c.img.Tasks[i].Fanin
	return c.img.Fanin[s.Off : s.Off+s.N]
}

func (c *imageCheck) faninInPool(i int) error {
	s, pool := c.img.Tasks[i].Fanin, uint64(len(c.img.Fanin))
	if c.edges += uint64(s.N); uint64(s.Off)+uint64(s.N) > pool || c.edges > pool {
		return refuse(ErrFanin, "task %d fanin [%d, +%d) runs past the fanin pool of %d (%d edges so far)", i, s.Off, s.N, len(c.img.Fanin), c.edges)
	}
	return nil
}

func (c *imageCheck) faninInImage(i int) error {
	nt := len(c.img.Tasks)
	for _, f := range c.taskFanin(i) {
		if f < 0 || int(f) >= nt {
			return refuse(ErrFanin, "task %d fanin names task %d, which is not in the image (%d tasks)", i, f, nt)
		}
		if int(f) >= i {
			c.forward = true
		}
	}
	return nil
}

func (c *imageCheck) noCycle(int) error {
	if !c.forward {
		return nil
	}
	if cyc := findCycle(c.img); cyc != nil {
		parts := make([]string, len(cyc))
		for i, t := range cyc {
			parts[i] = fmt.Sprint(t)
		}
		return refuse(ErrCycle, "tasks %s (each waits on the next)", strings.Join(parts, " -> "))
	}
	return nil
}

func (c *imageCheck) noForward(int) error {
	if !c.forward {
		return nil
	}
	for i := range c.img.Tasks {
		for _, f := range c.taskFanin(i) {
			if int(f) >= i {
				return refuse(ErrFanin, "task %d fanin names task %d, a later task (submission order must be topological)", i, f)
			}
		}
	}
	return nil
}

func (c *imageCheck) roots() error {
	p, n := c.p, len(c.img.Roots)
	c.maxID = stages.RootID(p.nEntry - 1)
	if err := c.applyEach(rootIDRules, n); err != nil {
		return err
	}
	if err := c.apply(rootSetRules, 0); err != nil {
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
		if err := c.apply(rootDescRules, i); err != nil {
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
		return refuse(ErrInvalidImage, "run root %d has id %d (entry roots are 0..%d; private recording roots never reach the device)", i, r.ID, nEntry-1)
	}
	c.maxID = max(c.maxID, r.ID)
	return nil
}

func (c *imageCheck) rootsDense(int) error {
	if n := len(c.img.Roots); int64(c.maxID) > int64(c.p.nEntry)+16*int64(n)+(1<<16) {
		return refuse(ErrInvalidImage, "run root ids up to %d are too sparse for %d roots", c.maxID, n)
	}
	return nil
}

func (c *imageCheck) rootOnce(i int) error {
	if r := &c.img.Roots[i]; c.p.rootObj[r.ID] >= 0 {
		return refuse(ErrInvalidImage, "run root id %d listed twice", r.ID)
	}
	return nil
}

func (c *imageCheck) rootElemsOK(i int) error {
	if r := &c.img.Roots[i]; r.Elems < 0 || r.Elems > 1<<50 {
		return refuse(ErrInvalidImage, "run root %d has %d elements", r.ID, r.Elems)
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

// task checks task i and, for a GRAPH task, numbers its instance.
func (c *imageCheck) task(i int) error {
	t := &c.img.Tasks[i]
	if err := c.apply(taskRules, i); err != nil {
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
	if err := c.apply(linkRules, i); err != nil || t.Kind != stages.KindGraph {
		return err
	}
	c.def = nil
	if err := c.apply(graphRules, i); err != nil {
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
		return refuse(ErrInvalidImage, "task %d of kind %s has kernel slots %v", i, t.Kind, t.Kernel)
	}
	return nil
}

func (c *imageCheck) blockNum(i int) error {
	if t := &c.img.Tasks[i]; t.BlockNum > maxBlockNum {
		return refuse(ErrInvalidImage, "task %d has block_num %d (at most %d)", i, t.BlockNum, maxBlockNum)
	}
	return nil
}

func (c *imageCheck) launchFlags(i int) error {
	if t := &c.img.Tasks[i]; !t.Launch.Valid() {
		return refuse(ErrInvalidImage, "task %d has launch flags %#x", i, uint8(t.Launch))
	}
	return nil
}

func (c *imageCheck) syncStart(i int) error {
	t, cfg := &c.img.Tasks[i], &c.d.cfg
	if t.Launch&stages.LaunchSyncStart != 0 && max(t.BlockNum, 1) > syncCapacity(cfg, t.Kind) {
		return refuse(ErrInvalidImage, "task %d is sync_start with block_num %d: its blocks start together, and the die has %d %s slots", i, t.BlockNum, syncCapacity(cfg, t.Kind), t.Kind)
	}
	return nil
}

func (c *imageCheck) view(v *stages.View, at viewAt) error {
	for _, r := range viewRules {
		if err := r.check(c, v, at); err != nil {
			c.refused = r.name
			return err
		}
	}
	return nil
}

func (c *imageCheck) viewDType(v *stages.View, at viewAt) error {
	kind := c.img.Tasks[at.task].Kind
	layoutLess := v.DType == stages.DTypeInvalid && at.arg >= 0 && kind == stages.KindGraph
	if !layoutLess && (v.DType == stages.DTypeInvalid || v.DType > stages.UINT64) {
		return refuse(ErrInvalidImage, "task %d (%s) %s has dtype %s", at.task, kind, at, v.DType)
	}
	return nil
}

func (c *imageCheck) viewDims(v *stages.View, at viewAt) error {
	if v.NDims > stages.MaxDims {
		return refuse(ErrInvalidImage, "task %d %s has %d dims (at most %d)", at.task, at, v.NDims, stages.MaxDims)
	}
	return nil
}

func (c *imageCheck) viewRoot(v *stages.View, at viewAt) error {
	if _, ok := c.rootElems(v.Root); !ok {
		return refuse(ErrInvalidImage, "task %d %s views root %d, which is neither an entry root nor a root of this run", at.task, at, v.Root)
	}
	return nil
}

func (c *imageCheck) viewOffset(v *stages.View, at viewAt) error {
	if el, _ := c.rootElems(v.Root); v.Offset < 0 || v.Offset > el {
		return refuse(ErrInvalidImage, "task %d %s offset %d is outside root %d (%d elements)", at.task, at, v.Offset, v.Root, el)
	}
	return nil
}

func (c *imageCheck) viewShape(v *stages.View, at viewAt) error {
	for k := 0; k < int(v.NDims); k++ {
		if v.Shape[k] < 0 || v.Shape[k] > 1<<40 {
			return refuse(ErrInvalidImage, "task %d %s has dimension %d", at.task, at, v.Shape[k])
		}
	}
	return nil
}

func (c *imageCheck) viewElems(v *stages.View, at viewAt) error {
	if v.Elems() > 1<<50 || v.Elems() < 0 {
		return refuse(ErrInvalidImage, "task %d %s has %d elements", at.task, at, v.Elems())
	}
	return nil
}

func (c *imageCheck) graphLink(i int) error {
	if t := &c.img.Tasks[i]; (t.Kind == stages.KindGraph) != (t.Graph >= 0) {
		return refuse(ErrInvalidImage, "task %d of kind %s names graph submission %d", i, t.Kind, t.Graph)
	}
	return nil
}

// graph is GRAPH task i's submission.
func (c *imageCheck) graph(i int) *stages.GraphSubmission {
	return &c.img.Graphs[c.img.Tasks[i].Graph]
}

func (c *imageCheck) graphOwner(i int) error {
	if g := c.graph(i); g.Task != stages.TaskID(i) {
		return refuse(ErrInvalidImage, "task %d names graph submission %d, which belongs to task %d", i, c.img.Tasks[i].Graph, g.Task)
	}
	return nil
}

func (c *imageCheck) graphUploaded(i int) error {
	g := c.graph(i)
	if c.def = c.d.byHash[g.DefHash]; c.def == nil {
		return refuse(ErrUnknownDefinition, "GRAPH task %d replays Definition %#016x (full_key %#016x), which was never uploaded", i, g.DefHash, g.FullKey)
	}
	return nil
}

func (c *imageCheck) graphReads(i int) error {
	if err := c.d.materialize(c.def); err != nil {
		g := c.graph(i)
		return &DefinitionError{Hash: g.DefHash, FullKey: g.FullKey,
			Err: refuse(ErrInvalidImage, "GRAPH task %d replays Definition %#016x (full_key %#016x), whose image does not read: %v", i, g.DefHash, g.FullKey, err)}
	}
	return nil
}

func (c *imageCheck) graphBoundary(i int) error {
	if err := checkBoundary(c.img, c.graph(i), c.def, c.rootElems); err != nil {
		return refuse(ErrBoundaryMismatch, "GRAPH task %d (%q): %v", i, c.def.key, err)
	}
	return nil
}

func (c *imageCheck) graphHeapAligned(i int) error {
	if g := c.graph(i); g.HeapBase%objAlign != 0 && c.def.heapBytes > 0 {
		return refuse(ErrInvalidImage, "GRAPH task %d heap block at %#x is not %d-byte aligned", i, g.HeapBase, objAlign)
	}
	return nil
}

// graphTensorsInRoot: boundary views stay inside their roots at this
// call's offsets.
func (c *imageCheck) graphTensorsInRoot(i int) error {
	g, o := c.graph(i), c.def
	for k := range o.tensors {
		ref := &o.tensors[k]
		if ref.src != stages.SrcBoundaryView {
			continue
		}
		b := &c.img.Args[g.Boundary.Off+uint32(ref.slot)].View
		el, _ := c.rootElems(b.Root)
		if off := b.Offset + ref.delta; off < 0 || off > el {
			return refuse(ErrInvalidImage, "GRAPH task %d (%q) tensor %d lands at offset %d of a %d-element root", i, o.key, k, off, el)
		}
	}
	return nil
}

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
	return c.applyEach(heapRules, len(c.regions))
}

func (c *imageCheck) regionInHeap(i int) error {
	if r := c.regions[i]; r.hi < r.lo || r.hi > uint64(c.img.HeapBytes) {
		return refuse(ErrInvalidImage, "%s [%#x, %#x) is outside the run heap of %d bytes", r, r.lo, r.hi, c.img.HeapBytes)
	}
	return nil
}

func (c *imageCheck) regionAlone(i int) error {
	if r := c.regions[i]; i > 0 && c.regions[i-1].hi > r.lo {
		q := c.regions[i-1]
		return refuse(ErrInvalidImage, "%s [%#x, %#x) overlaps %s [%#x, %#x)", r, r.lo, r.hi, q, q.lo, q.hi)
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
