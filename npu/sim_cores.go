package npu

import "github.com/hbg-dev/hbg/stages"

// Cores: which agent owns a core, dispatching a block onto free cores,
// and collecting finished subtasks.

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
	if cost, held := s.dispatchSync(); held {
		return cost
	}
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
	s.place(sh, c, ti, b, start, dur)
	return s.cfg.SchedDispatchNs
}

// place runs block b of task ti on core c from start for dur: one core
// for an AIC or AIV block, cluster c's AIC and both its AIV cores for a
// MIX block (the second AIV runs the third kernel, or the first AIV's
// when the task names none).
func (s *sim) place(sh, c int, ti, b int32, start, dur int64) {
	t := &s.tasks[ti]
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
}

// claim puts block b of task ti on core c.
func (s *sim) claim(c int, ti int32, k stages.KernelID, b int32, start, dur int64) {
	s.cores[c] = core{task: ti, block: b, start: start, dur: dur}
	s.busy[c] += dur
	if s.cfg.Timeline {
		t := &s.tasks[ti]
		sl := Slice{Core: int32(c), Task: stages.TaskID(t.src), Node: t.node, Kernel: k, Block: b, Start: start, Dur: dur}
		if t.node >= 0 {
			sl.Key = s.p.insts[t.inst].def.key
		}
		s.timeline = append(s.timeline, sl)
	}
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

// dispatchSync serves the sync_start lane first, as upstream's Tier-0: the
// oldest ready sync_start task starts all of its block_num blocks at one
// instant, on free cores anywhere on the die, once enough are free for all
// of them. Until they are, the die drains: no other block is dispatched, so
// the cores running blocks free one by one and the cohort cannot starve
// (upstream's global drain; its local fast path, one scheduler's own cores,
// is the case where the die-wide count already suffices). held says a
// sync_start task was served or is draining, so the caller dispatches
// nothing else. The cohort's launch costs one dispatch action.
func (s *sim) dispatchSync() (cost int64, held bool) {
	if s.drain < 0 {
		best := -1
		for sh := range s.syncReady {
			if q := &s.syncReady[sh]; q.len() > 0 && (best < 0 || s.tasks[q.peek()].order < s.tasks[s.syncReady[best].peek()].order) {
				best = sh
			}
		}
		if best < 0 {
			return 0, false
		}
		s.drain = s.syncReady[best].pop()
	}
	ti := s.drain
	t := &s.tasks[ti]
	sh := shapeOf(t.kind)
	if s.freeCount(sh) < int(t.bn) {
		return 0, true
	}
	s.drain = -1
	start := s.now + s.cfg.SchedDispatchNs
	t.state, t.first = stRunning, start
	s.readInputs(ti)
	// The cohort's blocks share HBM from their first instant: each one's
	// duration counts all of them running (startBlock counts the block it
	// starts, with those already running).
	per := 1
	if sh == shapeMIX {
		per = 3
	}
	s.running += per * int(t.bn)
	dur := s.blockDur(t, sh)
	cl := 0
	for b := int32(0); b < t.bn; b++ {
		c := -1
		for ; cl < s.cfg.Clusters && c < 0; cl++ {
			v0, v1 := s.aiv(cl)
			switch sh {
			case shapeAIC:
				if s.cores[cl].task < 0 {
					c = cl
				}
			case shapeAIV:
				if s.cores[v0].task < 0 {
					c = v0
					cl-- // its twin may take the next block
				} else if s.cores[v1].task < 0 {
					c = v1
				}
			default:
				if s.cores[cl].task < 0 && s.cores[v0].task < 0 && s.cores[v1].task < 0 {
					c = cl
				}
			}
		}
		s.place(sh, c, ti, b, start, dur)
	}
	t.next = t.bn
	return s.cfg.SchedDispatchNs, true
}

// freeCount is the number of blocks of shape sh the die could start now:
// free AIC cores, free AIV cores, or clusters with all three cores free.
func (s *sim) freeCount(sh int) int {
	n := 0
	for cl := 0; cl < s.cfg.Clusters; cl++ {
		v0, v1 := s.aiv(cl)
		switch sh {
		case shapeAIC:
			n += b2n(s.cores[cl].task < 0)
		case shapeAIV:
			n += b2n(s.cores[v0].task < 0) + b2n(s.cores[v1].task < 0)
		default:
			n += b2n(s.cores[cl].task < 0 && s.cores[v0].task < 0 && s.cores[v1].task < 0)
		}
	}
	return n
}

func b2n(b bool) int {
	if b {
		return 1
	}
	return 0
}

// syncCapacity is the most blocks of a kind a sync_start cohort can start
// at once on a die of cfg: a wider cohort could never start.
func syncCapacity(cfg *Config, k stages.Kind) int32 {
	if k == stages.KindAIV {
		return int32(2 * cfg.Clusters)
	}
	return int32(cfg.Clusters)
}
