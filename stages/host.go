package stages

import (
	"fmt"
	"slices"
	"strings"
)

// The Host half of the pass state machine (pass.go): the submission actor's.

// keyState is what the Host knows about one store key across passes.
type keyState struct {
	sk  uint64
	def *Published
	// gone: the key was forgotten (Learn), and h.seq may still hold it.
	gone   bool
	failed error
	// recording is set from the request to the outcome's Learn; detached
	// says no pass waits for that outcome (PassConfig.OrdinaryWhileRecording).
	recording, detached bool
	// sig and nscalars are the first call's boundary signature; first and
	// firstScalar its values: a later call that differs is re-recorded once
	// to verify the Definition (verifyAsked).
	sig         []BoundarySlot
	nscalars    int
	next        int // external dependency slots
	first       []Arg
	firstScalar []uint64
	verifyAsked bool
	// tmpls is the BoundaryTemplates calls matched sig with, one per call
	// site that calls the key (a few), with what a replay by each checks.
	tmpls []keyTemplate
	// warnedPass is the pass that last warned this failed key falls back;
	// usedPass the last that replayed its Definition (Pass.used); lastPass
	// the last that called it at all (a shell too): the residency
	// budget's recency.
	warnedPass, usedPass, lastPass uint64
}

// keyTemplate is a template a key's signature matched, and what a replay
// by it checks (OrdinaryPath.ReplayLocs).
type keyTemplate struct {
	t    *BoundaryTemplate
	locs []locSlot
}

// maxKeyTemplates bounds the templates a key keeps: a key called from more
// sites than that replays some of them by their boundaries whole.
const maxKeyTemplates = 4

// template is what a replay of e by t checks, or nil when t has not
// matched e's signature.
func (e *keyState) template(t *BoundaryTemplate) []locSlot {
	if e == nil {
		return nil
	}
	for i := range e.tmpls {
		if e.tmpls[i].t == t {
			return e.tmpls[i].locs
		}
	}
	return nil
}

// Host is one rank's submission side: the ordinary path (OrdinaryPath), what the
// rank knows of each key, and the pass in host_orch. It is owned by one
// actor.
type Host struct {
	cfg      PassConfig
	rank     int
	orch     *OrdinaryPath
	maxEdges int64 // the pass's bound (BeginBounded)
	identity string
	idHash   uint64 // FullKey's hash of identity so far
	keys     map[uint64]*keyState
	// recording counts keys' recording flags but detached ones: the
	// submission asks after every message, which must not walk every key;
	// detached counts the others.
	recording, detached int
	matcher             Matcher
	p                   *Pass
	// seq is the key of each Graph call of the last pass, in call order;
	// cur the pass's own, which End makes seq.
	seq, cur []*keyState
	lendLocs []Loc
	nextID   uint64
	jobs     []RecordRequest
	spare    []*RunImage
	// warnedBudget: the residency budget's one warning was given.
	warnedBudget bool
	// evicted is the store keys the budget evicted: one met again is a
	// re-recording (PassCounts.Rerecorded), any other a key met.
	evicted map[uint64]bool
	// kept and keptBytes are the keys with a Definition and their images'
	// bytes, kept as Learn and evict change them: End reads them every
	// pass, which must not walk every key.
	kept      int
	keptBytes int64
}

// NewHost makes a rank's Host.
func NewHost(rank int, cfg PassConfig) *Host {
	return &Host{cfg: cfg, rank: rank, keys: map[uint64]*keyState{}}
}

// GraphBoundary implements stages.BoundaryWriter for the submitter that
// routes Graph calls here: n slots the ordinary path lends every Graph call.
func (h *Host) GraphBoundary(n int) []Arg { return h.orch.lendArgs(n) }

// GraphLocs implements stages.LocWriter likewise: calls by template.
func (h *Host) GraphLocs(n int) []Loc {
	if cap(h.lendLocs) < n {
		h.lendLocs = make([]Loc, n)
	}
	return h.lendLocs[:n]
}

// Ordinary is the ordinary path of the pass in host_orch.
func (h *Host) Ordinary() *OrdinaryPath { return h.orch }

// Recording reports whether a key this Host asked for is still recording: a
// next pass then waits, so that at most one pass per rank awaits recordings
// and a key's calls are never shells of two passes.
func (h *Host) Recording() bool {
	return h.recording > 0
}

// Begin starts a pass of the orchestration identity over entry. The caller
// then runs the orchestration (ordinary calls on Ordinary(), Graph calls on Graph)
// and calls End.
func (h *Host) Begin(identity string, entry []Root, nkernels, round int) *Pass {
	return h.BeginBounded(identity, entry, nkernels, round, 0)
}

// BeginBounded is Begin for an orchestration whose passes are bounded at
// maxEdges dependency edges (Orchestration.MaxEdges; 0: DefaultMaxEdges),
// on the ordinary path and in every recording the pass asks for.
func (h *Host) BeginBounded(identity string, entry []Root, nkernels, round int, maxEdges int64) *Pass {
	if h.orch == nil || h.identity != identity {
		h.orch = NewOrdinaryPath(entry)
		h.orch.SetFullEdges(h.cfg.FullEdges)
		h.identity = identity
		h.idHash = fnvString(fnvOffset, identity)
		if h.cfg.FullEdges {
			// A Definition shipped with every edge is another image than
			// its reduction: its full_keys are apart, in memory and on disk.
			h.idHash = fnvString(h.idHash, "\x00full-edges")
		}
		h.forgetAll()
	}
	if h.cfg.NoRetain {
		h.forgetAll()
	}
	h.maxEdges = maxEdges
	h.orch.SetMaxEdges(maxEdges)
	return h.begin(nkernels, round)
}

func (h *Host) begin(nkernels, round int) *Pass {
	if h.p != nil {
		panic("stages: Begin while a pass is in host_orch")
	}
	h.nextID++
	h.p = &Pass{ID: h.nextID, Round: round, cfg: h.cfg, nkernels: nkernels, pending: map[uint64]int{}, defs: map[uint64]*Published{}}
	h.orch.Reset()
	return h.p
}

// Rerun starts p's orchestration again after its Replay gave it back: the
// keys it learned are in the Host, the failed ones run on the ordinary path.
func (h *Host) Rerun(p *Pass) *Pass {
	np := h.begin(p.nkernels, p.Round)
	np.Warnings = p.Warnings
	np.Defects = p.Defects
	np.RecordedNodes, np.RecordNodeOps, np.RecordNs = p.RecordedNodes, p.RecordNodeOps, p.RecordNs
	np.BuiltDefinitions, np.BuildNs = p.BuiltDefinitions, p.BuildNs
	np.Store, np.Fetch = p.Store, p.Fetch
	np.repaired = p.repaired
	np.UploadedBytes = p.UploadedBytes
	h.Recycle(p.Image)
	return np
}

// storeKey is full_key, salted per pass when Definitions are not retained.
func (h *Host) storeKey(fk uint64) uint64 {
	if !h.cfg.NoRetain {
		return fk
	}
	return FullKey("", "", []uint64{fk, uint64(h.rank), uint64(h.p.Round)})
}

// Graph handles one Graph call: replay on a hit, a shell while the key
// records, a new recording on a miss, the ordinary path (on o, which routes
// nested calls back here) when the key failed or the boundary mismatches.
// Record requests pile up for TakeJobs.
func (h *Host) Graph(call *GraphCall, o Submitter) TaskID {
	p := h.p
	n := p.Counts.GraphCalls
	p.Counts.GraphCalls++
	fk := fullKeyFrom(h.idHash, call.Key, call.Config)
	sk := h.storeKey(fk)
	// A pass makes the calls the last one made, in its order: the key of
	// the call at this position last pass is found without the map, whose
	// lookup at 10^5 keys is a cache miss per call.
	var e *keyState
	if n < len(h.seq) && h.seq[n].sk == sk && !h.seq[n].gone {
		e = h.seq[n]
	} else {
		e = h.keys[sk]
	}
	if t := call.Template; t != nil {
		if len(call.Locs) != t.Len() {
			panic(fmt.Sprintf("stages: Graph call %q by a template of %d slots passes %d Locs", call.Key, t.Len(), len(call.Locs)))
		}
		if locs := e.template(t); locs != nil && e.failed == nil {
			if id, ok := h.replayLocs(e, locs, call, fk); ok {
				h.cur = append(h.cur, e)
				e.lastPass = p.ID
				return id
			}
		}
		// Anything else reads the boundary whole.
		call.Boundary = h.orch.lendArgs(t.Len())
		t.Materialize(call.Locs, call.Boundary)
	}
	switch {
	case e == nil:
		detached := h.cfg.OrdinaryWhileRecording && !h.cfg.NoRetain
		e = &keyState{sk: sk, nscalars: len(call.Scalars), next: len(call.ExtDeps), sig: Signature(call.Boundary, h.orch), recording: true, detached: detached}
		if detached {
			h.detached++
		} else {
			h.recording++
		}
		if h.evicted[sk] {
			delete(h.evicted, sk)
			p.Counts.Rerecorded++
		} else {
			p.Counts.KeysMet++
		}
		job := h.job(call, fk, sk, false, detached)
		// The request's copies are read-only from here on: the key keeps
		// the first call's values in them.
		e.first, e.firstScalar = job.Boundary, job.Scalars
		h.keys[sk] = e
	}
	h.cur = append(h.cur, e)
	e.lastPass = p.ID
	switch {
	case e.failed != nil:
		if e.warnedPass != p.ID {
			e.warnedPass = p.ID
			p.warn("%v; its calls run on the ordinary path", e.failed)
		}
		p.Counts.FallbackCalls++
		return h.inline(call, o)
	case e.def == nil && e.detached:
		// Recording beside the passes: this call runs on the ordinary
		// path, and a pass after the Definition arrives replays it.
		p.Counts.OrdinaryWhileRecording++
		return h.inlineOrdered(call, o)
	}
	// A shell (the key still recording) gets its hash and heap block when
	// the Definition reaches the Replay.
	sub := GraphSubmission{FullKey: fk}
	var heapBytes int64
	var written []int32
	if e.def != nil {
		sub.DefHash, heapBytes, written = e.def.Hash, e.def.Def.HeapBytes, e.def.Written
	}
	id, mm := h.orch.ReplayGraph(&h.matcher, e.sig, e.nscalars, e.next, call, sub, heapBytes, written)
	if mm != nil {
		p.Counts.BoundaryMismatches++
		p.warn("boundary mismatch, call runs on the ordinary path: %v", mm)
		return h.inline(call, o)
	}
	if !call.KeyComplete && !e.verifyAsked && differs(e, call) {
		e.verifyAsked = true
		h.job(call, fk, sk, true, false)
	}
	if t := call.Template; t != nil && len(e.tmpls) < maxKeyTemplates && e.template(t) == nil {
		// The call matched: its template's layouts are the signature's
		// unless a slot took another path (compileLocs compares them).
		if locs, ok := compileLocs(e.sig, t); ok {
			e.tmpls = append(e.tmpls, keyTemplate{t: t, locs: locs})
		}
	}
	h.replayed(e, id)
	return id
}

// replayLocs is Graph's replay of a call by the template e matched: no
// slot's layout compared, none materialized. It reports false, having
// changed nothing, when the call must take Graph's way instead (a root of
// another size, another alias partition, or a value a verifying recording
// must see).
func (h *Host) replayLocs(e *keyState, locs []locSlot, call *GraphCall, fk uint64) (TaskID, bool) {
	if len(call.Scalars) != e.nscalars || !call.KeyComplete && !e.verifyAsked && differs(e, call) {
		return 0, false
	}
	sub := GraphSubmission{FullKey: fk}
	var heapBytes int64
	var written []int32
	if e.def != nil {
		sub.DefHash, heapBytes, written = e.def.Hash, e.def.Def.HeapBytes, e.def.Written
	}
	id, ok := h.orch.ReplayLocs(&h.matcher, locs, e.nscalars, e.next, call, sub, heapBytes, written)
	if ok {
		h.p.byTemplate++
		h.replayed(e, id)
	}
	return id, ok
}

// replayed accounts a Graph call replayed (or a shell) as task id.
func (h *Host) replayed(e *keyState, id TaskID) {
	p := h.p
	if e.def != nil {
		// Marked on the key, not looked up in the pass: a Published is one
		// key's, and the key's state is in the cache already.
		if e.usedPass != p.ID {
			e.usedPass = p.ID
			p.used = append(p.used, e.def)
		}
		p.graphNodes += len(e.def.Def.Nodes)
	} else {
		p.shells = append(p.shells, shell{task: id, sk: e.sk})
		p.Counts.Shells++
	}
	p.Counts.GraphSubmissions++
}

// job asks for a recording of call (a verification with verify). The pass
// waits for its outcome unless it is detached.
func (h *Host) job(call *GraphCall, fk, sk uint64, verify, detached bool) *RecordRequest {
	h.jobs = append(h.jobs, RecordRequest{
		Pass: h.p.ID, StoreKey: sk, FullKey: fk, Key: call.Key,
		Boundary: append([]Arg(nil), call.Boundary...),
		Roots:    h.orch.BoundaryRoots(call.Boundary),
		Scalars:  append([]uint64(nil), call.Scalars...),
		ExtDeps:  append([]TaskID(nil), call.ExtDeps...),
		Body:     call.KeptBody(),
		Verify:   verify, FullEdges: h.cfg.FullEdges, MaxEdges: h.maxEdges,
		Identity: h.idHash,
		Detached: detached,
	})
	if !detached {
		h.p.pending[sk]++
		h.p.awaited++
	}
	return &h.jobs[len(h.jobs)-1]
}

// differs reports whether a call passes other boundary values than the
// recorded one: only then can a re-recording reveal a baked value.
func differs(e *keyState, call *GraphCall) bool {
	if !slices.Equal(call.Scalars, e.firstScalar) {
		return true
	}
	if call.Boundary == nil { // by template, not materialized
		for i, l := range call.Locs {
			if b := &e.first[i].View; l.Root != b.Root || l.Offset != b.Offset {
				return true
			}
		}
		return false
	}
	for i := range call.Boundary {
		a, b := &call.Boundary[i].View, &e.first[i].View
		if a.Root != b.Root || a.Offset != b.Offset {
			return true
		}
	}
	return false
}

func (h *Host) inline(call *GraphCall, o Submitter) TaskID {
	if h.orch.lent(call.Boundary) {
		// A Graph call in the body lends the same slots again: the body
		// reads a copy.
		c := *call
		c.Boundary = slices.Clone(call.Boundary)
		call = &c
	}
	if err := call.Body(o, call.NewBoundary()); err != nil {
		h.p.errs = append(h.p.errs, fmt.Errorf("graph %q on the ordinary path: %w", call.Key, err))
	}
	return TaskID(h.orch.NumTasks() - 1)
}

// TakeJobs returns the record requests made since the last call, to send
// now (while the orchestration goes on). The slice is reused.
func (h *Host) TakeJobs() []RecordRequest {
	j := h.jobs
	h.jobs = h.jobs[:0]
	return j
}

// End closes host_orch: the orchestration returned (err is its failure).
// The pass takes the run image with it; the Host goes on with another.
func (h *Host) End(err error) *Pass {
	p := h.p
	h.p = nil
	if err != nil {
		p.errs = append(p.errs, err)
	}
	var spare *RunImage
	if n := len(h.spare); n > 0 {
		spare, h.spare = h.spare[n-1], h.spare[:n-1]
	}
	p.Image = h.orch.TakeImage(spare)
	clear(h.seq)
	h.seq, h.cur = h.cur, h.seq[:0]
	c := &p.Counts
	c.HostSubmissions = len(p.Image.Tasks)
	c.GraphSubmissions = len(p.Image.Graphs)
	c.OrdinaryTasks = len(p.Image.Tasks) - len(p.Image.Graphs)
	// Every Graph call became a GraphSubmission, or is accounted for by a
	// boundary mismatch or a failed recording; anything else ran on the
	// ordinary path for no reason the pass can name: demoted.
	c.Demoted = c.GraphCalls - c.GraphSubmissions - c.BoundaryMismatches - c.FallbackCalls - c.OrdinaryWhileRecording
	if h.cfg.NoRetain {
		p.StoreKeys = h.Forget()
	}
	h.evict(p)
	p.step = stepWait
	return p
}

// evict keeps the rank's Definitions within the residency budget
// (PassConfig.KeepBytes, KeepDefinitions): past it, the keys called least
// recently are forgotten, never one this pass called (its replays are in
// the run image) nor one recording. The first eviction of a Host warns;
// later ones are counted (Pass.Evicted).
func (h *Host) evict(p *Pass) {
	over := func() bool {
		return h.cfg.KeepBytes > 0 && h.keptBytes > h.cfg.KeepBytes || h.cfg.KeepDefinitions > 0 && h.kept > h.cfg.KeepDefinitions
	}
	if over() {
		var kept []*keyState
		for _, e := range h.keys {
			if e.def != nil {
				kept = append(kept, e)
			}
		}
		// Least recently called first; the store key breaks ties, so every
		// run evicts the same keys.
		slices.SortFunc(kept, func(a, b *keyState) int {
			if a.lastPass != b.lastPass {
				return cmpU64(a.lastPass, b.lastPass)
			}
			return cmpU64(a.sk, b.sk)
		})
		i := 0
		for ; i < len(kept) && over(); i++ {
			e := kept[i]
			if e.lastPass == p.ID || e.recording {
				break // the rest are as recent or more
			}
			p.Freed = append(p.Freed, e.def.Hash)
			h.dropDef(e)
			p.Evicted = append(p.Evicted, e.sk)
			if h.evicted == nil {
				h.evicted = map[uint64]bool{}
			}
			h.evicted[e.sk] = true
			e.gone = true
			delete(h.keys, e.sk)
		}
		p.Freed = h.unheld(p.Freed)
		if len(p.Evicted) > 0 && !h.warnedBudget {
			h.warnedBudget = true
			p.warn("residency budget reached (%s): the least recently used Definitions are evicted, and each evicted key records again when next met (further evictions are counted, not warned)", budgetText(h.cfg))
		}
	}
	p.Counts.Evicted, p.Counts.Kept, p.Counts.KeptBytes = len(p.Evicted), h.kept, h.keptBytes
}

// unheld is the hashes, once each, that no key the Host keeps has: two
// keys of one body share a device object, which goes only with the last.
func (h *Host) unheld(hashes []uint64) []uint64 {
	if len(hashes) == 0 {
		return hashes
	}
	held := map[uint64]bool{}
	for _, e := range h.keys {
		if e.def != nil {
			held[e.def.Hash] = true
		}
	}
	out := hashes[:0]
	for _, x := range hashes {
		if !held[x] {
			held[x] = true // once
			out = append(out, x)
		}
	}
	return out
}

// setDef gives e its Definition, and dropDef takes it away, keeping the
// kept counts.
func (h *Host) setDef(e *keyState, d *Published) {
	h.dropDef(e)
	e.def = d
	h.kept++
	h.keptBytes += int64(len(d.Image))
}

func (h *Host) dropDef(e *keyState) {
	if e.def != nil {
		h.kept--
		h.keptBytes -= int64(len(e.def.Image))
	}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func budgetText(c PassConfig) string {
	var parts []string
	if c.KeepBytes > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes of Definitions per device", c.KeepBytes))
	}
	if c.KeepDefinitions > 0 {
		parts = append(parts, fmt.Sprintf("%d Definitions", c.KeepDefinitions))
	}
	return strings.Join(parts, ", ")
}

// Recycle takes back a run image the Replay no longer needs.
func (h *Host) Recycle(img *RunImage) {
	if img != nil && len(h.spare) < 4 {
		h.spare = append(h.spare, img)
	}
}

// Learn takes what a pass learned about its keys.
func (h *Host) Learn(ls []Learned) {
	for _, l := range ls {
		e := h.keys[l.StoreKey]
		if e == nil {
			continue
		}
		if (l.Forget || l.Failed != nil || l.Def != nil) && e.recording {
			e.recording = false
			if e.detached {
				h.detached--
			} else {
				h.recording--
			}
		}
		switch {
		case l.Forget:
			h.dropDef(e)
			e.gone = true
			delete(h.keys, l.StoreKey)
		case l.Failed != nil:
			e.failed = l.Failed
		case l.Def != nil:
			h.setDef(e, l.Def)
		}
	}
}

func (h *Host) forgetAll() {
	clear(h.keys)
	clear(h.evicted)
	h.recording, h.detached = 0, 0
	h.kept, h.keptBytes = 0, 0
	clear(h.seq)
	h.seq = h.seq[:0]
}

// Forget lists the store keys of this Host's keys (NoRetain: the store drops
// them after the pass).
func (h *Host) Forget() []uint64 {
	out := make([]uint64, 0, len(h.keys))
	for k := range h.keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
