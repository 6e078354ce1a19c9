package npu

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hbg-dev/hbg/stages"
)

// Race detection (ARCHITECTURE §4). Two device tasks race when they touch
// overlapping elements of one root, at least one of them writing by its tag
// (output, output_existing, inout), and no dependency path joins them. The
// digests only promise the same result for a race-free graph, so a race
// makes any digest comparison meaningless; the detector says so instead.
//
// What counts as an access: every tensor argument of a kernel task (AIC,
// AIV, MIX) that ran, over the element interval [offset, offset+elems) the
// dependency rule uses (a tile of a wider tensor: over each of its rows,
// element for element; another strided view: over the interval it spans);
// and the one element a predicate reads, for every
// predicated task, run or not (the predicate is read either way). Dummy,
// alloc and predicated-off tasks touch nothing else: they run no code. An
// input or no_dep argument reads, the other tags write.
//
// What counts as a path: the run image's fanin, and inside a Graph
// instance its Definition's fanin, with the outer task's edges as the nodes
// run: a node with no internal producer waits on the outer task's
// producers, and the outer task's consumers wait on every node. The
// detector numbers the tasks in one topological order (submission order,
// each GRAPH task replaced in place by an entry point, its nodes and an
// exit point) and walks it once:
//
//   - per root, an interval map of segments, each holding its last writer
//     and the readers since (a persistent list, so splitting a segment
//     shares it): a read is checked against the last writers of what it
//     reads, a write against the last writers and the readers since. An
//     access older than the last writer is not checked again: either it
//     reaches the last writer (and so the new access, if the last writer
//     does), or it raced with the last writer and was reported then. So a
//     graph with a race always reports at least one, and every pair
//     reported is a race, the nearest one;
//   - reachability from a to b (a earlier) comes from a bitset per task
//     over the W tasks before it in the order, built as the union of its
//     producers' bitsets shifted by their distance: exact for b-a <= W,
//     linear in the edges. A farther pair walks b's ancestors backwards,
//     stopping at tasks before a and answering from the bitsets of tasks
//     within W of a.
//
// Roots no kernel writes (weights, mostly) are never tracked.

// raceWindow is W: the bitsets cover the 512 tasks before each task.
const (
	raceWindow = 512
	raceWords  = raceWindow / 64
	// defaultMaxRaces caps Result.Races unless Config.MaxRaces says
	// otherwise; Result.RaceCount counts them all.
	defaultMaxRaces = 256
)

// RaceKind says which accesses of a race write.
type RaceKind uint8

const (
	// RaceWriteWrite: both tasks write the interval.
	RaceWriteWrite RaceKind = iota + 1
	// RaceReadWrite: one reads what the other writes (in either order).
	RaceReadWrite
)

func (k RaceKind) String() string {
	switch k {
	case RaceWriteWrite:
		return "write-write"
	case RaceReadWrite:
		return "read-write"
	}
	return "?"
}

// MarshalText gives the kind's name.
func (k RaceKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// RaceAccess is one side of a race: the device task and the access.
type RaceAccess struct {
	TaskInfo
	// Arg is the argument index, -1 for the predicate's element.
	Arg int32
	Tag stages.Tag
}

// Race is one racing pair. A comes first in submission order.
type Race struct {
	Kind RaceKind
	A, B RaceAccess
	// Root is the root raced on; for a root internal to a Graph instance
	// it is -1 and Graph and Internal name it (the outer task and the
	// Definition's root index).
	Root     stages.RootID
	Graph    stages.TaskID
	Internal int32
	// Lo and Hi bound the element interval both touch, [Lo, Hi).
	Lo, Hi int64
}

func (a *RaceAccess) String() string {
	s := a.TaskInfo.String()
	if a.Arg < 0 {
		return s + " predicate"
	}
	return s + fmt.Sprintf(" arg %d (%s)", a.Arg, a.Tag)
}

func (r *Race) String() string { return fmt.Sprintf("%s race %s", r.Kind, r.Detail()) }

// Detail is the race without its kind: where, and both sides. A report
// that lists races under a heading of its own prints it after the kind
// alone, so that its lines and String name the tasks alike.
func (r *Race) Detail() string {
	root := fmt.Sprintf("root %d", r.Root)
	if r.Root < 0 {
		root = fmt.Sprintf("internal root %d of GRAPH task %d", r.Internal, r.Graph)
	}
	return fmt.Sprintf("on %s [%d, %d): %s and %s", root, r.Lo, r.Hi, r.A.String(), r.B.String())
}

// access is one resolved access, in task order.
type access struct {
	pos    int32
	obj    int32
	arg    int32 // -1: predicate
	tag    stages.Tag
	write  bool
	lo, hi int64
}

// rseg is one segment of a tracked root: its last writer (a position, -1
// none) with the argument, and the readers since (a list in the cell pool).
type rseg struct {
	lo, hi int64
	w      int32
	warg   int32
	rd     int32
}

// rcell is one reader in a persistent list.
type rcell struct {
	pos, arg int32
	next     int32
}

// raceState is the detector's buffers, reused across launches.
type raceState struct {
	// work counts the detector's steps (a producer visited walking back, a
	// pair checked), bounded by Config.MaxRaceWork.
	work   int64
	order  []int32 // position -> sim task, or ^inst for an instance's exit
	posOf  []int32 // sim task -> position (a GRAPH task: its entry)
	outPos []int32 // instance -> its exit's position
	pOff   []int32 // producers CSR, by position
	pIdx   []int32
	anc    []uint64 // raceWords per position
	acc    []access
	wrote  []bool // per memory object
	segs   [][]rseg
	cells  []rcell
	// reach cache and walk stamps, per position
	seen    []uint32
	seenVal []bool
	visit   []uint32
	stamp   uint32
	vstamp  uint32
	stack   []int32
	// races of the current access, by the other position
	cur     []int32 // indexes into races
	lastPos int32
	races   []Race
	count   int
	// declared counts the races among kernels of one declared group
	// (stages.Kernel.RaceGroup); curDecl is the current access's declared
	// partners, so a pair over several segments counts once.
	declared int
	curDecl  []int32
	kgroup   []int32 // per KernelID
}

// detectRaces runs the detector over the finished simulation.
func (s *sim) detectRaces() ([]Race, int, int, error) {
	rs := &s.race
	p := s.p
	s.raceOrder()
	n := len(rs.order)

	// Accesses, and which objects a kernel writes.
	rs.acc = rs.acc[:0]
	rs.wrote = resize(rs.wrote, p.nObjs)
	clear(rs.wrote)
	for pos, ti := range rs.order {
		if ti < 0 {
			continue
		}
		t := &s.tasks[ti]
		if t.pred {
			obj, off := s.predElem(ti)
			rs.acc = append(rs.acc, access{pos: int32(pos), obj: obj, arg: -1, tag: stages.TagInput, lo: off, hi: off + 1})
		}
		if t.skipped || !(t.kind == stages.KindAIC || t.kind == stages.KindAIV || t.kind == stages.KindMIX) {
			continue
		}
		na := s.nargs(t)
		for i := uint32(0); i < na; i++ {
			a := s.arg(t, i)
			w := a.tag.Writes()
			if w {
				rs.wrote[a.obj] = true
			}
			a.each(func(lo, hi int64) {
				rs.acc = append(rs.acc, access{pos: int32(pos), obj: a.obj, arg: int32(i), tag: a.tag, write: w, lo: lo, hi: hi})
			})
		}
	}

	// Reachability bitsets.
	rs.anc = resize(rs.anc, n*raceWords)
	clear(rs.anc)
	for b := 0; b < n; b++ {
		dst := rs.anc[b*raceWords : (b+1)*raceWords]
		for _, a := range rs.pIdx[rs.pOff[b]:rs.pOff[b+1]] {
			d := b - int(a)
			if d > raceWindow {
				continue
			}
			dst[(d-1)/64] |= 1 << uint((d-1)%64)
			shiftOr(dst, rs.anc[int(a)*raceWords:(int(a)+1)*raceWords], d)
		}
	}
	rs.seen = resize(rs.seen, n)
	rs.seenVal = resize(rs.seenVal, n)
	rs.visit = resize(rs.visit, n)
	clear(rs.seen)
	clear(rs.visit)
	rs.stamp, rs.vstamp = 0, 0
	rs.lastPos = -1

	// Interval maps.
	rs.segs = resize(rs.segs, p.nObjs)
	for i := range rs.segs {
		rs.segs[i] = rs.segs[i][:0]
	}
	rs.cells = rs.cells[:0]
	rs.races = rs.races[:0]
	rs.count, rs.declared, rs.work = 0, 0, 0
	limit := s.cfg.maxRaceWork()
	for i := range rs.acc {
		a := &rs.acc[i]
		if !rs.wrote[a.obj] {
			continue
		}
		s.raceAccess(a)
		if rs.work > limit {
			// A graph whose check would take minutes is not checked
			// partly and called race-free: the launch fails, saying so.
			return nil, 0, 0, fmt.Errorf("%w: past %d steps at access %d of %d (%d tasks); raise npu.Config.MaxRaceWork, or skip the detector (hbgrun --race=false)", ErrRaceWork, limit, i, len(rs.acc), n)
		}
	}
	if rs.count == 0 {
		return nil, 0, rs.declared, nil
	}
	return append([]Race(nil), rs.races...), rs.count, rs.declared, nil
}

// shiftOr ORs src, shifted up by d bits, into dst (bit k of src is the
// task k+1 before src's; in dst that task is k+1+d before).
func shiftOr(dst, src []uint64, d int) {
	ws, bs := d/64, uint(d%64)
	for i := len(dst) - 1; i >= ws; i-- {
		v := src[i-ws] << bs
		if bs > 0 && i-ws-1 >= 0 {
			v |= src[i-ws-1] >> (64 - bs)
		}
		dst[i] |= v
	}
}

// raceOrder numbers the tasks in a topological order and builds the
// producers of each position.
func (s *sim) raceOrder() {
	rs := &s.race
	p := s.p
	rs.order = rs.order[:0]
	rs.posOf = resize(rs.posOf, p.nTasks)
	rs.outPos = resize(rs.outPos, len(p.insts))
	for t := 0; t < p.nOrd; t++ {
		rs.posOf[t] = int32(len(rs.order))
		rs.order = append(rs.order, int32(t))
		if s.tasks[t].kind != stages.KindGraph {
			continue
		}
		ii := s.tasks[t].inst
		ip := &p.insts[ii]
		for n := range ip.def.nodes {
			rs.posOf[int(ip.base)+n] = int32(len(rs.order))
			rs.order = append(rs.order, ip.base+int32(n))
		}
		rs.outPos[ii] = int32(len(rs.order))
		rs.order = append(rs.order, ^ii)
	}
	img := s.img
	rs.pOff = resize(rs.pOff, len(rs.order)+1)
	rs.pIdx = rs.pIdx[:0]
	imgPos := func(f stages.TaskID) int32 {
		if ii := p.instOf[f]; ii >= 0 {
			return rs.outPos[ii]
		}
		return rs.posOf[f]
	}
	for pos, ti := range rs.order {
		rs.pOff[pos] = int32(len(rs.pIdx))
		switch {
		case ti < 0:
			ip := &p.insts[^ti]
			o := ip.def
			for n := range o.nodes {
				if o.foOff[n] == o.foOff[n+1] { // a sink: every node reaches one
					rs.pIdx = append(rs.pIdx, rs.posOf[int(ip.base)+n])
				}
			}
		case s.tasks[ti].node < 0:
			fs := img.Tasks[ti].Fanin
			for _, f := range img.Fanin[fs.Off : fs.Off+fs.N] {
				rs.pIdx = append(rs.pIdx, imgPos(f))
			}
		default:
			t := &s.tasks[ti]
			ip := &p.insts[t.inst]
			nd := &ip.def.nodes[t.node]
			if nd.fanin.N == 0 {
				rs.pIdx = append(rs.pIdx, rs.posOf[ip.shell])
			}
			for _, f := range ip.def.fanin[nd.fanin.Off : nd.fanin.Off+nd.fanin.N] {
				rs.pIdx = append(rs.pIdx, rs.posOf[int(ip.base)+int(f)])
			}
		}
	}
	rs.pOff[len(rs.order)] = int32(len(rs.pIdx))
}

// predElem is the memory object and element a task's predicate reads.
func (s *sim) predElem(ti int32) (int32, int64) {
	t := &s.tasks[ti]
	if t.node < 0 {
		pr := &s.img.Tasks[t.src].Pred
		return s.p.rootObj[pr.View.Root], pr.View.Offset + pr.Index
	}
	ip := &s.p.insts[t.inst]
	pr := &ip.def.preds[ip.def.nodes[t.node].pred]
	a := s.ref(ip, &pr.t)
	return a.obj, a.off + pr.index
}

// reaches reports whether a dependency path leads from position a to b
// (a < b). Answers are cached per b (the current access's task).
func (s *sim) reaches(a, b int32) bool {
	rs := &s.race
	if rs.seen[a] == rs.stamp {
		return rs.seenVal[a]
	}
	ok := s.reachesWalk(a, b)
	rs.seen[a], rs.seenVal[a] = rs.stamp, ok
	return ok
}

func (rs *raceState) bit(a, b int32) bool {
	d := int(b - a)
	return rs.anc[int(b)*raceWords+(d-1)/64]&(1<<uint((d-1)%64)) != 0
}

func (s *sim) reachesWalk(a, b int32) bool {
	rs := &s.race
	if b-a <= raceWindow {
		return rs.bit(a, b)
	}
	rs.vstamp++
	if rs.vstamp == 0 {
		clear(rs.visit)
		rs.vstamp = 1
	}
	rs.stack = append(rs.stack[:0], b)
	for len(rs.stack) > 0 {
		x := rs.stack[len(rs.stack)-1]
		rs.stack = rs.stack[:len(rs.stack)-1]
		for _, q := range rs.pIdx[rs.pOff[x]:rs.pOff[x+1]] {
			rs.work++
			switch {
			case q == a:
				return true
			case q < a || rs.visit[q] == rs.vstamp:
				continue
			case q-a <= raceWindow:
				rs.visit[q] = rs.vstamp
				if rs.bit(a, q) {
					return true
				}
				continue
			}
			rs.visit[q] = rs.vstamp
			rs.stack = append(rs.stack, q)
		}
	}
	return false
}

// raceAccess checks one access against the root's segments and records it.
func (s *sim) raceAccess(a *access) {
	rs := &s.race
	o := &s.objs[a.obj]
	lo, hi := o.clip(a.lo, a.hi)
	if hi <= lo {
		return
	}
	if a.pos != rs.lastPos {
		rs.lastPos = a.pos
		rs.stamp++
		if rs.stamp == 0 {
			clear(rs.seen)
			rs.stamp = 1
		}
	}
	rs.cur = rs.cur[:0]
	rs.curDecl = rs.curDecl[:0]
	segs := rs.segs[a.obj]
	if len(segs) == 0 {
		segs = append(segs, rseg{lo: 0, hi: o.elems, w: -1, rd: -1})
	}
	segs = splitAt(segs, lo)
	segs = splitAt(segs, hi)
	i := segFirst(segs, lo)
	j := i
	for j < len(segs) && segs[j].lo < hi {
		sg := &segs[j]
		if sg.w >= 0 && sg.w != a.pos {
			s.raceCheck(a, sg.w, sg.warg, true, sg.lo, sg.hi)
		}
		if a.write {
			for c := sg.rd; c >= 0; c = rs.cells[c].next {
				if r := &rs.cells[c]; r.pos != a.pos {
					s.raceCheck(a, r.pos, r.arg, false, sg.lo, sg.hi)
				}
			}
		}
		j++
	}
	if a.write {
		segs[i] = rseg{lo: lo, hi: hi, w: a.pos, warg: a.arg, rd: -1}
		segs = append(segs[:i+1], segs[j:]...)
	} else {
		for k := i; k < j; k++ {
			sg := &segs[k]
			if sg.rd >= 0 && rs.cells[sg.rd].pos == a.pos {
				continue
			}
			rs.cells = append(rs.cells, rcell{pos: a.pos, arg: a.arg, next: sg.rd})
			sg.rd = int32(len(rs.cells) - 1)
		}
	}
	rs.segs[a.obj] = segs
}

// splitAt makes x a segment boundary.
func splitAt(segs []rseg, x int64) []rseg {
	i := segFirst(segs, x)
	if i == len(segs) || segs[i].lo >= x {
		return segs
	}
	segs = append(segs, rseg{})
	copy(segs[i+2:], segs[i+1:])
	segs[i+1] = segs[i]
	segs[i].hi, segs[i+1].lo = x, x
	return segs
}

// raceCheck reports the pair (other, a) unless a path orders them. The
// interval is the segment's part of a's.
func (s *sim) raceCheck(a *access, other, oarg int32, otherWrites bool, slo, shi int64) {
	s.race.work++
	if s.reaches(other, a.pos) {
		return
	}
	rs := &s.race
	if s.declaredPair(other, a.pos) {
		if !slices.Contains(rs.curDecl, other) {
			rs.curDecl = append(rs.curDecl, other)
			rs.declared++
		}
		return
	}
	lo, hi := max(slo, a.lo), min(shi, a.hi)
	for _, k := range rs.cur {
		if r := &rs.races[k]; r.A.Task == s.raceTask(other) && r.A.Arg == oarg {
			r.Lo, r.Hi = min(r.Lo, lo), max(r.Hi, hi)
			return
		}
	}
	rs.count++
	if len(rs.races) >= cmp.Or(s.cfg.MaxRaces, defaultMaxRaces) {
		return
	}
	kind := RaceReadWrite
	if otherWrites && a.write {
		kind = RaceWriteWrite
	}
	otag := stages.TagInput
	if oarg >= 0 {
		otag = s.arg(&s.tasks[rs.order[other]], uint32(oarg)).tag
	}
	r := Race{Kind: kind, A: s.raceAccessOf(other, oarg, otag), B: s.raceAccessOf(a.pos, a.arg, a.tag), Lo: lo, Hi: hi, Root: -1, Graph: stages.NoTask, Internal: -1}
	s.nameObj(a.obj, &r)
	rs.cur = append(rs.cur, int32(len(rs.races)))
	rs.races = append(rs.races, r)
}

func (s *sim) raceTask(pos int32) TaskRef {
	t := &s.tasks[s.race.order[pos]]
	return TaskRef{Task: stages.TaskID(t.src), Node: t.node}
}

func (s *sim) raceAccessOf(pos, arg int32, tag stages.Tag) RaceAccess {
	return RaceAccess{TaskInfo: s.taskInfo(s.race.order[pos]), Arg: arg, Tag: tag}
}

// nameObj names memory object obj in a race: an entry or run root, or an
// instance's internal root.
func (s *sim) nameObj(obj int32, r *Race) {
	p := s.p
	switch {
	case int(obj) < p.nEntry:
		r.Root = stages.RootID(obj)
	case int(obj) < p.nEntry+len(p.runRoot):
		r.Root = p.runRoot[int(obj)-p.nEntry].ID
	default:
		for ii := range p.insts {
			ip := &p.insts[ii]
			if obj >= ip.objBase && int(obj) < int(ip.objBase)+len(ip.def.roots) {
				r.Graph, r.Internal = stages.TaskID(ip.shell), obj-ip.objBase
				return
			}
		}
	}
}

// segFirst is the index of the first segment ending after x.
func segFirst(segs []rseg, x int64) int {
	l, h := 0, len(segs)
	for l < h {
		m := int(uint(l+h) >> 1)
		if segs[m].hi > x {
			h = m
		} else {
			l = m + 1
		}
	}
	return l
}

// declaredPair reports whether the tasks at two positions run kernels of
// one declared race group: the model says why they may race.
func (s *sim) declaredPair(x, y int32) bool {
	gx := s.raceGroup(x)
	return gx != 0 && gx == s.raceGroup(y)
}

func (s *sim) raceGroup(pos int32) int32 {
	ti := s.race.order[pos]
	if ti < 0 {
		return 0
	}
	return s.groupOf(&s.tasks[ti])
}

// groupOf is the declared race group of t's kernels, 0 for none.
func (s *sim) groupOf(t *dtask) int32 {
	for _, k := range t.kern {
		if k >= 0 && int(k) < len(s.race.kgroup) && s.race.kgroup[k] != 0 {
			return s.race.kgroup[k]
		}
	}
	return 0
}
