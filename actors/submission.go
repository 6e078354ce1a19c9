package actors

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// startPass asks a rank's submission actor for one pass: run the
// orchestration, commit, upload, copy the run image, launch.
type startPass struct {
	orch  *Orchestration
	round int
	// run is the rank's run span; every phase span is its child.
	run trace.Carrier
}

// passStep names where a pass is between messages.
type passStep uint8

const (
	stepIdle passStep = iota
	stepCommit
	stepUpload
	stepCopy
	stepLaunch
)

// keyEntry is the submission's view of one store key: the Definition once
// it is ready, or why there is none. It persists across passes (with
// retention), so a warm pass never asks the store anything.
type keyEntry struct {
	def    *mailbox.Definition
	failed error
	// sig and nscalars are the first call's boundary signature, which
	// calls made while the key records must match.
	sig      []stages.BoundarySlot
	nscalars int
	next     int // external dependency slots
	// first is the first call's boundary and scalars: a later call that
	// differs from it is re-recorded once, to verify the Definition.
	first       []stages.Arg
	firstScalar []uint64
}

type shell struct {
	task stages.TaskID
	e    *keyEntry
}

// pass is one pass's state, alive from startPass to the reply.
type pass struct {
	req     *startPass
	replyTo *actor.PID
	res     *PassResult
	runCtx  context.Context
	step    passStep
	phase   trace.PhaseSpan
	pending int // recordings and verifications not yet answered
	shells  []shell
	used    []*mailbox.Definition
	usedSet map[*mailbox.Definition]bool
	rerun   bool
	errs    []error
	// fellBack lists the failed keys whose calls took the ordinary path
	// this pass (each is warned about once).
	fellBack []*keyEntry
	// uploads is upload requests not yet answered (early ones and the
	// graph_upload one); uploadErr the first failure among them.
	uploads   int
	uploadErr error
}

// submission owns one rank's ordinary path (stages.Orch and its TensorMap)
// and drives each pass through its phases. Every task of a pass is submitted
// inside one turn of this actor; it sends messages only per new key, per
// pass phase and per verification, and it waits only by message.
type submission struct {
	rt       *Runtime
	rank     int
	uploader *actor.PID
	device   *actor.PID
	orch     *stages.Orch
	identity string
	matcher  stages.Matcher
	keys     map[uint64]*keyEntry
	verified map[uint64]bool // full_keys verified once in this process
	ops      trace.Ops
	entrySet bool
	onDevice map[uint64]bool // Definitions (by hash) this rank's device holds
	imageBuf []byte          // the last run image, reused by the next pass
	p        *pass
	ctx      actor.Context // valid during a turn only
}

func (s *submission) Receive(ctx actor.Context) {
	s.ctx = ctx
	defer func() { s.ctx = nil }()
	switch m := ctx.Message().(type) {
	case *startPass:
		s.start(ctx, m)
	case *mailbox.DefinitionReady:
		s.ready(m)
	case *mailbox.UploadDone:
		s.uploaded(m)
	case *deviceReply:
		s.deviceReplied(m)
	}
}

func (s *submission) start(ctx actor.Context, m *startPass) {
	if s.p != nil {
		ctx.Respond(&PassResult{Err: errors.New("a pass is already running on this rank")})
		return
	}
	res := &PassResult{Pass: trace.NewPass(s.rank, m.round)}
	s.p = &pass{req: m, replyTo: ctx.Sender(), res: res, runCtx: m.run.Context(context.Background()), usedSet: map[*mailbox.Definition]bool{}}
	if s.orch == nil || s.identity != m.orch.Name {
		s.orch = stages.NewOrch(m.orch.Entry)
		s.identity = m.orch.Name
		s.keys = map[uint64]*keyEntry{}
		s.entrySet = false
	}
	if s.rt.cfg.NoRetain {
		clear(s.keys)
	}

	// args: the entry roots are registered with the device once; the
	// device keeps them across passes (addresses and sizes, no bytes).
	_, ph := s.rt.tracer.StartPhase(s.p.runCtx, trace.PhaseArgs, s.rank, m.round)
	if !s.entrySet {
		s.sendDevice(&deviceRegister{roots: m.orch.Entry, kernels: m.orch.Kernels})
		s.entrySet = true
	}
	res.Pass.Set(trace.PhaseArgs, ph.Finish())

	var phCtx context.Context
	phCtx, s.p.phase = s.rt.tracer.StartPhase(s.p.runCtx, trace.PhaseHostOrch, s.rank, m.round)
	s.p.runCtx = phCtx // recordings started in host_orch are its children
	s.runOrchestration()
}

// runOrchestration runs the whole orchestration inside this turn.
func (s *submission) runOrchestration() {
	s.orch.Reset()
	s.p.shells = s.p.shells[:0]
	s.p.used = s.p.used[:0]
	clear(s.p.usedSet)
	s.ops = trace.Ops{}
	// Counts describe the pass as finally run: a rerun starts them over.
	s.p.res.Counts = Counts{}
	s.p.fellBack = s.p.fellBack[:0]
	if err := s.runGuarded(); err != nil {
		s.p.errs = append(s.p.errs, err)
	}
	s.p.step = stepCommit
	s.maybeCommit()
}

func (s *submission) runGuarded() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("orchestration %q panicked: %v", s.identity, p)
		}
	}()
	if err := s.p.req.orch.Run(submitter{s}); err != nil {
		return fmt.Errorf("orchestration %q: %w", s.identity, err)
	}
	return nil
}

// storeKey is full_key, salted per pass when Definitions are not retained,
// so every pass records afresh, as upstream does.
func (s *submission) storeKey(fullKey uint64) uint64 {
	if !s.rt.cfg.NoRetain {
		return fullKey
	}
	return stages.FullKey("", "", []uint64{fullKey, uint64(s.rank), uint64(s.p.req.round)})
}

// graph handles one Graph call: replay on a hit, a shell while the key
// records, a new recording on a miss. Nothing here waits.
func (s *submission) graph(call *stages.GraphCall) stages.TaskID {
	t0 := trace.Now()
	s.p.res.Counts.GraphCalls++
	fk := stages.FullKey(s.identity, call.Key, call.Config)
	sk := s.storeKey(fk)
	e := s.keys[sk]
	switch {
	case e == nil:
		e = s.startRecording(call, fk, sk)
	case e.failed != nil:
		// The key's recording failed (and the pass was rerun, or it failed
		// in an earlier pass): its calls take the ordinary path, with a
		// warning once per pass.
		if !slices.Contains(s.p.fellBack, e) {
			s.p.fellBack = append(s.p.fellBack, e)
			s.warn("%v; its calls run on the ordinary path", e.failed)
		}
		s.p.res.Counts.FallbackCalls++
		return s.inline(call)
	}
	sig, nsc, next := e.sig, e.nscalars, e.next
	if e.def != nil {
		sig, nsc, next = e.def.Def.Boundary, e.def.Def.BoundaryScalars, len(e.def.Def.ExtDeps)
	}
	if mm := s.matcher.MatchSignature(sig, nsc, next, call, s.orch); mm != nil {
		s.p.res.Counts.BoundaryMismatches++
		s.warn("boundary mismatch, call runs on the ordinary path: %v", mm)
		return s.inline(call)
	}
	if !call.KeyComplete && !s.verified[fk] && e.first != nil && differs(e, call) {
		s.verify(call, fk, sk)
	}
	sub := stages.GraphSubmission{FullKey: fk}
	var id stages.TaskID
	if e.def != nil {
		sub.DefHash = e.def.Hash
		id = s.orch.SubmitGraph(call, sub, e.def.Def.HeapBytes, e.def.Written)
		s.use(e.def)
	} else {
		// In flight: a shell now, its Definition hash and heap block at
		// commit.
		id = s.orch.SubmitGraph(call, sub, 0, nil)
		s.p.shells = append(s.p.shells, shell{task: id, e: e})
	}
	s.p.res.Counts.GraphSubmissions++
	s.ops.Since(trace.OpGraphSubmit, t0)
	return id
}

func (s *submission) startRecording(call *stages.GraphCall, fk, sk uint64) *keyEntry {
	e := &keyEntry{nscalars: len(call.Scalars), next: len(call.ExtDeps)}
	e.sig = stages.Signature(call.Boundary, s.orch)
	job := s.job(call, fk, sk, false)
	// The job's copies of the boundary are read-only from here on, so the
	// entry keeps the first call's values in them rather than copying again.
	e.first, e.firstScalar = job.Boundary, job.Scalars
	s.keys[sk] = e
	s.p.pending++
	s.ctx.Send(s.rt.store, job)
	return e
}

func (s *submission) job(call *stages.GraphCall, fk, sk uint64, verify bool) *mailbox.RecordJob {
	return &mailbox.RecordJob{
		StoreKey: sk, FullKey: fk, Key: call.Key,
		Boundary: append([]stages.Arg(nil), call.Boundary...),
		Roots:    s.orch.BoundaryRoots(call.Boundary),
		Scalars:  append([]uint64(nil), call.Scalars...),
		ExtDeps:  append([]stages.TaskID(nil), call.ExtDeps...),
		Body:     call.KeptBody(),
		Verify:   verify,
		ReplyTo:  s.ctx.Self(),
		Trace:    trace.Inject(s.p.runCtx),
	}
}

// differs reports whether a call passes other boundary values than the
// recorded one: only then can a re-recording reveal a baked value.
func differs(e *keyEntry, call *stages.GraphCall) bool {
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

func (s *submission) verify(call *stages.GraphCall, fk, sk uint64) {
	if s.verified == nil {
		s.verified = map[uint64]bool{}
	}
	s.verified[fk] = true
	s.p.pending++
	s.ctx.Send(s.rt.store, s.job(call, fk, sk, true))
}

func (s *submission) use(d *mailbox.Definition) {
	if !s.p.usedSet[d] {
		s.p.usedSet[d] = true
		s.p.used = append(s.p.used, d)
	}
}

// inline runs a Graph call's body on the ordinary path.
func (s *submission) inline(call *stages.GraphCall) stages.TaskID {
	call.Body(submitter{s}, call.NewBoundary())
	return stages.TaskID(s.orch.NumTasks() - 1)
}

func (s *submission) warn(format string, a ...any) {
	const maxWarnings = 64
	if len(s.p.res.Warnings) < maxWarnings {
		s.p.res.Warnings = append(s.p.res.Warnings, fmt.Sprintf(format, a...))
	}
}

// ready takes a recording's answer.
func (s *submission) ready(m *mailbox.DefinitionReady) {
	if s.p == nil {
		return
	}
	s.p.pending--
	res := s.p.res
	if m.RecordedNodes > 0 || m.RecordNs > 0 {
		s.ops.Add(trace.OpRecordNode, int64(m.RecordedNodes), m.RecordNs)
	}
	if m.Recorded && m.Err == nil {
		s.ops.Add(trace.OpBuildDefinition, 1, m.BuildNs)
		res.Pass.RecordedNodes += m.RecordedNodes
		res.Pass.BuiltDefinitions++
	}
	for _, d := range m.Defects {
		if s.rt.cfg.DefectsAsWarnings {
			s.warn("%v", d)
		} else {
			s.p.errs = append(s.p.errs, d)
		}
		res.Defects = append(res.Defects, d)
	}
	if m.Verify {
		res.Counts.Verified++
		s.maybeCommit()
		return
	}
	e := s.keys[m.StoreKey]
	switch {
	case m.Err == nil:
		e.def = m.Def
		s.uploadEarly(m.Def)
	case m.Panicked || s.rt.cfg.StrictRecording:
		e.failed = m.Err
		s.p.errs = append(s.p.errs, m.Err)
	default:
		// Unsupported constructs fall back: the pass is rerun with this
		// key on the ordinary path (its shells are already in the image,
		// and a shell cannot be unwound).
		e.failed = m.Err
		s.p.rerun = true
	}
	s.maybeCommit()
}

// maybeCommit is the commit barrier: it goes on once the orchestration has
// returned and every recording it asked for has answered.
func (s *submission) maybeCommit() {
	p := s.p
	if p.step != stepCommit || p.pending > 0 {
		return
	}
	if p.rerun && len(p.errs) == 0 {
		p.rerun = false
		s.runOrchestration()
		return
	}
	for _, sh := range p.shells {
		if sh.e.def == nil {
			if sh.e.failed == nil {
				panic("stages: shell of a key with neither a Definition nor a failure at commit")
			}
			continue
		}
		s.orch.FinalizeGraph(sh.task, sh.e.def.Hash, sh.e.def.Def.HeapBytes)
		s.use(sh.e.def)
	}
	p.res.Pass.Ops = s.ops
	p.phase.SetOps(&s.ops)
	p.res.Pass.Set(trace.PhaseHostOrch, p.phase.Finish())
	s.countImage()
	if len(p.errs) > 0 {
		s.finish(errors.Join(p.errs...))
		return
	}
	s.p.step = stepUpload
	var phCtx context.Context
	phCtx, p.phase = s.rt.tracer.StartPhase(p.req.run.Context(context.Background()), trace.PhaseGraphUpload, s.rank, p.req.round)
	if p.uploads == 0 && s.allUploaded() {
		// Every Definition this pass replays is a device object already:
		// there is nothing to upload, so nobody is asked.
		s.uploadsDone()
		return
	}
	// What was uploaded early is not sent again; the uploader answers this
	// request after every earlier one, so its answer closes graph_upload.
	p.uploads++
	s.ctx.Send(s.uploader, &mailbox.UploadRequest{Defs: p.used, Fresh: s.rt.cfg.NoRetain, ReplyTo: s.ctx.Self(), Trace: trace.Inject(phCtx)})
}

// uploadEarly asks for a Definition to be uploaded as soon as it is built,
// while the pass still waits for other recordings, so graph_upload finds it
// on the device. Not without retention, where each pass uploads afresh as
// upstream does.
func (s *submission) uploadEarly(d *mailbox.Definition) {
	if s.rt.cfg.NoRetain || s.onDevice[d.Hash] {
		return
	}
	s.p.uploads++
	s.ctx.Send(s.uploader, &mailbox.UploadRequest{Defs: []*mailbox.Definition{d}, ReplyTo: s.ctx.Self(), Trace: trace.Inject(s.p.runCtx)})
}

// allUploaded reports whether this rank's device holds every Definition the
// pass uses (as the uploader confirmed in an earlier pass).
func (s *submission) allUploaded() bool {
	if s.rt.cfg.NoRetain {
		return false
	}
	for _, d := range s.p.used {
		if !s.onDevice[d.Hash] {
			return false
		}
	}
	return true
}

// countImage derives the pass's counts from the run image itself.
func (s *submission) countImage() {
	img := s.orch.Image()
	c := &s.p.res.Counts
	c.HostSubmissions = len(img.Tasks)
	c.GraphSubmissions = len(img.Graphs)
	c.OrdinaryTasks = len(img.Tasks) - len(img.Graphs)
	c.Definitions = len(s.p.used)
	// Every Graph call became a GraphSubmission, or is accounted for by a
	// boundary mismatch or a failed recording; anything else ran on the
	// ordinary path for no reason the pass can name: demoted.
	c.Demoted = c.GraphCalls - c.GraphSubmissions - c.BoundaryMismatches - c.FallbackCalls
	nodes := 0
	for _, sh := range img.Graphs {
		if d := s.defByHash(sh.DefHash); d != nil {
			nodes += len(d.Def.Nodes)
		}
	}
	c.ExpectedDeviceTasks = c.OrdinaryTasks + nodes
	if s.rt.cfg.CountKernels {
		s.p.res.KernelTasks = kernelTasks(img, len(s.p.req.orch.Kernels), s.defByHash)
	}
}

// kernelTasks counts the device tasks of each kernel in a run image, Graph
// nodes included (a MIX task counts for its AIC kernel).
func kernelTasks(img *stages.RunImage, nkernels int, def func(uint64) *mailbox.Definition) []int {
	counts := make([]int, nkernels)
	add := func(k stages.Kind, ks [3]stages.KernelID) {
		id := ks[0]
		if k == stages.KindAIV {
			id = ks[1]
		}
		if id >= 0 && int(id) < nkernels {
			counts[id]++
		}
	}
	for _, t := range img.Tasks {
		if t.Kind == stages.KindGraph {
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

func (s *submission) defByHash(h uint64) *mailbox.Definition {
	for _, d := range s.p.used {
		if d.Hash == h {
			return d
		}
	}
	return nil
}

func (s *submission) uploaded(m *mailbox.UploadDone) {
	p := s.p
	if p == nil {
		return
	}
	p.uploads--
	p.res.Pass.UploadedDefinitionBytes += m.Bytes
	if m.Err != nil && p.uploadErr == nil {
		p.uploadErr = m.Err
	}
	if p.step == stepUpload && p.uploads == 0 {
		s.uploadsDone()
	}
}

// uploadsDone closes graph_upload and ships the run image.
func (s *submission) uploadsDone() {
	p := s.p
	p.res.Pass.Set(trace.PhaseGraphUpload, p.phase.Finish())
	if p.uploadErr != nil {
		s.finish(fmt.Errorf("graph_upload: %w", p.uploadErr))
		return
	}
	if s.onDevice == nil {
		s.onDevice = map[uint64]bool{}
	}
	for _, d := range p.used {
		s.onDevice[d.Hash] = true
	}
	p.step = stepCopy
	_, p.phase = s.rt.tracer.StartPhase(p.req.run.Context(context.Background()), trace.PhaseArenaH2D, s.rank, p.req.round)
	img := s.orch.Image()
	if s.rt.imageHook != nil {
		s.rt.imageHook(img)
	}
	// The device copies the image in its turn, before it answers, so the
	// buffer is free again for the next pass.
	s.imageBuf = stages.AppendRunImage(s.imageBuf, img)
	s.sendDevice(&deviceCopy{image: s.imageBuf})
}

func (s *submission) deviceReplied(m *deviceReply) {
	p := s.p
	if p == nil {
		return
	}
	switch p.step {
	case stepCopy:
		p.res.Pass.Set(trace.PhaseArenaH2D, p.phase.Finish())
		if m.err != nil {
			s.finish(fmt.Errorf("arena_h2d: %w", m.err))
			return
		}
		if s.rt.cfg.SkipDevice {
			s.finish(nil)
			return
		}
		p.step = stepLaunch
		_, p.phase = s.rt.tracer.StartPhase(p.req.run.Context(context.Background()), trace.PhaseDeviceWall, s.rank, p.req.round)
		p.res.DeviceStartNs = p.phase.StartNs()
		s.sendDevice(&deviceLaunch{timeline: s.rt.cfg.Timeline})
	case stepLaunch:
		if m.err != nil {
			p.phase.Finish()
			s.finish(fmt.Errorf("device: %w", m.err))
			return
		}
		sim, wall := p.phase.FinishDevice(m.result.SimNs)
		p.res.Pass.Set(trace.PhaseDeviceWall, sim)
		p.res.Pass.SimulationNs = wall
		p.res.Device = m.result
		s.finish(nil)
	}
}

func (s *submission) finish(err error) {
	p := s.p
	p.res.Err = err
	s.p = nil
	if s.rt.cfg.NoRetain && len(s.keys) > 0 {
		s.ctx.Send(s.rt.store, &forgetDefinitions{keys: slices.Collect(maps.Keys(s.keys))})
	}
	s.ctx.Send(p.replyTo, p.res)
}

// submitter is the Orchestrator an orchestration drives on this rank:
// ordinary calls go straight to stages.Orch, timed per operation; Graph
// calls go through the pipeline.
type submitter struct{ s *submission }

func (o submitter) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	t0 := trace.Now()
	id, r := o.s.orch.Alloc(specs)
	o.s.ops.Since(trace.OpAllocTensors, t0)
	return id, r
}

func (o submitter) Submit(t *stages.Task) stages.TaskID {
	t0 := trace.Now()
	id := o.s.orch.Submit(t)
	o.s.ops.Since(trace.OpSubmitTask, t0)
	return id
}

// NumRoots lets an interpreter predict the roots a task's outputs get.
func (o submitter) NumRoots() int { return o.s.orch.NumRoots() }

func (o submitter) ScopeBegin(m stages.ScopeMode) { o.s.orch.ScopeBegin(m) }
func (o submitter) ScopeEnd()                     { o.s.orch.ScopeEnd() }

func (o submitter) Graph(call *stages.GraphCall) stages.TaskID { return o.s.graph(call) }
