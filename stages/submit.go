package stages

import (
	"fmt"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// heapAlign is the alignment of every block the run heap hands out.
const heapAlign = 512

func alignUp(n int64) int64 { return (n + heapAlign - 1) &^ (heapAlign - 1) }

// grow2 makes room for n more elements, doubling. A run image's pools reach
// tens of thousands of entries in one pass, and append's gentler growth for
// large slices (1.25x) would copy them over and over on a cold pass: 43 MB
// allocated for DSv4 eager's 10 MB of pools. Warm passes reuse the capacity.
func grow2[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	ns := make([]T, len(s), max(2*cap(s), len(s)+n, 64))
	copy(ns, s)
	return ns
}

// OrdinaryPath is the ordinary submit path of one run: it resolves each task's
// dependencies against the TensorMap and writes its descriptor into the run
// image. It implements Submitter with Graph calls run inline (the eager
// form, and the fallback of a call that cannot replay); the Graph pipeline
// intercepts Graph before it reaches OrdinaryPath.
//
// OrdinaryPath is not safe for concurrent use: one actor owns it.
type OrdinaryPath struct {
	nEntry int
	roots  []Root
	// info mirrors roots with what the hot paths read of each (size,
	// creator, manual_dep): 16 bytes a root, where a Root is 80, so a
	// Graph call's boundary of 30-odd roots stays in a few cache lines.
	info    []rootInfo
	tm      TensorMap
	fs      FaninSet
	img     RunImage
	scopes  scopeStack
	heapTop int64
	// bodyErr is the first error of a body run inline by Graph.
	bodyErr error
	// retiring and registering are the regions of ReplayGraph's boundary
	// slots that retire TensorMap entries and that register, once every
	// slot matched.
	retiring, registering []region
	// fullEdges ships every fanin edge; otherwise red reduces each task's
	// as it is submitted (reduce.go) into the image's shipped fanin.
	fullEdges bool
	red       edgeReducer
	// lend is the slots lendArgs lends, the same few kilobytes call after
	// call: they stay in cache, where slots lent from the run image were
	// fresh memory every call (a warm DSv4 pass lends 2,962 args, 330 KB).
	lend []Arg
	// edges bounds the image's fanin (SetMaxEdges).
	edges edgeBound
	// barrier is the latest host wait (HostWait), which every later task
	// waits on, or NoTask; hostWaits every wait of the run.
	barrier   TaskID
	hostWaits []TaskID
}

// NewOrdinaryPath starts a run over the model's entry roots, which take RootIDs
// 0..len(entry)-1.
func NewOrdinaryPath(entry []Root) *OrdinaryPath {
	o := &OrdinaryPath{nEntry: len(entry), barrier: NoTask}
	o.img.narrow = true
	o.roots = append(make([]Root, 0, len(entry)+1024), entry...)
	o.info = make([]rootInfo, len(entry), len(entry)+1024)
	for i := range o.roots {
		o.roots[i].Creator = NoTask
		o.info[i] = rootInfo{elems: o.roots[i].Elems, rootMeta: rootMeta{creator: NoTask, manualDep: o.roots[i].ManualDep}}
	}
	return o
}

// rootInfo is what dependency resolution and boundary matching read of a
// root.
type rootInfo struct {
	elems int64
	rootMeta
}

// SetFullEdges makes the image ship every fanin edge the TensorMap
// resolved (on true) instead of their transitive reduction, from the next
// Reset on.
func (o *OrdinaryPath) SetFullEdges(full bool) { o.fullEdges = full }

// SetMaxEdges bounds the run image's dependency edges (0: DefaultMaxEdges);
// a Submit past it ends the orchestration with an *EdgeBoundError.
func (o *OrdinaryPath) SetMaxEdges(n int64) { o.edges = edgeBound(max(n, 0)) }

// ship reduces the fanin of the task just appended into the shipped fanin.
func (o *OrdinaryPath) ship(fanin []TaskID) {
	if o.fullEdges {
		return
	}
	img := &o.img
	off := len(img.ship)
	img.ship = o.red.add(fanin, grow2(img.ship, len(fanin)))
	img.shipSpan = append(grow2(img.shipSpan, 1), Span{Off: uint32(off), N: uint32(len(img.ship) - off)})
}

// Err is the first error a Graph body run inline returned (Graph has no
// error return of its own).
func (o *OrdinaryPath) Err() error { return o.bodyErr }

// Reset starts the next run, keeping every buffer's storage.
func (o *OrdinaryPath) Reset() {
	o.bodyErr = nil
	o.barrier, o.hostWaits = NoTask, o.hostWaits[:0]
	o.roots = o.roots[:o.nEntry]
	o.info = o.info[:o.nEntry]
	o.tm.Reset()
	o.img.Tasks = o.img.Tasks[:0]
	o.img.Args = o.img.Args[:0]
	o.img.Bound = o.img.Bound[:0]
	o.img.argsBefore = o.img.argsBefore[:0]
	o.img.narrow = true
	o.img.Scalars = o.img.Scalars[:0]
	o.img.Fanin = o.img.Fanin[:0]
	o.img.Roots = o.img.Roots[:0]
	o.img.Graphs = o.img.Graphs[:0]
	o.img.ship = o.img.ship[:0]
	o.img.shipSpan = o.img.shipSpan[:0]
	o.red.reset()
	o.img.HeapBytes = 0
	o.scopes.reset()
	o.heapTop = 0
}

func (o *OrdinaryPath) meta(r RootID) rootMeta { return rootTable(o.info).meta(r) }

// rootTable is the ordinary path's root table as dependency resolution and
// boundary matching read it (rootMetas, RootSizer).
type rootTable []rootInfo

func (t rootTable) meta(r RootID) rootMeta {
	if uint(r) >= uint(len(t)) {
		panic(fmt.Sprintf("stages: task references root %d, but the run has %d roots", r, len(t)))
	}
	return t[r].rootMeta
}

// RootElems implements RootSizer.
func (t rootTable) RootElems(r RootID) int64 { return t[r].elems }

// BoundaryRoots snapshots what a recording needs to know about the roots
// behind a call's boundary, which this run's root table owns.
func (o *OrdinaryPath) BoundaryRoots(boundary []Arg) []BoundaryRoot {
	out := make([]BoundaryRoot, len(boundary))
	for i := range boundary {
		r := &o.info[boundary[i].View.Root]
		out[i] = BoundaryRoot{Elems: r.elems, ManualDep: r.manualDep}
	}
	return out
}

// Root returns a root of this run.
func (o *OrdinaryPath) Root(r RootID) *Root { return &o.roots[r] }

// NumRoots is the number of roots so far, entry roots included.
func (o *OrdinaryPath) NumRoots() int { return len(o.roots) }

// NumTasks is the number of tasks submitted so far (outer GRAPH tasks
// included).
func (o *OrdinaryPath) NumTasks() int { return len(o.img.Tasks) }

// Image is the run image built so far. It is valid until the next Reset.
func (o *OrdinaryPath) Image() *RunImage {
	o.img.HeapBytes = o.heapTop
	return &o.img
}

// Fanin is the resolved fanin of a submitted task.
func (o *OrdinaryPath) Fanin(id TaskID) []TaskID {
	s := o.img.Tasks[id].Fanin
	return o.img.Fanin[s.Off : s.Off+s.N]
}

// Manual reports whether a manual scope is open.
func (o *OrdinaryPath) Manual() bool { return o.scopes.inManual() }

// ScopeBegin opens a scope.
func (o *OrdinaryPath) ScopeBegin(mode ScopeMode) { o.scopes.begin(mode) }

// ScopeEnd closes the innermost scope.
func (o *OrdinaryPath) ScopeEnd() {
	if !o.scopes.end() {
		panic("stages: ScopeEnd without ScopeBegin")
	}
}

// ScopeDepth is the number of open scopes.
func (o *OrdinaryPath) ScopeDepth() int { return o.scopes.depth() }

// newRoot creates a runtime root owned by task and places it on the heap.
func (o *OrdinaryPath) newRoot(name string, dt DType, shape []int64, mdep bool, task TaskID) RootID {
	id := RootID(len(o.roots))
	r := Root{Name: name, Kind: RootAlloc, DType: dt, Shape: shape, Elems: prod(shape), Creator: task, ManualDep: mdep}
	o.roots = append(grow2(o.roots, 1), r)
	o.info = append(grow2(o.info, 1), rootInfo{elems: r.Elems, rootMeta: rootMeta{creator: task, manualDep: mdep}})
	addr := uint64(o.heapTop)
	o.heapTop += alignUp(r.Bytes())
	o.img.Roots = append(grow2(o.img.Roots, 1), RootDesc{ID: id, DType: dt, Elems: r.Elems, Creator: task, ManualDep: mdep, Addr: addr})
	return id
}

// Alloc submits one alloc task creating the roots of specs. The specs' Shape
// slices are retained, not copied: callers pass shapes they do not mutate.
func (o *OrdinaryPath) Alloc(specs []RootSpec) (TaskID, RootID) {
	id := TaskID(len(o.img.Tasks))
	first := RootID(len(o.roots))
	argOff := len(o.img.Args)
	for _, s := range specs {
		r := o.newRoot(s.Name, s.DType, s.Shape, s.ManualDep, id)
		o.img.Args = append(grow2(o.img.Args, 1), Arg{Tag: TagOutput, View: NewView(r, 0, s.DType, s.Shape...)})
	}
	o.img.Tasks = append(grow2(o.img.Tasks, 1), TaskDesc{
		Kind:     KindAlloc,
		Kernel:   [3]KernelID{-1, -1, -1},
		BlockNum: -1,
		Args:     Span{Off: uint32(argOff), N: uint32(len(specs))},
		Scalars:  Span{Off: uint32(len(o.img.Scalars))},
		Fanin:    Span{Off: uint32(len(o.img.Fanin))},
		Graph:    -1,
	})
	o.ship(nil)
	return id, first
}

// Submit submits a kernel or dummy task on the ordinary path.
func (o *OrdinaryPath) Submit(t *Task) TaskID {
	id := TaskID(len(o.img.Tasks))
	argOff := len(o.img.Args)
	o.img.Args = append(grow2(o.img.Args, len(t.Args)), t.Args...)
	args := o.img.Args[argOff:]
	nout := 0
	for i := range args {
		if args[i].Tag == TagOutput {
			v := &args[i].View
			name := ""
			if nout < len(t.OutNames) {
				name = t.OutNames[nout]
			}
			nout++
			v.Root = o.newRoot(name, v.DType, append([]int64(nil), v.ShapeSlice()...), false, id)
			v.Offset = 0
			t.Args[i].View.Root, t.Args[i].View.Offset = v.Root, 0
		}
	}
	resolveFanin(&o.tm, rootTable(o.info), id, args, t.Deps, o.scopes.inManual(), &o.fs)
	o.afterBarrier()
	scOff := len(o.img.Scalars)
	for _, s := range t.Scalars {
		o.img.Scalars = append(grow2(o.img.Scalars, 1), s.Value)
	}
	fanOff := len(o.img.Fanin)
	o.edges.check("", int(id), fanOff+len(o.fs.Out))
	o.img.Fanin = append(grow2(o.img.Fanin, len(o.fs.Out)), o.fs.Out...)
	o.img.Tasks = append(grow2(o.img.Tasks, 1), TaskDesc{
		Kind:     t.Kind,
		Kernel:   t.Kernel,
		BlockNum: t.BlockNum,
		Launch:   t.Launch,
		Args:     Span{Off: uint32(argOff), N: uint32(len(t.Args))},
		Scalars:  Span{Off: uint32(scOff), N: uint32(len(t.Scalars))},
		Fanin:    Span{Off: uint32(fanOff), N: uint32(len(o.fs.Out))},
		Pred:     t.Pred,
		Graph:    -1,
	})
	o.ship(o.fs.Out)
	return id
}

// lendArgs lends n argument slots for a Graph caller to evaluate its
// boundary into (BoundaryWriter). They are the same slots every call: the
// image keeps a matched boundary narrow (RunImage.Bound), so the full args
// are read only during the call.
func (o *OrdinaryPath) lendArgs(n int) []Arg {
	if cap(o.lend) < n {
		o.lend = make([]Arg, max(n, 64))
	}
	return o.lend[:n:n]
}

// lent reports whether b is lendArgs's slots: a Graph call that lends
// again (a nested call of a body run inline) writes over them.
func (o *OrdinaryPath) lent(b []Arg) bool {
	return len(b) > 0 && len(o.lend) > 0 && &o.lend[0] == &b[0]
}

// Graph runs the body inline on the ordinary path.
func (o *OrdinaryPath) Graph(call *GraphCall) TaskID {
	if err := call.Body(o, call.NewBoundary()); err != nil && o.bodyErr == nil {
		o.bodyErr = fmt.Errorf("graph %q: %w", call.Key, err)
	}
	return TaskID(len(o.img.Tasks) - 1)
}

// SubmitGraph adds the outer GRAPH task of a Graph call: its fanin is the
// call's external dependencies (ARCHITECTURE §3: a body task's dependency on
// a task outside the body becomes the outer task's) and what the boundary
// finds against the real TensorMap, and it becomes the producer of every
// boundary tensor whose tag writes, and of every slot in alsoWrites (slots
// the body writes although the caller tagged them input). sub's Task,
// Boundary and Scalars are filled in here; the caller sets FullKey, DefHash
// and heapBytes.
func (o *OrdinaryPath) SubmitGraph(call *GraphCall, sub GraphSubmission, heapBytes int64, alsoWrites []int32) TaskID {
	id := TaskID(len(o.img.Tasks))
	args := call.Boundary
	resolveFanin(&o.tm, rootTable(o.info), id, args, call.ExtDeps, o.scopes.inManual(), &o.fs)
	o.afterBarrier()
	o.registerAlso(args, alsoWrites, id)
	out := o.boundSlots(len(args))
	for i := range args {
		a := &args[i]
		putBound(out[i*imagefmt.CompactArgSize:], a.Tag, a.View.Root, a.View.Offset)
	}
	o.img.Bound = o.img.Bound[:len(o.img.Bound)+len(out)]
	return o.graphTask(call, sub, heapBytes, len(args))
}

// boundSlots is room for n boundary args' records past the end of the
// image's Bound, which the caller extends over them once they are written.
func (o *OrdinaryPath) boundSlots(n int) []byte {
	n *= imagefmt.CompactArgSize
	o.img.Bound = grow2(o.img.Bound, n)
	l := len(o.img.Bound)
	return o.img.Bound[l : l+n : l+n]
}

// registerAlso makes task the producer of the slots in alsoWrites that its
// tags do not already register.
func (o *OrdinaryPath) registerAlso(args []Arg, alsoWrites []int32, task TaskID) {
	if o.scopes.inManual() {
		return
	}
	for _, s := range alsoWrites {
		if a := &args[s]; a.Tag != TagInOut && a.Tag != TagOutputExisting && !a.View.ManualDep && !o.meta(a.View.Root).manualDep {
			o.tm.Register(&a.View, task)
		}
	}
}

// graphTask appends the GRAPH task of a call whose boundary (nb slots) ends
// the image's Bound and whose fanin is in o.fs, and its GraphSubmission.
func (o *OrdinaryPath) graphTask(call *GraphCall, sub GraphSubmission, heapBytes int64, nb int) TaskID {
	id := TaskID(len(o.img.Tasks))
	scalars := call.Scalars
	scOff := len(o.img.Scalars)
	o.img.Scalars = append(grow2(o.img.Scalars, len(scalars)), scalars...)
	fanOff := len(o.img.Fanin)
	o.edges.check("", int(id), fanOff+len(o.fs.Out))
	o.img.Fanin = append(grow2(o.img.Fanin, len(o.fs.Out)), o.fs.Out...)
	sub.Task = id
	sub.Boundary = Span{Off: uint32(o.img.NumBound() - nb), N: uint32(nb)}
	sub.Scalars = Span{Off: uint32(scOff), N: uint32(len(scalars))}
	sub.HeapBase = uint64(o.heapTop)
	o.heapTop += alignUp(heapBytes)
	o.img.Graphs = append(grow2(o.img.Graphs, 1), sub)
	o.img.argsBefore = append(grow2(o.img.argsBefore, 1), uint32(len(o.img.Args)))
	o.img.Tasks = append(grow2(o.img.Tasks, 1), TaskDesc{
		Kind:     KindGraph,
		Kernel:   [3]KernelID{-1, -1, -1},
		BlockNum: -1,
		Args:     sub.Boundary,
		Scalars:  sub.Scalars,
		Fanin:    Span{Off: uint32(fanOff), N: uint32(len(o.fs.Out))},
		Graph:    int32(len(o.img.Graphs) - 1),
	})
	o.ship(o.fs.Out)
	return id
}

// ReplayGraph is Matcher.MatchSignature and SubmitGraph in one pass over
// the boundary, which a warm pass's Graph calls spend most of their time
// walking: each slot is checked against the signature and resolved against
// the TensorMap while it is at hand. On a mismatch nothing is submitted and
// the TensorMap is as it was: an inout's retirements wait until every slot
// has matched. (Deferring them changes no edge: an entry an inout covers
// has its producer in the fanin already when a later slot meets it again,
// and is retired all the same.)
func (o *OrdinaryPath) ReplayGraph(m *Matcher, sig []BoundarySlot, wantScalars, wantExt int, call *GraphCall, sub GraphSubmission, heapBytes int64, alsoWrites []int32) (TaskID, *BoundaryMismatch) {
	if mm := m.matchCounts(sig, wantScalars, wantExt, call); mm != nil {
		return 0, mm
	}
	args, info, tm, fs := call.Boundary, o.info, &o.tm, &o.fs
	manual := o.scopes.inManual()
	id, out, gen := o.replayBegin(m, call, len(args))
	for i := range args {
		a, s := &args[i], &sig[i]
		if a.Tag != s.Tag || !a.View.SameLayout(&s.Layout) {
			return 0, layoutMismatch(call.Key, i, a, s)
		}
		r := a.View.Root
		ri := &info[r]
		if ri.elems != s.RootElems {
			return 0, sizeMismatch(call.Key, i, ri.elems, s)
		}
		if rep := m.alias(r, int32(i), gen); rep != s.AliasRep {
			return 0, aliasMismatch(call.Key, i, rep, s)
		}
		putBound(out[i*imagefmt.CompactArgSize:], a.Tag, r, a.View.Offset)
		if manual || a.Tag == TagOutput {
			continue
		}
		fs.Add(ri.creator)
		if ri.manualDep || a.View.ManualDep {
			continue
		}
		switch a.Tag {
		case TagInput:
			if t := tm.live(r); t != nil {
				t.find(a.View.Offset, a.View.End(), fs)
			}
		case TagInOut:
			g := regionOf(&a.View)
			if t := tm.live(r); t != nil && t.find(g.start, g.end, fs) {
				o.retiring = append(o.retiring, g)
			}
			o.registering = append(o.registering, g)
		case TagOutputExisting:
			o.registering = append(o.registering, regionOf(&a.View))
		}
	}
	o.replayEnd(id, out)
	o.registerAlso(args, alsoWrites, id)
	return o.graphTask(call, sub, heapBytes, len(args)), nil
}

// replayBegin starts a replay of call, nb boundary slots wide: the outer
// task's id, its fanin begun with the call's external dependencies, the
// room its narrow boundary records take in the image (each slot goes in as
// soon as it matched, past Bound's end until every slot has) and the
// call's alias generation.
func (o *OrdinaryPath) replayBegin(m *Matcher, call *GraphCall, nb int) (TaskID, []byte, uint32) {
	id := TaskID(len(o.img.Tasks))
	o.fs.Begin(id)
	for _, d := range call.ExtDeps {
		o.fs.Add(d)
	}
	o.afterBarrier()
	o.retiring, o.registering = o.retiring[:0], o.registering[:0]
	return id, o.boundSlots(nb), m.begin()
}

// replayEnd ends a replay whose every slot matched: its boundary records
// join the image and the TensorMap changes it deferred are made.
func (o *OrdinaryPath) replayEnd(id TaskID, out []byte) {
	o.img.Bound = o.img.Bound[:len(o.img.Bound)+len(out)]
	for _, g := range o.retiring {
		o.tm.slot(g.root).retire(g.start, g.end)
	}
	for _, g := range o.registering {
		o.tm.register(g, id)
	}
}

// ReplayLocs is ReplayGraph for a call by template whose template the
// key's signature has matched already (compileLocs): per slot it checks
// only what a call may change, the root's size and the alias partition,
// and resolves the slot's region from its Loc and span. It reports false,
// having submitted nothing and left the TensorMap as it was, when a check
// fails: the caller then materializes the boundary and ReplayGraph says
// what differs.
func (o *OrdinaryPath) ReplayLocs(m *Matcher, slots []locSlot, wantScalars, wantExt int, call *GraphCall, sub GraphSubmission, heapBytes int64, alsoWrites []int32) (TaskID, bool) {
	locs := call.Locs
	if len(locs) != len(slots) || len(call.Scalars) != wantScalars || len(call.ExtDeps) != wantExt {
		return 0, false
	}
	info, tm, fs := o.info, &o.tm, &o.fs
	manual := o.scopes.inManual()
	id, out, gen := o.replayBegin(m, call, len(locs))
	for i := range locs {
		l, s := &locs[i], &slots[i]
		r := l.Root
		if uint(r) >= uint(len(info)) {
			return 0, false
		}
		ri := &info[r]
		if ri.elems != s.elems || m.alias(r, int32(i), gen) != s.alias {
			return 0, false
		}
		putBound(out[i*imagefmt.CompactArgSize:], s.tag, r, l.Offset)
		if manual || s.tag == TagOutput {
			continue
		}
		fs.Add(ri.creator)
		if ri.manualDep || s.mdep {
			continue
		}
		g := region{r, l.Offset, l.Offset + s.span}
		switch s.tag {
		case TagInput:
			if t := tm.live(r); t != nil {
				t.find(g.start, g.end, fs)
			}
		case TagInOut:
			if t := tm.live(r); t != nil && t.find(g.start, g.end, fs) {
				o.retiring = append(o.retiring, g)
			}
			o.registering = append(o.registering, g)
		case TagOutputExisting:
			o.registering = append(o.registering, g)
		}
	}
	o.replayEnd(id, out)
	if !manual {
		for _, i := range alsoWrites {
			l, s := &locs[i], &slots[i]
			if s.tag != TagInOut && s.tag != TagOutputExisting && !s.mdep && !o.meta(l.Root).manualDep {
				tm.register(region{l.Root, l.Offset, l.Offset + s.span}, id)
			}
		}
	}
	return o.graphTask(call, sub, heapBytes, len(locs)), true
}

// TakeImage hands over the run image built so far and starts the next on
// spare's storage (nil: fresh). The taken image then belongs to the caller:
// a pass takes its image to the replay while the next pass is orchestrated.
func (o *OrdinaryPath) TakeImage(spare *RunImage) *RunImage {
	img := new(RunImage)
	*img = *o.Image()
	if spare == nil {
		spare = img.sizedLike()
	}
	o.img = *spare
	o.Reset()
	return img
}

// sizedLike is an empty image with room for what img holds. A rank's next
// passes are usually its last one again: grown from empty by doubling, a
// fresh image for DSv4's eager pass (16k tasks, about 10 MB) copied and
// discarded twice its size on the way, and its host_orch took 60-100 ms
// where a recycled image's takes 4.
func (img *RunImage) sizedLike() *RunImage {
	return &RunImage{
		Tasks:      make([]TaskDesc, 0, len(img.Tasks)),
		Args:       make([]Arg, 0, len(img.Args)),
		Bound:      make([]byte, 0, len(img.Bound)),
		Scalars:    make([]uint64, 0, len(img.Scalars)),
		Fanin:      make([]TaskID, 0, len(img.Fanin)),
		Roots:      make([]RootDesc, 0, len(img.Roots)),
		Graphs:     make([]GraphSubmission, 0, len(img.Graphs)),
		argsBefore: make([]uint32, 0, len(img.argsBefore)),
		ship:       make([]TaskID, 0, len(img.ship)),
		shipSpan:   make([]Span, 0, len(img.shipSpan)),
	}
}

// FinalizeGraph patches a shell submitted while its key was still
// recording, once the Definition exists: its hash, and its heap block at
// the top of the image's heap.
func (img *RunImage) FinalizeGraph(task TaskID, defHash uint64, heapBytes int64) {
	g := &img.Graphs[img.Tasks[task].Graph]
	g.DefHash = defHash
	g.HeapBase = uint64(img.HeapBytes)
	img.HeapBytes += alignUp(heapBytes)
}

// NumGraphs is the number of Graph submissions so far.
func (o *OrdinaryPath) NumGraphs() int { return len(o.img.Graphs) }
