package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// Orchestration is a program of tasks: a Go function or a model config
// interpreted as one (config.Model.Orchestration). Name is its identity,
// hashed into every full_key.
type Orchestration = stages.Orchestration

// Runtime is hbg running inside an actor system.
type Runtime struct {
	sys        *actor.ActorSystem
	cfg        Config
	tracer     *trace.Tracer
	supervisor *actor.PID
	store      *actor.PID
	disk       *diskstore.Store // nil without a store on disk
	diskWriter *actor.PID
	diskErrs   diskErrors
	Stats      Stats
	Mailboxes  mailbox.Registry
	nextCall   atomic.Uint64
	// stopped is closed when Stop begins: every waiting caller wakes with
	// ErrStopped at once.
	stopped  chan struct{}
	stopOnce sync.Once
	dispatch *warmDispatcher
	mu       sync.Mutex
	ranks    map[int]*actor.PID // submission actors, cached from the supervisor
	caller   PassCaller         // the caller side of every pass (localPasses)
	// recorderHook injects faults in tests; imageHook tampers with a run
	// image before it is copied (the golden check's own test).
	recorderHook func(*mailbox.RecordJob)
	imageHook    func(*stages.RunImage)
	golden       goldenCache
}

// Start starts the runtime inside an existing actor system: the supervisor,
// the Definition store (with its writer when Config.StoreDir names a store
// on disk) and the prewarmed recorder pool. A rank's actors (submission,
// replay, uploader, device) start on its first pass. Zero fields of cfg take
// their defaults; a cfg that Config.Validate refuses is a *ConfigError.
func Start(sys *actor.ActorSystem, cfg Config) (*Runtime, error) {
	return start(sys, cfg, nil)
}

func start(sys *actor.ActorSystem, cfg Config, hook func(*mailbox.RecordJob)) (*Runtime, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rt := &Runtime{sys: sys, cfg: cfg, tracer: cfg.Tracer, recorderHook: hook, imageHook: cfg.TamperImage, stopped: make(chan struct{}), ranks: map[int]*actor.PID{}}
	if rt.tracer == nil {
		rt.tracer = trace.NewTracer(nil)
	}
	rt.caller = PassCaller{Transport: localPasses{rt}, Timeout: cfg.PassTimeout, Stopped: rt.stopped}
	if err := rt.openDisk(); err != nil {
		return nil, err
	}
	rt.dispatch = newWarmDispatcher(dispatchWorkers, spinPolicyFor(cfg.SpinFor))
	// A crashed child is restarted in place, its mailbox intact, every
	// time: a budget of restarts would stop a recorder for good after a run
	// of panicking bodies and strand the jobs queued to it. A body's own
	// failure is a value (stages.BodyFunc), so a restart means a panic.
	strategy := actor.NewRestartingStrategy()
	props := rt.props("supervisor", 0, func() actor.Actor { return &supervisor{rt: rt} }, actor.WithSupervisor(strategy))
	rt.supervisor = sys.Root.Spawn(props)
	f := sys.Root.RequestFuture(rt.supervisor, &spawnCore{}, 30*time.Second)
	if _, err := f.Result(); err != nil {
		rt.dispatch.close()
		return nil, fmt.Errorf("starting the runtime: %w", err)
	}
	return rt, nil
}

// Stop fails every pass in flight or queued with ErrStopped at once, then
// flushes the store to disk and stops every actor of the runtime, waiting
// for them until ctx ends. Pass after Stop returns ErrStopped. Stop is safe
// to call more than once.
func (rt *Runtime) Stop(ctx context.Context) error {
	first := false
	rt.stopOnce.Do(func() { close(rt.stopped); first = true })
	if !first {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		rt.flushDisk()
		err := rt.sys.Root.StopFuture(rt.supervisor).Wait()
		rt.closeDisk()
		rt.dispatch.close()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("stopping the hbg runtime: %w", ctx.Err())
	}
}

// Pass runs one pass of orch on a rank and waits for its result.
//
// rank names the die the pass runs on (0 or more): each rank has its own
// submission state and simulated device, made the first time a pass names
// it, and ranks share the runtime's recorders and Definitions. round is
// the pass's number on that rank, counted from 0, as a decode step's
// index: round 0 is reported as the cold pass (PassResult.Pass.Cold), and
// with Config.NoRetain each (rank, round) keys its own Definitions. An
// orchestration with At (a program whose steps change) runs At(round);
// any other runs the same work every round and ends with the same
// digest. Rounds need not be consecutive, and a round may be run again.
//
// Passes of different ranks run concurrently. Passes of one rank overlap up to
// Config.InFlight (the next is orchestrated while the previous is copied and
// run); callers beyond that wait in the rank's queue, first come first
// served, up to Config.QueueDepth (then *RankBusyError).
//
// The pass's spans are children of the span in ctx (the rank's run span, in
// Run). ctx is honoured throughout: an ended ctx returns its error without
// running anything; one that ends while the pass waits or runs returns
// errors.Is(err, ctx.Err()) at once and frees the rank (work already at the
// device finishes there, unreported). A pass's error is also res.Err.
func (rt *Runtime) Pass(ctx context.Context, orch *Orchestration, rank, round int) (*PassResult, error) {
	return rt.caller.Pass(ctx, orch, rank, round)
}

// Pending is a pass asked for with Ask and not yet waited for.
type Pending struct{ *CalledPass }

// Ask asks for a pass without waiting for it: the passes of one rank asked
// for in order start in that order, so a caller (a rank host serving
// passes from another process) keeps several in flight as Run does. ctx
// gives the pass its parent span and can end it, as in Pass. Every Pending
// must be waited for (Wait, as Pass waits) or dropped (Drop: it returns
// once the rank has let the pass go).
func (rt *Runtime) Ask(ctx context.Context, orch *Orchestration, rank, round int) (*Pending, error) {
	p, err := rt.caller.Ask(ctx, orch, rank, round)
	if err != nil {
		return nil, err
	}
	return &Pending{p}, nil
}

// localPasses is the Runtime as the caller side of a pass sees it
// (PassTransport): a pass goes to its rank's submission actor.
type localPasses struct{ rt *Runtime }

// localTicket is one pass sent to a rank's submission.
type localTicket struct {
	rt  *Runtime
	req *passReq
	sub *actor.PID
}

func (localPasses) CheckPass(*Orchestration, int, int) error { return nil }

func (l localPasses) SendPass(ctx context.Context, orch *Orchestration, rank, round int) (PassTicket, error) {
	rt := l.rt
	// A program whose steps change runs its round's (Orchestration.At).
	orch = orch.Round(round)
	if rt.cfg.Golden {
		// The reference is made once per orchestration, before its first
		// pass is asked for: made after a pass returned, it would hold up
		// the next pass and show as device_idle. An error is kept and
		// reported with the pass.
		if err := rt.reference(ctx, orch, rank, round); err != nil {
			return nil, err
		}
	}
	sub, err := rt.rankActor(rank)
	if err != nil {
		return nil, err
	}
	req := &passReq{id: rt.nextCall.Add(1), orch: orch, round: round, run: trace.Inject(ctx), reply: make(chan *PassResult, 1)}
	rt.sys.Root.Send(sub, req)
	return &localTicket{rt: rt, req: req, sub: sub}, nil
}

func (t *localTicket) Reply() <-chan *PassResult { return t.req.reply }

func (t *localTicket) Answered(res *PassResult) { t.rt.checkGolden(t.req.orch, res) }

// GiveUp frees the rank: the pass leaves its queue, or its replay answers
// it now (on the reply, which says the rank let it go). After Stop there
// is no rank to tell.
func (t *localTicket) GiveUp(err error) <-chan *PassResult {
	select {
	case <-t.rt.stopped:
		return nil
	default:
	}
	t.rt.sys.Root.Send(t.sub, &cancelPass{id: t.req.id, err: err})
	return t.req.reply
}

func (rt *Runtime) rankActor(rank int) (*actor.PID, error) {
	rt.mu.Lock()
	pid := rt.ranks[rank]
	rt.mu.Unlock()
	if pid != nil {
		return pid, nil
	}
	res, err := rt.sys.Root.RequestFuture(rt.supervisor, &spawnRank{rank: rank}, 30*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("starting rank %d: %w", rank, err)
	}
	pid, ok := res.(*actor.PID)
	if !ok {
		return nil, fmt.Errorf("starting rank %d: %w", rank, ErrStopped)
	}
	rt.mu.Lock()
	rt.ranks[rank] = pid
	rt.mu.Unlock()
	return pid, nil
}
