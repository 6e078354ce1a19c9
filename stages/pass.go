package stages

import (
	"errors"
	"fmt"
	"slices"
)

// This file is the logic of a pass as a pure state machine, in the manner of
// etcd raft's RawNode: events in, actions out, no actors, time or goroutines.
// It has two halves, one per actor that owns it in turn:
//
//	Host (the submission actor, per rank)   Graph calls → record requests;
//	                                        End → the Pass, handed off once
//	Replay (the replay actor, per rank)     Outcomes (a Definition built and
//	                                        uploaded, or why not), device
//	                                        replies → actions: Learn, Ship,
//	                                        Rerun, Reply
//
// A Pass is owned by the Host until End and by the Replay after Handoff;
// nothing of it is shared.

// Published is a Definition as the store publishes it: immutable, shared by
// every rank that replays it.
type Published struct {
	Def     *Definition
	Image   []byte
	Hash    uint64
	Written []int32 // boundary slots the body writes
}

// PassCounts describe one pass.
type PassCounts struct {
	// GraphCalls is every Graph call the orchestration made.
	GraphCalls          int
	HostSubmissions     int
	OrdinaryTasks       int
	GraphSubmissions    int
	Definitions         int
	Demoted             int
	BoundaryMismatches  int
	FallbackCalls       int
	Verified            int
	ExpectedDeviceTasks int
}

// RecordRequest asks the pipeline to record one body. Its slices are its own
// (copied from the call).
type RecordRequest struct {
	Pass     uint64
	StoreKey uint64
	FullKey  uint64
	Key      string
	Boundary []Arg
	Roots    []BoundaryRoot
	Scalars  []uint64
	ExtDeps  []TaskID // the call's external dependencies
	Body     BodyFunc
	// Verify re-records a later call of a key already recorded, to catch
	// what the first recording baked in.
	Verify bool
}

// Outcome is the pipeline's answer to a RecordRequest, as it reaches the
// rank's replay: the Definition, built and made a device object, or why not.
type Outcome struct {
	Pass     uint64
	StoreKey uint64
	Verify   bool
	Def      *Published
	// Err is a recording failure (Panicked: the body panicked).
	Err      error
	Panicked bool
	Defects  []Defect
	// Recorded says this request's own recording made the Definition.
	Recorded      bool
	RecordedNodes int
	RecordNs      int64
	BuildNs       int64
	// Store is what the store on disk did for this request.
	Store StoreLoad
	// UploadedBytes is the Definition bytes uploaded for this request.
	UploadedBytes int64
	UploadErr     error
}

// Learned is what a pass tells the Host about one key once the pipeline has
// answered: its Definition (a device object on this rank), its failure, or
// nothing known (Forget: ask again next time).
type Learned struct {
	StoreKey uint64
	Def      *Published
	Failed   error
	Forget   bool
}

// PassConfig is what a pass's logic depends on.
type PassConfig struct {
	// NoRetain salts store keys per pass, so every pass records afresh.
	NoRetain bool
	// DefectsAsWarnings reports body defects as warnings, not errors.
	DefectsAsWarnings bool
	// StrictRecording fails a pass whose body records something
	// unsupported instead of rerunning it with that key on the ordinary path.
	StrictRecording bool
	// SkipDevice ends a pass once its run image is copied.
	SkipDevice bool
	// CountKernels fills Pass.KernelTasks.
	CountKernels bool
}

type passStep uint8

const (
	stepOrch    passStep = iota // host_orch: the Host owns it
	stepWait                    // handed off, waiting for outcomes
	stepReady                   // every outcome in, shells final: may ship
	stepShipped                 // run image (and launch) sent to the device
	stepCopied                  // the copy answered, the launch not yet
	stepDone
)

type shell struct {
	task TaskID
	sk   uint64
}

// Pass is one pass of one rank.
type Pass struct {
	ID       uint64
	Round    int
	Image    *RunImage
	Counts   PassCounts
	Warnings []string
	Defects  []Defect
	// KernelTasks counts device tasks per KernelID (CountKernels).
	KernelTasks []int
	// What the pass's recordings made and cost, summed over the recorders
	// (each builds the Definition it recorded): the nodes of its new
	// Definitions, and the record_node (verifications included) and
	// build_definition totals.
	RecordedNodes    int
	RecordNodeOps    int
	RecordNs         int64
	BuiltDefinitions int
	BuildNs          int64
	// Store is what the store on disk loaded for the pass, and rejected.
	Store StoreLoad
	// UploadedBytes is the Definition bytes uploaded for this pass.
	UploadedBytes int64
	// Err is why the pass failed, once it has.
	Err error
	// StoreKeys lists, without retention, the pass's own store keys, which
	// the store drops once the pass is over.
	StoreKeys []uint64

	cfg      PassConfig
	nkernels int
	step     passStep
	errs     []error
	shells   []shell
	used     []*Published
	pending  map[uint64]int // store key -> outcomes awaited (a recording and a verification)
	defs     map[uint64]*Published
	learned  []Learned
	rerun    bool
	fellBack []uint64
	// atDevice counts this pass's device requests not yet answered.
	atDevice int
	replied  bool
}

// Shipping says whether the pass's run image has been sent to the device.
func (p *Pass) Shipping() bool { return p.step >= stepShipped }

func (p *Pass) warn(format string, a ...any) {
	const maxWarnings = 64
	if len(p.Warnings) < maxWarnings {
		p.Warnings = append(p.Warnings, fmt.Sprintf(format, a...))
	}
}

func (p *Pass) use(d *Published) {
	for _, u := range p.used {
		if u == d {
			return
		}
	}
	p.used = append(p.used, d)
}

// Used is the Definitions the pass replays.
func (p *Pass) Used() []*Published { return p.used }

// Waiting lists the store keys whose outcome the pass still awaits.
func (p *Pass) Waiting() []uint64 {
	var out []uint64
	for k, n := range p.pending {
		if n > 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// keyState is what the Host knows about one store key across passes.
type keyState struct {
	def    *Published
	failed error
	// recording is set from the request to the outcome's Learn.
	recording bool
	// sig and nscalars are the first call's boundary signature; first and
	// firstScalar its values: a later call that differs is re-recorded once
	// to verify the Definition (verifyAsked).
	sig         []BoundarySlot
	nscalars    int
	next        int // external dependency slots
	first       []Arg
	firstScalar []uint64
	verifyAsked bool
}

// Host is one rank's submission side: the ordinary path (OrdinaryPath), what the
// rank knows of each key, and the pass in host_orch. It is owned by one
// actor.
type Host struct {
	cfg      PassConfig
	rank     int
	orch     *OrdinaryPath
	identity string
	idHash   uint64 // FullKey's hash of identity so far
	keys     map[uint64]*keyState
	matcher  Matcher
	p        *Pass
	nextID   uint64
	jobs     []RecordRequest
	spare    []*RunImage
}

// NewHost makes a rank's Host.
func NewHost(rank int, cfg PassConfig) *Host {
	return &Host{cfg: cfg, rank: rank, keys: map[uint64]*keyState{}}
}

// GraphBoundary implements stages.BoundaryWriter for the submitter that
// routes Graph calls here: n slots the ordinary path lends every Graph call.
func (h *Host) GraphBoundary(n int) []Arg { return h.orch.lendArgs(n) }

// Ordinary is the ordinary path of the pass in host_orch.
func (h *Host) Ordinary() *OrdinaryPath { return h.orch }

// Recording reports whether a key this Host asked for is still recording: a
// next pass then waits, so that at most one pass per rank awaits recordings
// and a key's calls are never shells of two passes.
func (h *Host) Recording() bool {
	for _, e := range h.keys {
		if e.recording {
			return true
		}
	}
	return false
}

// Begin starts a pass of the orchestration identity over entry. The caller
// then runs the orchestration (ordinary calls on Ordinary(), Graph calls on Graph)
// and calls End.
func (h *Host) Begin(identity string, entry []Root, nkernels, round int) *Pass {
	if h.orch == nil || h.identity != identity {
		h.orch = NewOrdinaryPath(entry)
		h.identity = identity
		h.idHash = fnvString(fnvOffset, identity)
		clear(h.keys)
	}
	if h.cfg.NoRetain {
		clear(h.keys)
	}
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
	np.Store = p.Store
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
	p.Counts.GraphCalls++
	fk := fullKeyFrom(h.idHash, call.Key, call.Config)
	sk := h.storeKey(fk)
	e := h.keys[sk]
	switch {
	case e == nil:
		e = &keyState{nscalars: len(call.Scalars), next: len(call.ExtDeps), sig: Signature(call.Boundary, h.orch), recording: true}
		job := h.job(call, fk, sk, false)
		// The request's copies are read-only from here on: the key keeps
		// the first call's values in them.
		e.first, e.firstScalar = job.Boundary, job.Scalars
		h.keys[sk] = e
	case e.failed != nil:
		if !slices.Contains(p.fellBack, sk) {
			p.fellBack = append(p.fellBack, sk)
			p.warn("%v; its calls run on the ordinary path", e.failed)
		}
		p.Counts.FallbackCalls++
		return h.inline(call, o)
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
		h.job(call, fk, sk, true)
	}
	if e.def != nil {
		p.use(e.def)
	} else {
		p.shells = append(p.shells, shell{task: id, sk: sk})
	}
	p.Counts.GraphSubmissions++
	return id
}

func (h *Host) job(call *GraphCall, fk, sk uint64, verify bool) *RecordRequest {
	h.jobs = append(h.jobs, RecordRequest{
		Pass: h.p.ID, StoreKey: sk, FullKey: fk, Key: call.Key,
		Boundary: append([]Arg(nil), call.Boundary...),
		Roots:    h.orch.BoundaryRoots(call.Boundary),
		Scalars:  append([]uint64(nil), call.Scalars...),
		ExtDeps:  append([]TaskID(nil), call.ExtDeps...),
		Body:     call.KeptBody(),
		Verify:   verify,
	})
	h.p.pending[sk]++
	return &h.jobs[len(h.jobs)-1]
}

// differs reports whether a call passes other boundary values than the
// recorded one: only then can a re-recording reveal a baked value.
func differs(e *keyState, call *GraphCall) bool {
	for i := range call.Scalars {
		if call.Scalars[i] != e.firstScalar[i] {
			return true
		}
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
	c := &p.Counts
	c.HostSubmissions = len(p.Image.Tasks)
	c.GraphSubmissions = len(p.Image.Graphs)
	c.OrdinaryTasks = len(p.Image.Tasks) - len(p.Image.Graphs)
	// Every Graph call became a GraphSubmission, or is accounted for by a
	// boundary mismatch or a failed recording; anything else ran on the
	// ordinary path for no reason the pass can name: demoted.
	c.Demoted = c.GraphCalls - c.GraphSubmissions - c.BoundaryMismatches - c.FallbackCalls
	if h.cfg.NoRetain {
		p.StoreKeys = h.Forget()
	}
	p.step = stepWait
	return p
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
		switch {
		case l.Forget:
			delete(h.keys, l.StoreKey)
		case l.Failed != nil:
			e.failed, e.recording = l.Failed, false
		case l.Def != nil:
			e.def, e.recording = l.Def, false
		}
	}
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

// ActionKind names what a Replay asks its actor to do.
type ActionKind uint8

const (
	// ActLearn: tell the Host what the pass learned (Action.Learned).
	ActLearn ActionKind = iota + 1
	// ActShip: encode Pass.Image, copy it to the device and (unless
	// SkipDevice) launch it, in that order, at once.
	ActShip
	// ActRerun: give the pass back to the Host, which runs its
	// orchestration again with what it learned (Action.Learned).
	ActRerun
	// ActReply: the pass is over (Pass.Err says how): answer its caller.
	ActReply
)

var actionNames = [...]string{"", "learn", "ship", "rerun", "reply"}

func (k ActionKind) String() string { return actionNames[k] }

// Action is one thing to do.
type Action struct {
	Kind    ActionKind
	Pass    *Pass
	Learned []Learned
}

// Replay is one rank's replay side: the passes handed off and not yet
// answered, in order. It finalizes shells as their Definitions arrive, ships
// run images in pass order, and matches the device's in-order replies to
// their passes. It is owned by one actor.
type Replay struct {
	passes []*Pass
	// early holds outcomes that reached the Replay before their pass did
	// (a recording can finish while its pass is still in host_orch).
	early map[uint64][]Outcome
	// device lists, in order, the pass of each request at the device
	// (copy, then launch), including passes already answered by a cancel.
	device  []*Pass
	actions []Action
}

// NewReplay makes a rank's Replay.
func NewReplay() *Replay { return &Replay{early: map[uint64][]Outcome{}} }

// InFlight is the number of passes handed off and not yet answered.
func (r *Replay) InFlight() int { return len(r.passes) }

// Handoff takes a pass at the end of its host_orch.
func (r *Replay) Handoff(p *Pass) {
	r.passes = append(r.passes, p)
	for id, os := range r.early {
		switch {
		case id == p.ID:
			for _, o := range os {
				r.apply(p, o)
			}
			delete(r.early, id)
		case id < p.ID:
			delete(r.early, id) // its pass was cancelled before handoff
		}
	}
	r.advance(p)
}

// Defined takes an outcome from the pipeline.
func (r *Replay) Defined(o Outcome) {
	p := r.find(o.Pass)
	if p == nil {
		if len(r.passes) == 0 || o.Pass > r.passes[len(r.passes)-1].ID {
			r.early[o.Pass] = append(r.early[o.Pass], o)
		}
		return // else its pass is over (cancelled): nothing waits for it
	}
	r.apply(p, o)
	r.advance(p)
}

func (r *Replay) find(id uint64) *Pass {
	for _, p := range r.passes {
		if p.ID == id {
			return p
		}
	}
	return nil
}

func (r *Replay) apply(p *Pass, o Outcome) {
	if p.pending[o.StoreKey] == 0 {
		panic(fmt.Sprintf("stages: pass %d got an outcome for key %016x it did not ask for", p.ID, o.StoreKey))
	}
	p.pending[o.StoreKey]--
	p.RecordNodeOps += o.RecordedNodes
	p.RecordNs += o.RecordNs
	if o.Recorded && o.Err == nil {
		p.RecordedNodes += o.RecordedNodes
		p.BuiltDefinitions++
		p.BuildNs += o.BuildNs
	}
	p.UploadedBytes += o.UploadedBytes
	p.Store.Add(o.Store)
	for _, r := range o.Store.Rejected {
		p.warn("%s; recorded again", r)
	}
	for _, d := range o.Defects {
		if p.cfg.DefectsAsWarnings {
			p.warn("%v", d)
		} else {
			p.errs = append(p.errs, d)
		}
		p.Defects = append(p.Defects, d)
	}
	if o.Verify {
		p.Counts.Verified++
		return
	}
	switch {
	case o.Err == nil && o.UploadErr != nil:
		p.errs = append(p.errs, fmt.Errorf("graph_upload: %w", o.UploadErr))
		p.learned = append(p.learned, Learned{StoreKey: o.StoreKey, Forget: true})
	case o.Err == nil:
		p.defs[o.StoreKey] = o.Def
		p.learned = append(p.learned, Learned{StoreKey: o.StoreKey, Def: o.Def})
	case !errors.Is(o.Err, ErrUnsupported) || p.cfg.StrictRecording:
		// A panic, a body's own error, or strict: the pass fails.
		p.errs = append(p.errs, o.Err)
		p.learned = append(p.learned, Learned{StoreKey: o.StoreKey, Failed: o.Err})
	default:
		// Unsupported: the pass is rerun with this key on the ordinary
		// path (its shells are in the image, and a shell cannot be unwound).
		p.rerun = true
		p.learned = append(p.learned, Learned{StoreKey: o.StoreKey, Failed: o.Err})
	}
}

func (p *Pass) awaiting() bool {
	for _, n := range p.pending {
		if n > 0 {
			return true
		}
	}
	return false
}

// advance moves a waiting pass on once every outcome is in.
func (r *Replay) advance(p *Pass) {
	if p.step != stepWait || p.awaiting() {
		r.ship()
		return
	}
	learned := p.learned
	p.learned = nil
	switch {
	case p.rerun && len(p.errs) == 0:
		r.remove(p)
		p.step = stepDone
		r.actions = append(r.actions, Action{Kind: ActRerun, Pass: p, Learned: learned})
		r.ship()
		return
	case len(learned) > 0:
		r.actions = append(r.actions, Action{Kind: ActLearn, Pass: p, Learned: learned})
	}
	if len(p.errs) > 0 {
		r.finish(p, errors.Join(p.errs...))
		return
	}
	for _, sh := range p.shells {
		d := p.defs[sh.sk]
		if d == nil {
			panic("stages: shell of a key with neither a Definition nor a failure at commit")
		}
		p.Image.FinalizeGraph(sh.task, d.Hash, d.Def.HeapBytes)
		p.use(d)
	}
	p.count()
	p.step = stepReady
	r.ship()
}

// count derives the counts that need the pass's Definitions.
func (p *Pass) count() {
	c := &p.Counts
	c.Definitions = len(p.used)
	nodes := 0
	for _, g := range p.Image.Graphs {
		if d := p.def(g.DefHash); d != nil {
			nodes += len(d.Def.Nodes)
		}
	}
	c.ExpectedDeviceTasks = c.OrdinaryTasks + nodes
	if p.cfg.CountKernels {
		p.KernelTasks = kernelTasks(p.Image, p.nkernels, p.def)
	}
}

func (p *Pass) def(hash uint64) *Published {
	for _, d := range p.used {
		if d.Hash == hash {
			return d
		}
	}
	return nil
}

// kernelTasks counts the device tasks of each kernel in a run image, Graph
// nodes included (a MIX task counts for its AIC kernel).
func kernelTasks(img *RunImage, nkernels int, def func(uint64) *Published) []int {
	counts := make([]int, nkernels)
	add := func(k Kind, ks [3]KernelID) {
		id := ks[0]
		if k == KindAIV {
			id = ks[1]
		}
		if id >= 0 && int(id) < nkernels {
			counts[id]++
		}
	}
	for _, t := range img.Tasks {
		if t.Kind == KindGraph {
			if d := def(img.Graphs[t.Graph].DefHash); d != nil {
				for _, n := range d.Def.Nodes {
					add(n.Kind, n.Kernel)
				}
			}
			continue
		}
		add(t.Kind, t.Kernel)
	}
	return counts
}

// ship sends ready passes to the device in pass order: a pass never
// overtakes an earlier one still waiting for its Definitions.
func (r *Replay) ship() {
	for _, p := range r.passes {
		if p.step >= stepShipped {
			continue
		}
		if p.step != stepReady {
			return
		}
		p.step = stepShipped
		p.atDevice = 2
		if p.cfg.SkipDevice {
			p.atDevice = 1
		}
		for i := 0; i < p.atDevice; i++ {
			r.device = append(r.device, p)
		}
		r.actions = append(r.actions, Action{Kind: ActShip, Pass: p})
	}
}

// DeviceReplied takes the device's next reply (to a copy or a launch, in the
// order they were shipped) and says whose it was, whether it answered the
// launch, and whether the pass was already over (a cancelled pass's replies
// are absorbed).
func (r *Replay) DeviceReplied(err error) (p *Pass, launched, over bool) {
	if len(r.device) == 0 {
		panic("stages: a device reply with no request outstanding")
	}
	p = r.device[0]
	r.device[0] = nil
	r.device = r.device[1:]
	p.atDevice--
	launched = p.atDevice == 0 && !p.cfg.SkipDevice
	if p.replied {
		return p, launched, true
	}
	switch p.step {
	case stepShipped:
		p.step = stepCopied
		if err != nil {
			r.finish(p, fmt.Errorf("arena_h2d: %w", err))
		} else if p.cfg.SkipDevice {
			r.finish(p, nil)
		}
		return p, false, false
	case stepCopied:
		if err != nil {
			err = fmt.Errorf("device: %w", err)
		}
		r.finish(p, err)
		return p, true, false
	}
	panic(fmt.Sprintf("stages: device reply for pass %d in step %d", p.ID, p.step))
}

// Done reports whether the pass has been answered.
func (p *Pass) Done() bool { return p.replied }

// Cancel ends a pass now with err (its caller gave up, or the runtime
// stops). Keys it still awaited are forgotten by the Host; device replies
// still owed to it are absorbed when they come.
func (r *Replay) Cancel(id uint64, err error) {
	p := r.find(id)
	if p == nil {
		return
	}
	if p.step == stepWait {
		for _, k := range p.Waiting() {
			p.learned = append(p.learned, Learned{StoreKey: k, Forget: true})
		}
		if len(p.learned) > 0 {
			r.actions = append(r.actions, Action{Kind: ActLearn, Pass: p, Learned: p.learned})
			p.learned = nil
		}
	}
	r.finish(p, err)
	r.ship()
}

func (r *Replay) finish(p *Pass, err error) {
	p.Err = err
	p.step = stepDone
	p.replied = true
	r.remove(p)
	r.actions = append(r.actions, Action{Kind: ActReply, Pass: p})
}

func (r *Replay) remove(p *Pass) {
	if i := slices.Index(r.passes, p); i >= 0 {
		r.passes = slices.Delete(r.passes, i, i+1)
	}
}

// AtDevice reports whether the device still owes pass p a reply (its image
// bytes are in use until then).
func (p *Pass) AtDevice() bool { return p.atDevice > 0 }

// Actions returns what to do, in order, and forgets it. The slice is reused.
func (r *Replay) Actions() []Action {
	a := r.actions
	r.actions = r.actions[:0]
	return a
}
