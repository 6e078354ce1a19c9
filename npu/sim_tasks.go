package npu

import "github.com/hbg-dev/hbg/stages"

// Tasks: routing ready tasks, completion and its fanout, and the on-device
// expansion of GRAPH tasks into their nodes (prepare, activate).

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
	if t.sync {
		// Any scheduler may gather the cohort's cores die-wide.
		s.syncReady[sh].push(ti)
		for a := 0; a < s.nSched; a++ {
			s.wake(a, s.now)
		}
		return cost
	}
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
			if s.cfg.Flows {
				s.flow(ti, ip.base+int32(c))
			}
			cost += s.cfg.FaninNs + s.release(ip.base+int32(c), ti)
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
		if s.cfg.Flows {
			s.flow(ti, c)
		}
		cost += s.cfg.FaninNs + s.release(c, ti)
	}
	return cost
}

// flow notes that task to waited for task from (Config.Flows).
func (s *sim) flow(from, to int32) {
	f, t := &s.tasks[from], &s.tasks[to]
	s.flows = append(s.flows, Flow{From: TaskRef{Task: stages.TaskID(f.src), Node: f.node}, To: TaskRef{Task: stages.TaskID(t.src), Node: t.node}})
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
