package npu

import (
	"fmt"

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
	sync      bool // sync_start: its blocks start together (dispatchSync)
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

	ready [3]fifo
	// syncReady holds ready sync_start tasks per shape (upstream's
	// ready_sync_queues, served before every other lane); drain is the one
	// taken from them that waits for cores to free (-1: none).
	syncReady  [3]fifo
	drain      int32
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
	abusy    []int64 // per AICPU thread (schedulers, then the resolver)
	timeline []Slice
	flows    []Flow
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
		s.abusy[a] += cost
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
	s.abusy = resize(s.abusy, s.nSched+1)
	clear(s.abusy)
	for i := range s.agents {
		fin := s.agents[i].fin
		fin.reset()
		s.agents[i] = agent{fin: fin}
	}
	for i := range s.ready {
		s.ready[i].reset()
		s.syncReady[i].reset()
	}
	s.drain = -1
	s.dummy.reset()
	s.done.reset()
	s.graphReady.reset()
	s.graphPrep.reset()
	s.readySeq, s.running = 0, 0
	s.retired, s.kernels, s.skippedN, s.dummies, s.allocs, s.subtasks = 0, 0, 0, 0, 0, 0
	s.timeline = s.timeline[:0]
	s.flows = s.flows[:0]
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
		s.tasks[i] = dtask{kind: it.Kind, kern: aivSlot(it.Kind, it.Kernel), bn: max(it.BlockNum, 1), remaining: int32(it.Fanin.N),
			src: int32(i), inst: p.instOf[i], node: -1, pred: it.Pred.Valid, sync: it.Launch&stages.LaunchSyncStart != 0, cpPred: -1}
	}
	s.insts = resize(s.insts, len(p.insts))
	for ii := range p.insts {
		ip := &p.insts[ii]
		def := ip.def
		s.insts[ii] = instRT{remaining: int32(len(def.nodes)), cpPred: -1}
		for n := range def.nodes {
			nd := &def.nodes[n]
			s.tasks[int(ip.base)+n] = dtask{kind: nd.kind, kern: aivSlot(nd.kind, nd.kernel), bn: max(nd.blockNum, 1), remaining: int32(nd.fanin.N),
				src: ip.shell, inst: int32(ii), node: int32(n), pred: nd.pred >= 0, sync: nd.launch&stages.LaunchSyncStart != 0, cpPred: -1}
		}
	}

	// Memory: entry roots from their names, everything else fresh.
	s.objs = resize(s.objs, p.nObjs)
	for i := 0; i < p.nEntry; i++ {
		s.objs[i].reset(d.entries[i].Elems, d.entryInit[i])
		if data := d.entries[i].Data; int64(len(data)) == d.entries[i].Elems {
			s.objs[i].vals = data
		}
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
		var err error
		if r.Races, r.RaceCount, r.DeclaredRaces, err = s.detectRaces(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (s *sim) result(d *Die, p *plan) *Result {
	r := &Result{
		Tasks:       s.retired,
		Kernels:     s.kernels,
		Skipped:     s.skippedN,
		Dummies:     s.dummies,
		Allocs:      s.allocs,
		GraphTasks:  len(p.insts),
		Subtasks:    s.subtasks,
		SimNs:       s.last,
		CoreBusyNs:  append([]int64(nil), s.busy...),
		AICPUBusyNs: append([]int64(nil), s.abusy...),
	}
	r.FaninEdges, r.ShippedEdges = p.img.EdgeCounts()
	for ii := range p.insts {
		o := p.insts[ii].def
		r.FaninEdges += len(o.fanin) + o.implied
		r.ShippedEdges += len(o.fanin)
	}
	if s.cfg.Timeline {
		r.Timeline = append([]Slice(nil), s.timeline...)
	}
	if s.cfg.Flows {
		r.Flows = append([]Flow(nil), s.flows...)
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
