package npu

import (
	"fmt"
	"math"

	"github.com/hbg-dev/hbg/stages"
)

// The simulation is a discrete-event loop on virtual time. Its state (sim)
// is plain data; step(ev) is the only function that changes it, and it
// returns the events the change schedules instead of queueing them itself:
// state in, events out, like etcd raft's Step/Ready. The driver (run) owns
// the event heap, numbers events (time, seq) and feeds them back. Why:
//
//   - determinism: nothing but the event decides what happens next; ties in
//     time break on seq, the order events were produced, so the same image
//     gives the same timeline and digests bit for bit;
//   - the AICPU threads (3 schedulers + 1 resolver) are agents that act one
//     action at a time, each action costing simulated time, not goroutines:
//     concurrency is modelled, never executed;
//   - step could be tested alone, fed events with its state inspected; today
//     the tests drive whole images through run, and none feeds step alone.
//
// Agents: scheduler s owns clusters c%S == s. One action of a scheduler is,
// by priority: collect one finished subtask from its cores; activate at most
// one outer GRAPH task and materialize at most one slice per loop; dispatch
// one block of a ready task (MIX first, then the older of the AIC and AIV
// heads) onto its free cores. The resolver completes one task per action
// (wakes its consumers, routes the ready ones) or retires one dummy, alloc
// or predicated-off task. An action's effects are visible at its start; the
// agent is busy for its cost; a subtask starts on its core when the
// dispatch action ends.

type evKind uint8

const (
	evBoot    evKind = iota // classification done: route the initially ready tasks
	evWake                  // agent a acts
	evCoreEnd               // the subtask on core a ends
)

type event struct {
	t    int64
	seq  uint64
	kind evKind
	a    int32
}

// eventHeap is a binary min-heap on (t, seq), without container/heap's
// interface boxing.
type eventHeap []event

func (e *event) less(o *event) bool { return e.t < o.t || (e.t == o.t && e.seq < o.seq) }

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].less(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q[r].less(&q[l]) {
			m = r
		}
		if !q[m].less(&q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// fifo is a queue of task (or instance, or core) numbers.
type fifo struct {
	q []int32
	h int
}

func (f *fifo) reset()         { f.q, f.h = f.q[:0], 0 }
func (f *fifo) push(x int32)   { f.q = append(f.q, x) }
func (f *fifo) len() int       { return len(f.q) - f.h }
func (f *fifo) peek() int32    { return f.q[f.h] }
func (f *fifo) pop() (x int32) { x = f.q[f.h]; f.h++; return x }

const (
	stWaiting uint8 = iota
	stReady
	stRunning
	stDone
)

// dtask is one device task: an ordinary task, an outer GRAPH task (shell)
// or a Graph node.
type dtask struct {
	kind      stages.Kind
	state     uint8
	skipped   bool
	pred      bool
	kern      [3]stages.KernelID
	bn        int32
	remaining int32 // unmet producers
	next      int32 // next block to dispatch
	ended     int32
	collected int32
	src       int32 // image task (ordinary, shell) or the shell (node)
	inst      int32 // instance (shell, node) or -1
	node      int32 // node index or -1
	first     int64 // first block's start
	last      int64 // last block's end
	doneAt    int64 // completed by the resolver
	in        uint64
	order     uint64  // the order it became ready in
	bytes     float64 // bytes touched by the whole task
	cpIn      int64
	cp        int64
	cpPred    int32
}

type core struct {
	task     int32 // -1 free
	block    int32
	start    int64
	dur      int64
	finished bool
}

type agent struct {
	free    int64
	pending bool
	didAct  bool
	didPrep bool
	fin     fifo // finished cores to collect (schedulers)
}

type instRT struct {
	materialized int32
	remaining    int32
	gate         uint8
	localized    bool
	cpAcc        int64
	cpPred       int32
}

// sim is the whole simulation state; buffers are reused across launches.
type sim struct {
	cfg  Config
	dev  *Die
	p    *plan
	img  *stages.RunImage
	now  int64
	last int64

	tasks  []dtask
	insts  []instRT
	cores  []core
	agents []agent
	nSched int

	ready      [3]fifo
	dummy      fifo
	done       fifo
	graphReady fifo
	graphPrep  fifo
	readySeq   uint64
	running    int

	objs []memObj

	kcode []uint64
	kfold [][]uint64
	kint  []float64
	ktch  [][]stages.Touch

	retired, kernels, skippedN, dummies, allocs, subtasks int

	busy     []int64
	timeline []Slice
	heap     eventHeap
	out      []event

	race raceState
}

func (s *sim) emit(t int64, k evKind, a int32) {
	s.out = append(s.out, event{t: t, kind: k, a: a})
}

// wake schedules agent a to act at t (or when it is free).
func (s *sim) wake(a int, t int64) {
	ag := &s.agents[a]
	if ag.pending {
		return
	}
	ag.pending = true
	s.emit(max(t, ag.free), evWake, int32(a))
}

func (s *sim) resolver() int { return s.nSched }

// step applies one event to the state and returns the events it schedules.
// The returned slice is valid until the next call.
func (s *sim) step(ev event) []event {
	s.out = s.out[:0]
	s.now = ev.t
	s.last = max(s.last, ev.t)
	switch ev.kind {
	case evBoot:
		s.boot()
	case evWake:
		s.act(int(ev.a))
	case evCoreEnd:
		s.coreEnd(ev.a)
	}
	return s.out
}

func (s *sim) boot() {
	for i := 0; i < s.p.nOrd; i++ {
		t := &s.tasks[i]
		if t.kind == stages.KindGraph {
			s.graphPrep.push(t.inst)
		}
		if t.remaining == 0 {
			s.route(int32(i))
		}
	}
	for a := range s.agents {
		s.wake(a, s.now)
	}
}

// act runs one action of agent a. While it acts the agent counts as
// pending, so work it creates for itself does not wake it early; after a
// non-empty action it wakes again when its cost has elapsed.
func (s *sim) act(a int) {
	ag := &s.agents[a]
	var cost int64
	if a == s.resolver() {
		cost = s.resolveAct()
	} else {
		cost = s.schedAct(a)
	}
	ag = &s.agents[a]
	if cost > 0 {
		ag.free = s.now + cost
		s.last = max(s.last, ag.free)
		s.emit(ag.free, evWake, int32(a)) // pending stays set
		return
	}
	ag.pending = false
}

func (s *sim) schedAct(a int) int64 {
	ag := &s.agents[a]
	if ag.fin.len() > 0 {
		return s.collect(ag.fin.pop())
	}
	if !ag.didAct && s.graphReady.len() > 0 {
		ag.didAct = true
		return s.activateShell(s.graphReady.pop())
	}
	if !ag.didPrep && s.graphPrep.len() > 0 {
		ag.didPrep = true
		return s.prepare(s.graphPrep.pop())
	}
	if c := s.dispatch(a); c > 0 {
		return c
	}
	if ag.didAct || ag.didPrep {
		// End of this scheduler loop: the next may activate and prepare.
		ag.didAct, ag.didPrep = false, false
		if s.graphReady.len() > 0 || s.graphPrep.len() > 0 {
			return s.schedAct(a)
		}
	}
	return 0
}

func (s *sim) resolveAct() int64 {
	if s.done.len() > 0 {
		return s.complete(s.done.pop())
	}
	if s.dummy.len() > 0 {
		return s.cfg.RetireNs + s.complete(s.dummy.pop())
	}
	return 0
}

// ---------------------------------------------------------------- cores

func (s *sim) aiv(cl int) (int, int) { c := s.cfg.Clusters + 2*cl; return c, c + 1 }

func (s *sim) owner(c int) int {
	cl := c
	if c >= s.cfg.Clusters {
		cl = (c - s.cfg.Clusters) / 2
	}
	return cl % s.nSched
}

// freeCore finds a's lowest free core of a shape (for MIX: a cluster with
// all three cores free), or -1.
func (s *sim) freeCore(a, shape int) int {
	for cl := a; cl < s.cfg.Clusters; cl += s.nSched {
		v0, v1 := s.aiv(cl)
		switch shape {
		case shapeAIC:
			if s.cores[cl].task < 0 {
				return cl
			}
		case shapeAIV:
			if s.cores[v0].task < 0 {
				return v0
			}
			if s.cores[v1].task < 0 {
				return v1
			}
		case shapeMIX:
			if s.cores[cl].task < 0 && s.cores[v0].task < 0 && s.cores[v1].task < 0 {
				return cl
			}
		}
	}
	return -1
}

func (s *sim) dispatch(a int) int64 {
	if s.ready[shapeMIX].len() > 0 {
		if c := s.freeCore(a, shapeMIX); c >= 0 {
			return s.startBlock(shapeMIX, c)
		}
	}
	best, bc := -1, -1
	var bseq uint64
	for _, sh := range [2]int{shapeAIC, shapeAIV} {
		if s.ready[sh].len() == 0 {
			continue
		}
		c := s.freeCore(a, sh)
		if c < 0 {
			continue
		}
		hs := s.tasks[s.ready[sh].peek()].order
		if best < 0 || hs < bseq {
			best, bc, bseq = sh, c, hs
		}
	}
	if best < 0 {
		return 0
	}
	return s.startBlock(best, bc)
}

// startBlock dispatches the next block of the head task of queue sh onto
// core c (a MIX block onto cluster c's three cores).
func (s *sim) startBlock(sh, c int) int64 {
	q := &s.ready[sh]
	ti := q.peek()
	t := &s.tasks[ti]
	b := t.next
	t.next++
	if t.next == t.bn {
		q.pop()
	}
	start := s.now + s.cfg.SchedDispatchNs
	if b == 0 {
		t.state = stRunning
		t.first = start
		s.readInputs(ti)
	}
	n := 1
	if sh == shapeMIX {
		n = 3
	}
	s.running += n
	dur := s.blockDur(t, sh)
	switch sh {
	case shapeAIC:
		s.claim(c, ti, t.kern[0], b, start, dur)
	case shapeAIV:
		s.claim(c, ti, t.kern[1], b, start, dur)
	default:
		v0, v1 := s.aiv(c)
		k2 := t.kern[2]
		if k2 < 0 {
			k2 = t.kern[1]
		}
		s.claim(c, ti, t.kern[0], b, start, dur)
		s.claim(v0, ti, t.kern[1], b, start, dur)
		s.claim(v1, ti, k2, b, start, dur)
	}
	s.subtasks++
	s.emit(start+dur, evCoreEnd, int32(c))
	return s.cfg.SchedDispatchNs
}

// claim puts block b of task ti on core c.
func (s *sim) claim(c int, ti int32, k stages.KernelID, b int32, start, dur int64) {
	s.cores[c] = core{task: ti, block: b, start: start, dur: dur}
	s.busy[c] += dur
	if s.cfg.Timeline {
		t := &s.tasks[ti]
		s.timeline = append(s.timeline, Slice{Core: int32(c), Task: stages.TaskID(t.src), Node: t.node, Kernel: k, Block: b, Start: start, Dur: dur})
	}
}

// blockDur is the cost model: per-dispatch overhead + max(bytes / bandwidth
// share, ops / core throughput), bytes being the task's touched bytes split
// across its blocks, the share being HBM bandwidth over the cores running
// now (capped per core). A MIX block's three cores read its bytes together,
// so it draws three cores' shares (and caps): one share would charge the
// block's whole traffic to a third of the bandwidth it holds. Explicit
// float64 conversions keep the compiler from fusing multiply-adds, so the
// result is the same on every platform.
func (s *sim) blockDur(t *dtask, sh int) int64 {
	bytes := float64(t.bytes / float64(t.bn))
	cores := 1.0
	if sh == shapeMIX {
		cores = 3
	}
	share := float64(s.cfg.HBMBytesPerSec * cores / float64(max(s.running, 1)))
	share = min(share, float64(s.cfg.CoreBytesPerSec*cores))
	k := t.kern[0]
	ops := s.cfg.AICOpsPerSec
	if sh == shapeAIV {
		k = t.kern[1]
		ops = s.cfg.AIVOpsPerSec
	}
	in := s.intensity(k, sh)
	mem := float64(bytes / share)
	cmp := float64(float64(bytes*in) / ops)
	ns := float64(max(mem, cmp) * 1e9)
	return s.cfg.DispatchNs + int64(math.Ceil(ns))
}

func (s *sim) intensity(k stages.KernelID, sh int) float64 {
	if k >= 0 && int(k) < len(s.kint) && s.kint[k] > 0 {
		return s.kint[k]
	}
	if sh == shapeAIV {
		return s.cfg.AIVIntensity
	}
	return s.cfg.AICIntensity
}

func (s *sim) codeOf(k stages.KernelID) uint64 {
	if k >= 0 && int(k) < len(s.kcode) {
		return s.kcode[k]
	}
	return mix(0x6b65726e656c, uint64(int64(k))) // "kernel #id"
}

func (s *sim) coreEnd(c int32) {
	co := &s.cores[c]
	co.finished = true
	t := &s.tasks[co.task]
	t.ended++
	t.last = s.now
	if t.kind == stages.KindMIX {
		s.running -= 3
	} else {
		s.running--
	}
	if t.ended == t.bn {
		s.writeOutputs(co.task)
	}
	a := s.owner(int(c))
	s.agents[a].fin.push(c)
	s.wake(a, s.now)
}

// collect frees a finished core (a MIX block's three) and, when it was the
// task's last block, hands the task to the resolver.
func (s *sim) collect(c int32) int64 {
	co := &s.cores[c]
	ti := co.task
	t := &s.tasks[ti]
	co.task, co.finished = -1, false
	if t.kind == stages.KindMIX {
		v0, v1 := s.aiv(int(c))
		s.cores[v0].task, s.cores[v1].task = -1, -1
	}
	t.collected++
	if t.collected == t.bn {
		s.done.push(ti)
		s.wake(s.resolver(), s.now+s.cfg.SchedCollectNs)
	}
	return s.cfg.SchedCollectNs
}

// ---------------------------------------------------------------- tasks

// route sends a task whose producers are all complete to its queue: GRAPH
// shells to the graph-ready queue, dummy, alloc and predicated-off tasks to
// the resolver, kernels to their shape's ready queue. It returns the cost
// of evaluating a predicate.
func (s *sim) route(ti int32) int64 {
	t := &s.tasks[ti]
	t.state = stReady
	switch t.kind {
	case stages.KindGraph:
		s.graphReady.push(ti)
		for a := 0; a < s.nSched; a++ {
			s.wake(a, s.now)
		}
		return 0
	case stages.KindDummy, stages.KindAlloc:
		s.dummy.push(ti)
		s.wake(s.resolver(), s.now)
		return 0
	}
	var cost int64
	if t.pred {
		cost = s.cfg.PredicateNs
		if !s.evalPred(ti) {
			t.skipped = true
			s.dummy.push(ti)
			s.wake(s.resolver(), s.now)
			return cost
		}
	}
	sh := shapeOf(t.kind)
	t.order = s.readySeq
	s.readySeq++
	s.ready[sh].push(ti)
	for a := 0; a < s.nSched; a++ {
		if s.freeCore(a, sh) >= 0 {
			s.wake(a, s.now)
		}
	}
	return cost
}

// release tells consumer c that producer p completed.
func (s *sim) release(c, p int32) int64 {
	ct := &s.tasks[c]
	if cp := s.tasks[p].cp; cp > ct.cpIn || ct.cpPred < 0 {
		ct.cpIn, ct.cpPred = cp, p
	}
	ct.remaining--
	if ct.remaining == 0 {
		return s.route(c)
	}
	return 0
}

// complete finishes a task: consumers are released (a node's from its
// Definition's fanout CSR), and a node that was its instance's last
// completes the outer task too.
func (s *sim) complete(ti int32) int64 {
	t := &s.tasks[ti]
	t.state = stDone
	t.doneAt = s.now
	cost := s.cfg.ResolveNs
	span := int64(0)
	switch {
	case t.kind == stages.KindGraph:
		in := &s.insts[t.inst]
		t.cp, t.cpPred = in.cpAcc, in.cpPred
	default:
		if t.next > 0 {
			span = t.last - t.first
		}
		t.cp = t.cpIn + span
		s.retired++
		switch {
		case t.skipped:
			s.skippedN++
		case t.kind == stages.KindDummy:
			s.dummies++
		case t.kind == stages.KindAlloc:
			s.allocs++
		default:
			s.kernels++
		}
	}
	if t.node >= 0 {
		ip := &s.p.insts[t.inst]
		in := &s.insts[t.inst]
		o := ip.def
		for _, c := range o.foIdx[o.foOff[t.node]:o.foOff[t.node+1]] {
			cost += s.cfg.WakeNs + s.release(ip.base+int32(c), ti)
		}
		if t.cp > in.cpAcc || in.cpPred < 0 {
			in.cpAcc, in.cpPred = t.cp, ti
		}
		in.remaining--
		if in.remaining == 0 {
			cost += s.complete(ip.shell)
		}
		return cost
	}
	for _, c := range s.p.foIdx[s.p.foOff[ti]:s.p.foOff[ti+1]] {
		cost += s.cfg.WakeNs + s.release(c, ti)
	}
	return cost
}

// activateShell: a scheduler pops an outer task whose own fanin is met and
// sets gate bit 0x2; whoever sets the second bit activates the instance.
func (s *sim) activateShell(ti int32) int64 {
	t := &s.tasks[ti]
	in := &s.insts[t.inst]
	in.gate |= 2
	cost := s.cfg.GraphActivateNs
	if in.gate == 3 {
		cost += s.activate(t.inst)
	}
	return cost
}

// prepare materializes the next slice of an instance's nodes (the first
// slice also localizes it), requeueing it while nodes remain; the last
// slice sets gate bit 0x1.
func (s *sim) prepare(ii int32) int64 {
	in := &s.insts[ii]
	ip := &s.p.insts[ii]
	n := int32(len(ip.def.nodes))
	var cost int64
	if !in.localized {
		in.localized = true
		cost += s.cfg.GraphLocalizeNs
	}
	k := min(int32(s.cfg.MaterializeSlice), n-in.materialized)
	in.materialized += k
	cost += int64(k) * s.cfg.MaterializeNodeNs
	if in.materialized < n {
		s.graphPrep.push(ii)
		return cost
	}
	in.gate |= 1
	if in.gate == 3 {
		cost += s.activate(ii)
	}
	return cost
}

// activate routes an instance's root nodes; their producers are the outer
// task's.
func (s *sim) activate(ii int32) int64 {
	ip := &s.p.insts[ii]
	shell := &s.tasks[ip.shell]
	if len(ip.def.nodes) == 0 {
		return s.complete(ip.shell)
	}
	var cost int64
	for _, r := range ip.def.entry {
		ti := ip.base + int32(r)
		t := &s.tasks[ti]
		t.cpIn, t.cpPred = shell.cpIn, shell.cpPred
		cost += s.route(ti)
	}
	return cost
}

// ---------------------------------------------------------------- data

// rarg is a task argument resolved to a memory object.
type rarg struct {
	obj  int32
	tag  stages.Tag
	off  int64
	n    int64
	esz  int64
	rows int64 // the view's dim-0 extent (0 for rank 0), for Kernel.Touch
	cols int64 // its last dim's extent (0 below rank 2), for Kernel.Touch
	lh   uint64
	kind stages.Kind
}

// arg resolves argument i of task t: an image argument, or a node's tensor
// template rebound for its instance (boundary exact: the call's boundary
// tensor; boundary view: its root at offset + Delta with the template's
// layout; internal and own output: the instance's internal root).
func (s *sim) arg(t *dtask, i uint32) rarg {
	img, p := s.img, s.p
	if t.node < 0 {
		ai := img.Tasks[t.src].Args.Off + i
		a := &img.Args[ai]
		return rarg{obj: p.rootObj[a.View.Root], tag: a.Tag, off: a.View.Offset, n: a.View.Elems(), esz: a.View.DType.Size(), rows: dim0(&a.View), cols: dimLast(&a.View), lh: p.lh[ai]}
	}
	ip := &p.insts[t.inst]
	o := ip.def
	return s.ref(ip, &o.tensors[o.nodes[t.node].tensors.Off+i])
}

func (s *sim) ref(ip *instPlan, ref *devTensor) rarg {
	r := rarg{tag: ref.tag, off: ref.delta, n: ref.n, esz: int64(ref.esz), rows: ref.rows, cols: ref.cols, lh: ref.lh}
	switch ref.src {
	case stages.SrcBoundaryExact, stages.SrcBoundaryView:
		g := &s.img.Graphs[ip.g]
		b := &s.img.Args[g.Boundary.Off+uint32(ref.slot)].View
		r.obj = s.p.rootObj[b.Root]
		r.off = b.Offset
		if ref.src == stages.SrcBoundaryView {
			r.off += ref.delta
		}
	default:
		r.obj = ip.objBase + ref.slot
	}
	return r
}

// dim0 is a view's dim-0 extent, 0 for a rank-0 view.
func dim0(v *stages.View) int64 {
	if v.NDims == 0 {
		return 0
	}
	return v.Shape[0]
}

// dimLast is a view's last dim's extent, 0 below rank 2 (where the last
// dim is dim 0, which Touch.Rows already narrows).
func dimLast(v *stages.View) int64 {
	if v.NDims < 2 {
		return 0
	}
	return v.Shape[min(int(v.NDims), stages.MaxDims)-1]
}

func (s *sim) nargs(t *dtask) uint32 {
	if t.node < 0 {
		return s.img.Tasks[t.src].Args.N
	}
	return s.p.insts[t.inst].def.nodes[t.node].tensors.N
}

func (s *sim) scalarsOf(t *dtask, f func(v uint64)) {
	if t.node < 0 {
		sp := s.img.Tasks[t.src].Scalars
		for _, v := range s.img.Scalars[sp.Off : sp.Off+sp.N] {
			f(v)
		}
		return
	}
	ip := &s.p.insts[t.inst]
	def := ip.def
	sp := def.nodes[t.node].scalars
	g := &s.img.Graphs[ip.g]
	for _, sc := range def.scalars[sp.Off : sp.Off+sp.N] {
		if sc.Boundary {
			f(s.img.Scalars[g.Scalars.Off+uint32(sc.Slot)])
		} else {
			f(sc.Value)
		}
	}
}

// readInputs computes the task's input digest and touched bytes when its
// first block starts.
func (s *sim) readInputs(ti int32) {
	t := &s.tasks[ti]
	var code uint64
	switch t.kind {
	case stages.KindAIC:
		code = s.codeOf(t.kern[0])
	case stages.KindAIV:
		code = s.codeOf(t.kern[1])
	default:
		k2 := t.kern[2]
		if k2 < 0 {
			k2 = t.kern[1]
		}
		code = mix(mix(s.codeOf(t.kern[0]), s.codeOf(t.kern[1])), s.codeOf(k2))
	}
	h := mix(mix(code, uint64(t.kind)), uint64(t.bn))
	ns := uint64(0)
	fk := t.kern[0]
	if t.kind == stages.KindAIV {
		fk = t.kern[1]
	}
	if fk >= 0 && int(fk) < len(s.kfold) {
		for _, v := range s.kfold[fk] {
			h = mix(h, v)
			ns++
		}
	}
	s.scalarsOf(t, func(v uint64) { h = mix(h, v); ns++ })
	h = mix(h, ns)
	n := s.nargs(t)
	h = mix(h, uint64(n))
	var bytes int64
	hinted := s.hinted(t)
	for i := uint32(0); i < n; i++ {
		a := s.arg(t, i)
		// Only arguments tagged input feed the digest, and the declared
		// direction itself does not: the same code is declared inout at
		// one site and output_existing at another (upstream's 37
		// direction-only kernel classes), and computes the same function
		// at both. An inout's old contents are ordered by the TensorMap,
		// but an output_existing's are not, so neither is read.
		x := a.lh
		if a.tag == stages.TagInput {
			x = mix(s.objs[a.obj].read(a.off, a.off+a.n), a.lh)
		}
		h = mix(mix(h, uint64(i)), x)
		// Only the bytes a kernel reads cost HBM time: an argument its
		// kernel hints (Kernel.Touch) counts only the hinted rows and
		// columns. The digest above still reads the whole view, since what
		// a kernel picks depends on its scalars, which the simulation does
		// not interpret.
		nb := a.n
		if hinted {
			r, c := s.touched(t, i)
			if r > 0 && r < a.rows {
				nb = r * (nb / a.rows)
			}
			if c > 0 && c < a.cols {
				nb = c * (nb / a.cols)
			}
		}
		bytes += nb * a.esz
	}
	t.in = h
	t.bytes = float64(bytes)
}

// hinted reports whether any of task t's kernels has a Touch hint, so
// that the tasks of the many unhinted kernels skip the per-argument lookup.
func (s *sim) hinted(t *dtask) bool {
	for _, k := range t.kern {
		if k >= 0 && int(k) < len(s.ktch) && len(s.ktch[k]) > 0 {
			return true
		}
	}
	return false
}

// touched is how many dim-0 rows and last-dim columns of argument i task
// t's kernels read, 0 for all of them. A MIX task's kernels share its
// arguments: an argument is narrowed in a dimension only when each of them
// hints that dimension, to the most any reads.
func (s *sim) touched(t *dtask, i uint32) (rows, cols int64) {
	switch t.kind {
	case stages.KindAIC:
		return s.hint(t.kern[0], i)
	case stages.KindAIV:
		return s.hint(t.kern[1], i)
	}
	first := true
	for _, k := range t.kern {
		if k < 0 {
			continue
		}
		r, c := s.hint(k, i)
		if first {
			rows, cols, first = r, c, false
		} else {
			rows, cols = widest(rows, r), widest(cols, c)
		}
	}
	return rows, cols
}

// hint is kernel k's hint for argument i: rows and columns, 0 for all. A
// count <= 0 is all; of two hints on one argument the larger counts (all
// beats any), so a doubtful table over-counts rather than under-counts.
// Kernels hint an argument or two, so a scan beats a per-argument table.
func (s *sim) hint(k stages.KernelID, i uint32) (rows, cols int64) {
	if k < 0 || int(k) >= len(s.ktch) {
		return 0, 0
	}
	first := true
	for _, h := range s.ktch[k] {
		if h.Arg != int(i) {
			continue
		}
		r, c := max(h.Rows, 0), max(h.Cols, 0)
		if first {
			rows, cols, first = r, c, false
		} else {
			rows, cols = widest(rows, r), widest(cols, c)
		}
	}
	return rows, cols
}

// widest of two counts where 0 means all.
func widest(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}

// writeOutputs writes every output's digest when the task's last block
// ends: an inout or output_existing argument's adds to what the region held
// (memObj.add), unless the task's kernel is in a declared race group (the
// digest rules in memory.go say why).
func (s *sim) writeOutputs(ti int32) {
	t := &s.tasks[ti]
	n := s.nargs(t)
	keep := s.groupOf(t) == 0
	for i := uint32(0); i < n; i++ {
		a := s.arg(t, i)
		switch {
		case a.tag != stages.TagOutput && a.tag.Writes() && keep:
			s.objs[a.obj].add(a.off, a.off+a.n, mix(t.in, uint64(i)), ti)
		case a.tag.Writes():
			s.objs[a.obj].write(a.off, a.off+a.n, mix(t.in, uint64(i)), ti)
		}
	}
}

// evalPred reads the predicate's element when the task becomes ready.
func (s *sim) evalPred(ti int32) bool {
	t := &s.tasks[ti]
	if t.node < 0 {
		pr := &s.img.Tasks[t.src].Pred
		obj := s.p.rootObj[pr.View.Root]
		return predTrue(pr.Op, s.objs[obj].elemValue(pr.View.Offset+pr.Index), pr.Target)
	}
	ip := &s.p.insts[t.inst]
	pr := &ip.def.preds[ip.def.nodes[t.node].pred]
	a := s.ref(ip, &pr.t)
	return predTrue(pr.op, s.objs[a.obj].elemValue(a.off+pr.index), pr.target)
}

// ---------------------------------------------------------------- driver

// setup resets the state for plan p, reusing every buffer.
func (s *sim) setup(d *Die, p *plan) {
	s.cfg, s.dev, s.p, s.img = d.cfg, d, p, p.img
	s.now, s.last = 0, 0
	s.nSched = s.cfg.Schedulers
	ncores := s.cfg.Cores()
	s.cores = resize(s.cores, ncores)
	for i := range s.cores {
		s.cores[i] = core{task: -1}
	}
	s.busy = resize(s.busy, ncores)
	clear(s.busy)
	s.agents = resize(s.agents, s.nSched+1)
	for i := range s.agents {
		fin := s.agents[i].fin
		fin.reset()
		s.agents[i] = agent{fin: fin}
	}
	for i := range s.ready {
		s.ready[i].reset()
	}
	s.dummy.reset()
	s.done.reset()
	s.graphReady.reset()
	s.graphPrep.reset()
	s.readySeq, s.running = 0, 0
	s.retired, s.kernels, s.skippedN, s.dummies, s.allocs, s.subtasks = 0, 0, 0, 0, 0, 0
	s.timeline = s.timeline[:0]
	s.heap = s.heap[:0]

	// Kernel table.
	ks := d.kernels
	s.kcode = resize(s.kcode, len(ks))
	s.kfold = resize(s.kfold, len(ks))
	s.kint = resize(s.kint, len(ks))
	s.ktch = resize(s.ktch, len(ks))
	s.race.kgroup = resize(s.race.kgroup, len(ks))
	for i := range ks {
		s.race.kgroup[i] = ks[i].RaceGroup
		s.kcode[i] = strHash(ks[i].Code)
		s.kfold[i] = ks[i].Folded
		s.kint[i] = ks[i].Intensity
		s.ktch[i] = ks[i].Touch
	}

	// Tasks.
	img := p.img
	s.tasks = resize(s.tasks, p.nTasks)
	for i := range img.Tasks {
		it := &img.Tasks[i]
		s.tasks[i] = dtask{kind: it.Kind, kern: it.Kernel, bn: max(it.BlockNum, 1), remaining: int32(it.Fanin.N),
			src: int32(i), inst: p.instOf[i], node: -1, pred: it.Pred.Valid, cpPred: -1}
	}
	s.insts = resize(s.insts, len(p.insts))
	for ii := range p.insts {
		ip := &p.insts[ii]
		def := ip.def
		s.insts[ii] = instRT{remaining: int32(len(def.nodes)), cpPred: -1}
		for n := range def.nodes {
			nd := &def.nodes[n]
			s.tasks[int(ip.base)+n] = dtask{kind: nd.kind, kern: nd.kernel, bn: max(nd.blockNum, 1), remaining: int32(nd.fanin.N),
				src: ip.shell, inst: int32(ii), node: int32(n), pred: nd.pred >= 0, cpPred: -1}
		}
	}

	// Memory: entry roots from their names, everything else fresh.
	s.objs = resize(s.objs, p.nObjs)
	for i := 0; i < p.nEntry; i++ {
		s.objs[i].reset(d.entries[i].Elems, d.entryInit[i])
	}
	for i := range p.runRoot {
		r := &p.runRoot[i]
		s.objs[p.nEntry+i].reset(r.Elems, freshDigest(r.DType, r.Elems))
	}
	for ii := range p.insts {
		ip := &p.insts[ii]
		for k := range ip.def.roots {
			r := &ip.def.roots[k]
			s.objs[int(ip.objBase)+k].reset(r.Elems, freshDigest(r.DType, r.Elems))
		}
	}
}

func resize[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// run simulates plan p to completion and builds the result.
func (s *sim) run(d *Die, p *plan) (*Result, error) {
	s.setup(d, p)
	var seq uint64
	threads := int64(s.nSched + 1)
	bootNs := (int64(p.nOrd) + threads - 1) / threads * s.cfg.ClassifyNs
	s.heap.push(event{t: bootNs, seq: seq, kind: evBoot})
	for len(s.heap) > 0 {
		ev := s.heap.pop()
		for _, e := range s.step(ev) {
			seq++
			e.seq = seq
			s.heap.push(e)
		}
	}
	want := p.nTasks - len(p.insts)
	if s.retired != want {
		return nil, fmt.Errorf("npu: simulation stalled with %d of %d device tasks retired", s.retired, want)
	}
	r := s.result(d, p)
	s.segments(r)
	if !s.cfg.NoRace {
		r.Races, r.RaceCount, r.DeclaredRaces = s.detectRaces()
	}
	return r, nil
}

func (s *sim) result(d *Die, p *plan) *Result {
	r := &Result{
		Tasks:      s.retired,
		Kernels:    s.kernels,
		Skipped:    s.skippedN,
		Dummies:    s.dummies,
		Allocs:     s.allocs,
		GraphTasks: len(p.insts),
		Subtasks:   s.subtasks,
		SimNs:      s.last,
		CoreBusyNs: append([]int64(nil), s.busy...),
	}
	if s.cfg.Timeline {
		r.Timeline = append([]Slice(nil), s.timeline...)
	}
	if s.cfg.TaskDigests {
		r.TaskDigests = make([]TaskDigest, 0, p.nTasks-len(p.insts))
		add := func(t *dtask) {
			r.TaskDigests = append(r.TaskDigests, TaskDigest{Ref: TaskRef{Task: stages.TaskID(t.src), Node: t.node}, Kind: t.kind, Kernel: t.kern, In: t.in, Skipped: t.skipped})
		}
		for i := 0; i < p.nOrd; i++ {
			t := &s.tasks[i]
			if t.kind != stages.KindGraph {
				add(t)
				continue
			}
			ip := &p.insts[t.inst]
			for n := range ip.def.nodes {
				add(&s.tasks[int(ip.base)+n])
			}
		}
	}
	h := uint64(0x0d16e57)
	for i := 0; i < p.nEntry; i++ {
		o := &s.objs[i]
		if !o.written && d.entries[i].Kind != stages.RootEntryOutput {
			continue
		}
		od := o.digest()
		r.Outputs = append(r.Outputs, RootDigest{Root: stages.RootID(i), Name: d.entries[i].Name, Digest: od, Written: o.written})
		h = mix(mix(h, uint64(i)), od)
	}
	r.Digest = h
	// Critical path: the task with the longest chain, followed back.
	best := int32(-1)
	for i := range s.tasks {
		t := &s.tasks[i]
		if t.kind != stages.KindGraph && (best < 0 || t.cp > s.tasks[best].cp) {
			best = int32(i)
		}
	}
	if best >= 0 {
		r.CriticalPathNs = s.tasks[best].cp
		for t := best; t >= 0 && len(r.CriticalPath) < len(s.tasks); t = s.tasks[t].cpPred {
			if tk := &s.tasks[t]; tk.kind != stages.KindGraph {
				r.CriticalPath = append(r.CriticalPath, TaskRef{Task: stages.TaskID(tk.src), Node: tk.node})
			}
		}
		for i, j := 0, len(r.CriticalPath)-1; i < j; i, j = i+1, j-1 {
			r.CriticalPath[i], r.CriticalPath[j] = r.CriticalPath[j], r.CriticalPath[i]
		}
	}
	return r
}
