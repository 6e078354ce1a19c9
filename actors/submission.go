package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// passReq is one caller's request for a pass, from Runtime.Pass to the
// rank's submission; its answer goes to reply (buffered, written once).
type passReq struct {
	id    uint64
	orch  *Orchestration
	round int
	// run is the rank's run span; every phase span is its child.
	run   trace.Carrier
	reply chan *PassResult
}

// passRun is a pass as the actors carry it: the pure stages.Pass and what
// the shells keep around it (the caller, the result being filled, the open
// phase span). It travels with the pass: submission -> replay, and back to
// the submission to be rerun (a key fell back) and, as the pass ends (just
// before the caller has its answer), to free its slot and recycle its
// image (passDone).
type passRun struct {
	req   *passReq
	pass  *stages.Pass
	res   *PassResult
	ops   trace.Ops
	phase trace.PhaseSpan // the phase span open now, if any
	// image is the encoded run image, the device's to read until it has
	// answered the copy.
	image []byte
	// clock is the pass's control-plane arithmetic (the pure
	// stages.PhaseClock): the shells feed it the clock readings their spans
	// took, and set the figures it gives. It also places the pass on the
	// device's timeline (stages.DeviceAxis); placed says it was.
	clock  stages.PhaseClock
	placed bool
	// handoffNs is when the replay took the pass while it still awaited
	// recordings, lastDefNs when the last of them arrived: record_wait.
	handoffNs, lastDefNs int64
	// shipped: its run image went to the device (freeAfter waits for it).
	shipped bool
}

// startPhase opens ph's span; graph_upload's opening is the clock's too.
func (r *passRun) startPhase(tr *trace.Tracer, ph trace.Phase, rank int) context.Context {
	ctx, span := tr.StartPhase(r.req.run.Context(context.Background()), ph, rank, r.req.round)
	r.phase = span
	if ph == trace.PhaseGraphUpload {
		r.clock.UploadOpened(span.StartNs())
	}
	return ctx
}

// endPhase ends the open span and says when it ended, on trace.Now's axis
// (its start plus the duration it exported, so a span and its figure agree).
func (r *passRun) endPhase() int64 {
	return r.phase.StartNs() + r.phase.Finish()
}

// closeUpload ends graph_upload's span at a ship (or at a failure before
// one) and sets its figure from the clock.
func (r *passRun) closeUpload(shipped bool) {
	at := r.endPhase()
	if shipped {
		r.clock.Shipped(at)
	} else {
		r.clock.UploadClosed(at)
	}
	r.res.Pass.Set(trace.PhaseGraphUpload, r.clock.GraphUpload)
}

// The submission's and the replay's messages to each other.
type (
	// handoff gives a pass to the replay at the end of host_orch.
	handoff struct{ run *passRun }
	// learned tells the submission what a pass learned about its keys.
	learned struct{ ls []stages.Learned }
	// rerun gives a pass back to be orchestrated again (a key fell back).
	rerun struct {
		run *passRun
		ls  []stages.Learned
	}
	// passDone frees a pass's slot on the rank.
	passDone struct{ run *passRun }
	// cancelPass ends a caller's pass (its context ended).
	cancelPass struct {
		id  uint64
		err error
	}
	// freeAfter asks the replay to free the device objects of the
	// Definitions the residency budget evicted at pass's end, once no pass
	// up to it is still to ship (one of them may replay them).
	freeAfter struct {
		pass   uint64
		hashes []uint64
	}
	// forgetUploads tells the uploader the device objects it no longer
	// holds for the rank.
	forgetUploads struct{ hashes []uint64 }
)

// submission owns one rank's host side (stages.Host: the ordinary path,
// what the rank knows of each key) and runs each pass's orchestration in one
// turn, sending record requests as the Graph calls make them. At the end of
// host_orch it hands the pass to the rank's replay and starts the next one.
// It holds callers beyond cfg.InFlight passes in a queue.
type submission struct {
	rt         *Runtime
	rank       int
	device     *actor.PID
	replay     *actor.PID
	uploader   *actor.PID
	host       *stages.Host
	registered string // the orchestration whose entry roots the device has
	queue      []*passReq
	inFlight   int
	cur        *passRun
	curCtx     context.Context // the host_orch span, parent of recordings
	// inGraph is the key of the Graph call the orchestration is in, ""
	// outside one: what a Goexit on the ordinary path names (runGuarded).
	inGraph string
	ctx     actor.Context // valid during a turn only
}

func (s *submission) Receive(ctx actor.Context) {
	s.ctx = ctx
	defer func() { s.ctx = nil }()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.host = stages.NewHost(s.rank, s.rt.passConfig())
	case *passReq:
		if len(s.queue) >= s.rt.cfg.QueueDepth {
			err := &RankBusyError{Rank: s.rank, Round: m.round, Queued: len(s.queue)}
			m.reply <- &PassResult{Pass: trace.NewPass(s.rank, m.round), Err: err}
			return
		}
		s.queue = append(s.queue, m)
	case *learned:
		s.host.Learn(m.ls)
	case *rerun:
		s.host.Learn(m.ls)
		s.orchestrate(m.run, s.host.Rerun(m.run.pass))
	case *passDone:
		s.inFlight--
		s.host.Recycle(m.run.pass.Image)
		if keys := m.run.pass.StoreKeys; len(keys) > 0 {
			ctx.Send(s.rt.store, &forgetDefinitions{keys: keys})
		}
	case *cancelPass:
		for i, q := range s.queue {
			if q.id == m.id {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				q.reply <- &PassResult{Pass: trace.NewPass(s.rank, q.round), Err: m.err}
				return
			}
		}
		ctx.Send(s.replay, m)
	}
	s.next()
}

// next starts queued passes while the rank has room: fewer than InFlight
// passes handed off, and no key of this rank still recording (so only one
// pass at a time waits for recordings, and a key is never a shell of two).
func (s *submission) next() {
	select {
	case <-s.rt.stopped:
		return // the callers have their ErrStopped; start nothing new
	default:
	}
	for len(s.queue) > 0 && s.inFlight < s.rt.cfg.InFlight && !s.host.Recording() {
		req := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.start(req)
	}
}

func (s *submission) start(req *passReq) {
	run := &passRun{req: req, res: &PassResult{Pass: trace.NewPass(s.rank, req.round)}}
	// args: the entry roots are registered with the device once per
	// orchestration; the device keeps them across passes.
	run.startPhase(s.rt.tracer, trace.PhaseArgs, s.rank)
	if s.registered != req.orch.Name {
		s.ctx.Send(s.device, &mailbox.RegisterDevice{Entry: req.orch.Entry, Kernels: req.orch.Kernels})
		s.registered = req.orch.Name
	}
	run.res.Pass.Set(trace.PhaseArgs, run.phase.Finish())
	s.curCtx = run.startPhase(s.rt.tracer, trace.PhaseHostOrch, s.rank)
	s.orchestrate(run, s.host.BeginBounded(req.orch.Name, req.orch.Entry, len(req.orch.Kernels), req.round, req.orch.MaxEdges))
}

// orchestrate runs the orchestration inside this turn and hands the pass
// off. The clock (stages.PhaseClock) says where its time goes: a first
// orchestration is host_orch's span; a rerun runs inside the pass's open
// graph_upload span, or after the ship, and its time is host_orch's alone.
func (s *submission) orchestrate(run *passRun, p *stages.Pass) {
	rerun := run.pass != nil
	run.pass = p
	s.cur = run
	run.ops = trace.Ops{} // a rerun starts its counts over
	begin := trace.Now()
	if !rerun {
		begin = run.phase.StartNs()
	}
	err := s.runGuarded(run.req.orch)
	p = s.host.End(err)
	s.cur = nil
	if len(p.Evicted) > 0 {
		// Sent before any later pass's record request for the key, so
		// the store records it again rather than answering from memory.
		s.ctx.Send(s.rt.store, &forgetDefinitions{keys: p.Evicted})
	}
	if len(p.Freed) > 0 {
		// Likewise the uploader: a key recorded again is uploaded again.
		s.ctx.Send(s.uploader, &forgetUploads{hashes: p.Freed})
	}
	var end int64
	if rerun {
		end = trace.Now()
	} else {
		run.phase.SetOps(&run.ops)
		end = run.endPhase()
	}
	open := run.clock.Orchestrated(begin, end)
	run.res.Pass.Set(trace.PhaseHostOrch, run.clock.HostOrch)
	if open {
		run.startPhase(s.rt.tracer, trace.PhaseGraphUpload, s.rank)
	}
	if !rerun {
		s.inFlight++
	}
	s.ctx.Send(s.replay, &handoff{run: run})
	if len(p.Freed) > 0 {
		s.ctx.Send(s.replay, &freeAfter{pass: p.ID, hashes: p.Freed})
	}
}

// runGuarded runs orch's code, the caller's, on a goroutine of its own and
// waits for it, as the recorder runs a body (recordBody): a panic is its
// error, and so is a runtime.Goexit (as t.Fatal does), which run in this
// turn would end the submission's mailbox goroutine, which nothing
// restarts, and with it the rank: every later pass would wait for its ctx
// and Stop for its bound. A body run on the ordinary path (a key that fell
// back) runs here, so this is where its Goexit lands; the error names the
// Graph call it was in (s.inGraph). The actor's turn is blocked while the
// goroutine runs, so the orchestration still owns the rank's state alone.
func (s *submission) runGuarded(orch *Orchestration) (err error) {
	done := make(chan struct{})
	go func() {
		returned := false
		defer func() {
			if !returned {
				if p := recover(); p != nil {
					err = fmt.Errorf("orchestration %q panicked: %w", orch.Name, panicError(p))
					if b, ok := p.(*stages.EdgeBoundError); ok {
						err = fmt.Errorf("orchestration %q: %w", orch.Name, b)
					}
				} else if s.inGraph != "" {
					err = fmt.Errorf("orchestration %q: graph %q on the ordinary path: %w", orch.Name, s.inGraph, ErrBodyExited)
				} else {
					err = fmt.Errorf("orchestration %q: %w", orch.Name, ErrOrchestrationExited)
				}
			}
			s.inGraph = ""
			close(done)
		}()
		if e := orch.Run(submitter{s}); e != nil {
			err = fmt.Errorf("orchestration %q: %w", orch.Name, e)
		}
		returned = true
	}()
	<-done
	return err
}

// graph is one Graph call: the Host decides, the shell sends what it asks
// for to the store at once, so recordings overlap the orchestration.
func (s *submission) graph(call *stages.GraphCall) stages.TaskID {
	t0 := trace.Now()
	graphs := s.host.Ordinary().NumGraphs()
	outer := s.inGraph
	s.inGraph = call.Key
	id := s.host.Graph(call, submitter{s})
	s.inGraph = outer
	if jobs := s.host.TakeJobs(); len(jobs) > 0 {
		tc := trace.Inject(s.curCtx)
		for _, j := range jobs {
			s.ctx.Send(s.rt.store, &mailbox.RecordJob{RecordRequest: j, Model: s.registered, ReplyTo: s.uploader, Trace: tc})
		}
	}
	if s.host.Ordinary().NumGraphs() > graphs {
		// A replay or a shell; a call on the ordinary path is timed as
		// its tasks.
		s.cur.ops.Since(trace.OpGraphSubmit, t0)
	}
	return id
}

// submitter is the Submitter an orchestration drives on this rank:
// ordinary calls go straight to stages.OrdinaryPath, timed per operation; Graph
// calls go through the Host.
type submitter struct{ s *submission }

var _ stages.RootCounter = submitter{}

func (o submitter) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	t0 := trace.Now()
	id, r := o.s.host.Ordinary().Alloc(specs)
	o.s.cur.ops.Since(trace.OpAllocTensors, t0)
	return id, r
}

func (o submitter) Submit(t *stages.Task) stages.TaskID {
	t0 := trace.Now()
	id := o.s.host.Ordinary().Submit(t)
	o.s.cur.ops.Since(trace.OpSubmitTask, t0)
	return id
}

// NumRoots lets an interpreter predict the roots a task's outputs get.
func (o submitter) NumRoots() int { return o.s.host.Ordinary().NumRoots() }

// HostWait orders a host access to device data with the tasks
// (stages.HostWaiter), on the ordinary path.
func (o submitter) HostWait(v stages.View, consumers bool) stages.TaskID {
	return o.s.host.Ordinary().HostWait(v, consumers)
}

func (o submitter) ScopeBegin(m stages.ScopeMode) { o.s.host.Ordinary().ScopeBegin(m) }
func (o submitter) ScopeEnd()                     { o.s.host.Ordinary().ScopeEnd() }

func (o submitter) Graph(call *stages.GraphCall) stages.TaskID { return o.s.graph(call) }

// GraphBoundary lets the interpreter write a Graph call's boundary straight
// into the run image (stages.BoundaryWriter).
func (o submitter) GraphBoundary(n int) []stages.Arg { return o.s.host.GraphBoundary(n) }

// GraphLocs lets it pass a Graph call's boundary by template
// (stages.LocWriter).
func (o submitter) GraphLocs(n int) []stages.Loc { return o.s.host.GraphLocs(n) }
