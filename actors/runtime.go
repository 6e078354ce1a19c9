// Package actors is hbg's runtime as an actor system: a submission actor per
// rank, a prewarmed pool of recorders that build what they record, a
// Definition store that outlives runs, an uploader, a replay and a device actor per
// rank, all under one supervisor. The actors are thin: each owns state and
// calls the pure steps in stages/ (the pass itself is stages.Host and
// stages.Replay) and npu/.
package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// MaxRecorders bounds Config.Recorders: recorders past the processors only
// time-share them, and each is an actor started with the runtime, so a
// pool of a million takes gigabytes and outlasts Start's own timeout.
const MaxRecorders = 4096

// Config configures a runtime.
type Config struct {
	// Recorders is the size of the prewarmed recorder pool (default: the
	// processors Go runs on, GOMAXPROCS, at least 2). It bounds how many
	// bodies record at once, never which keys record. A recording is CPU
	// work: recorders beyond the processors only time-share them, and each
	// touches its own buffers, fresh memory in a cold pass (DSv4 full's
	// first pass on 2 cores: 2.23 ms with 8 recorders, 1.96 ms with 2).
	// At most MaxRecorders.
	Recorders int
	// NoRetain drops every Definition after each pass, so each pass records,
	// builds and uploads again (upstream's behaviour, for comparison).
	NoRetain bool
	// SkipDevice stops each pass after the run image is copied.
	SkipDevice bool
	// FullEdges ships every fanin edge the TensorMap resolved, in the run
	// image and in each Definition, instead of their transitive reduction
	// (stages/reduce.go; hbgrun's --reduce-edges=false).
	FullEdges bool
	// DefectsAsWarnings reports the body defects (input written, baked
	// scalar, structure not in key) as warnings instead of failing the pass.
	DefectsAsWarnings bool
	// StrictRecording fails the pass when a body records something
	// unsupported, instead of running that key's calls on the ordinary path.
	StrictRecording bool
	// Timeline asks the device for its per-core timeline.
	Timeline bool
	// CountKernels fills PassResult.KernelTasks: how many device tasks each
	// kernel runs in a pass, Graph nodes included.
	CountKernels bool
	// Device configures each rank's simulated a2a3 die.
	Device npu.Config
	// Golden checks every pass against its golden reference (golden.go)
	// and fills PassResult.Golden.
	Golden bool
	// TamperImage, if set, changes every run image before it is copied:
	// for tests that the golden check catches a wrong replay.
	TamperImage func(*stages.RunImage)
	// Tracer makes the spans; nil traces nothing.
	Tracer *trace.Tracer
	// PassTimeout bounds one pass (default 10 minutes).
	PassTimeout time.Duration
	// InFlight bounds the passes of one rank handed to its replay and not
	// yet answered (default 2): the submission orchestrates pass N+1 while
	// pass N is copied and run. 1 makes host and device take turns.
	InFlight int
	// QueueDepth bounds the passes of one rank waiting to start beyond
	// InFlight (default 1024); a pass past it fails at once with a
	// *RankBusyError. The queue is first come, first served.
	QueueDepth int
	// StoreDir is the Definition store on disk (package diskstore) that
	// Definitions outlive the process in, shared by every process that
	// names it; "" or "off" keeps them in memory only. hbgrun's default is
	// diskstore.DefaultDir().
	StoreDir string
	// StoreMax bounds the store on disk in bytes (0: diskstore.DefaultMax).
	StoreMax int64
	// SpinFor is how long a worker goroutine that ends an actor's turn
	// spins for the next one before it parks (0: it parks at once; 250 µs
	// covers a warm DSv4 full turn). A handoff to a spinning worker wakes
	// no OS thread: on a 2-core VM it took the warm full control plane
	// from ~125 to ~70 µs while the other core was free, and made it
	// worse (and doubled the CPU a pass) while the host shared that core
	// with other work, so it is off unless asked for. Spinning stops by
	// itself when the OS preempts a spinner and when runs outnumber
	// spinners (actors/dispatch.go).
	SpinFor time.Duration
	// Peers is where the store looks for a Definition it misses, after the
	// store on disk and before recording it: the other nodes of a cluster
	// (package peer), so that a Definition is recorded once per cluster.
	// nil: nowhere (a single process records what it misses).
	Peers DefinitionSource
}

// Orchestration is a program of tasks: a Go function or a model config
// interpreted as one (config.Model.Orchestration). Name is its identity,
// hashed into every full_key.
type Orchestration = stages.Orchestration

// Counts describe one pass.
type Counts = stages.PassCounts

// PassResult is one pass of one rank.
type PassResult struct {
	Pass     trace.Pass
	Counts   Counts
	Device   *npu.Result
	Defects  []stages.Defect
	Warnings []string
	// DeviceStartNs is when device_wall began, on trace.Now's clock: the
	// simulated timeline starts there in a trace.
	DeviceStartNs int64
	// KernelTasks counts device tasks per KernelID (with CountKernels).
	KernelTasks []int
	// Golden is the pass's golden check (with Config.Golden).
	Golden *Golden
	Err    error
}

// Phase is how long phase ph took in this pass (device_wall: the simulated
// wall) and whether the pass measured it.
func (r *PassResult) Phase(ph trace.Phase) (time.Duration, bool) {
	return time.Duration(r.Pass.Phases[ph]), r.Pass.Has(ph)
}

// ControlPlane is the pass's host_orch + graph_upload + arena_h2d.
func (r *PassResult) ControlPlane() time.Duration {
	ns, _ := r.Pass.ControlPlaneNs()
	return time.Duration(ns)
}

// Stats are the runtime's lifetime counters.
type Stats struct {
	Recorded      atomic.Int64
	RecordedNodes atomic.Int64
	Restarts      atomic.Int64
	MaxQueued     atomic.Int64
	// Loaded, StoreRejected and StoreWritten count Definitions loaded from
	// the store on disk, entries rejected there, and Definitions written.
	Loaded        atomic.Int64
	StoreRejected atomic.Int64
	StoreWritten  atomic.Int64
	// Fetched, FetchedBytes and FetchRejected count Definitions fetched
	// from Config.Peers, their bytes, and images from there that failed
	// verification.
	Fetched       atomic.Int64
	FetchedBytes  atomic.Int64
	FetchRejected atomic.Int64
}

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
	// recorderHook injects faults in tests; imageHook tampers with a run
	// image before it is copied (the golden check's own test).
	recorderHook func(*mailbox.RecordJob)
	imageHook    func(*stages.RunImage)
	golden       goldenCache
}

// EnsureDefaults gives each zero field its default (Recorders GOMAXPROCS,
// PassTimeout 10 minutes, InFlight 2, QueueDepth 1024, the device's
// DefaultConfig), leaving a negative value for Validate to refuse.
func (c *Config) EnsureDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Recorders, max(2, runtime.GOMAXPROCS(0)))
	def(&c.InFlight, 2)
	def(&c.QueueDepth, 1024)
	if c.PassTimeout == 0 {
		c.PassTimeout = 10 * time.Minute
	}
	c.Device.EnsureDefaults()
}

// Validate reports the first field a runtime cannot start with, as a
// *ConfigError (errors.Is ErrInvalidConfig). Start calls EnsureDefaults
// first; a caller that validates alone (a command checking its flags)
// refuses zero where Start would take the default.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Recorders", c.Recorders}, // the pool bounds how many bodies record at once
		{"InFlight", c.InFlight},
		{"QueueDepth", c.QueueDepth},
	} {
		if f.v < 1 {
			return &ConfigError{Field: f.name, Value: f.v, Want: "at least 1"}
		}
	}
	if c.Recorders > MaxRecorders {
		return &ConfigError{Field: "Recorders", Value: c.Recorders, Want: fmt.Sprintf("at most %d", MaxRecorders)}
	}
	if c.SpinFor < 0 {
		return &ConfigError{Field: "SpinFor", Value: c.SpinFor, Want: "0 (no spinning) or a positive duration"}
	}
	if c.PassTimeout <= 0 {
		return &ConfigError{Field: "PassTimeout", Value: c.PassTimeout, Want: "a positive duration"}
	}
	if c.StoreMax < 0 {
		return &ConfigError{Field: "StoreMax", Value: c.StoreMax, Want: "0 (the default bound) or more bytes"}
	}
	if err := c.Device.Validate(); err != nil {
		var de *npu.ConfigError
		if !errors.As(err, &de) {
			panic(fmt.Sprintf("npu.Config.Validate returned %T, not *npu.ConfigError", err))
		}
		return &ConfigError{Field: "Device." + de.Field, Value: de.Value, Want: de.Want}
	}
	return nil
}

// Start starts the runtime inside an existing actor system: the supervisor,
// the store and the prewarmed recorder pool. Ranks (submission,
// uploader, device) start on their first pass.
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

// Pass runs one pass of orch on a rank and waits for its result. Passes of
// different ranks run concurrently. Passes of one rank overlap up to
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
	c, err := rt.submit(ctx, orch, rank, round)
	if err != nil {
		return nil, err
	}
	return rt.wait(ctx, c)
}

// Pending is a pass asked for with Ask and not yet waited for.
type Pending struct {
	rt *Runtime
	c  *call
}

// Ask asks for a pass without waiting for it: the passes of one rank asked
// for in order start in that order, so a caller (a rank host serving
// passes from another process) keeps several in flight as Run does. ctx
// gives the pass its parent span and can end it, as in Pass. Every Pending
// must be waited for.
func (rt *Runtime) Ask(ctx context.Context, orch *Orchestration, rank, round int) (*Pending, error) {
	c, err := rt.submit(ctx, orch, rank, round)
	if err != nil {
		return nil, err
	}
	return &Pending{rt: rt, c: c}, nil
}

// Wait waits for the pass's result, as Pass does.
func (p *Pending) Wait(ctx context.Context) (*PassResult, error) { return p.rt.wait(ctx, p.c) }

// call is a pass asked for and not yet waited for.
type call struct {
	req  *passReq
	sub  *actor.PID
	rank int
}

func (rt *Runtime) submit(ctx context.Context, orch *Orchestration, rank, round int) (*call, error) {
	switch {
	case orch == nil:
		return nil, fmt.Errorf("rank %d round %d: %w: nil orchestration", rank, round, ErrInvalidPass)
	case orch.Run == nil:
		return nil, fmt.Errorf("rank %d round %d: %w: orchestration %q has no Run function", rank, round, ErrInvalidPass, orch.Name)
	case rank < 0:
		return nil, fmt.Errorf("rank %d round %d: %w: negative rank", rank, round, ErrInvalidPass)
	case round < 0:
		return nil, fmt.Errorf("rank %d round %d: %w: negative round", rank, round, ErrInvalidPass)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rank %d round %d: %w", rank, round, err)
	}
	select {
	case <-rt.stopped:
		return nil, fmt.Errorf("rank %d round %d: %w", rank, round, ErrStopped)
	default:
	}
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
	return &call{req: req, sub: sub, rank: rank}, nil
}

func (rt *Runtime) wait(ctx context.Context, c *call) (*PassResult, error) {
	t := time.NewTimer(rt.cfg.PassTimeout)
	defer t.Stop()
	var err error
	select {
	case res := <-c.req.reply:
		rt.checkGolden(c.req.orch, res)
		return res, res.Err
	case <-ctx.Done():
		err = fmt.Errorf("rank %d round %d: %w", c.rank, c.req.round, ctx.Err())
	case <-t.C:
		err = fmt.Errorf("rank %d round %d: no result after %v (Config.PassTimeout): %w", c.rank, c.req.round, rt.cfg.PassTimeout, context.DeadlineExceeded)
	case <-rt.stopped:
		return nil, fmt.Errorf("rank %d round %d: %w", c.rank, c.req.round, ErrStopped)
	}
	// Free the rank: the pass leaves its queue, or its replay answers it now.
	rt.sys.Root.Send(c.sub, &cancelPass{id: c.req.id, err: err})
	return nil, err
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

type spawnCore struct{}
type spawnRank struct{ rank int }

// supervisor is the parent of every hbg actor: it restarts a crashed child
// (OneForOne) and spawns the per-rank actors on demand.
type supervisor struct {
	rt    *Runtime
	ranks map[int]*actor.PID
}

func (s *supervisor) Receive(ctx actor.Context) {
	rt := s.rt
	switch m := ctx.Message().(type) {
	case *spawnCore:
		rt.spawnDisk(ctx)
		rt.store = ctx.Spawn(rt.props("store", 0, func() actor.Actor { return newStore(rt) }))
		recs := make([]*actor.PID, rt.cfg.Recorders)
		for i := range recs {
			name := fmt.Sprintf("recorder-%d", i)
			recs[i] = ctx.Spawn(rt.props(name, 4, func() actor.Actor {
				return newRecorder(name, rt.store, rt.tracer, &rt.Stats, rt.recorderHook)
			}))
		}
		ctx.Send(rt.store, &storeReady{recorders: recs})
		ctx.Respond(true)
	case *spawnRank:
		if s.ranks == nil {
			s.ranks = map[int]*actor.PID{}
		}
		if pid, ok := s.ranks[m.rank]; ok {
			ctx.Respond(pid)
			return
		}
		select {
		case <-rt.stopped:
			// Stop has begun: a child spawned now would miss the stop of
			// its siblings, and the supervisor would wait for it forever.
			ctx.Respond(ErrStopped)
			return
		default:
		}
		dev := ctx.Spawn(newDeviceProps(rt, m.rank))
		// The replay runs its turns on the goroutine that posts to it
		// (protoactor's synchronized dispatcher): a handoff at the end of
		// host_orch, an upload's answer, the device's. Its turns are short
		// (finalize shells, encode the run image, send), and each was the
		// tail of its sender's; on a worker of its own, a handoff readied a
		// parked goroutine, whose wake-up (a futex call and, on a VM, an
		// interrupt to the other core) was half of a warm graph_upload.
		// The mailbox still runs one turn at a time: a message that
		// arrives during a turn is queued and run by that turn's goroutine.
		rp := ctx.Spawn(rt.inlineProps(fmt.Sprintf("replay-%d", m.rank), func() actor.Actor {
			return &replayActor{rt: rt, rank: m.rank, device: dev}
		}))
		upName := fmt.Sprintf("uploader-%d", m.rank)
		up := ctx.Spawn(rt.props(upName, 0, func() actor.Actor {
			return &uploader{rank: m.rank, name: upName, device: dev, replay: rp, tracer: rt.tracer, noRetain: rt.cfg.NoRetain, disk: rt.disk}
		}))
		sub := ctx.Spawn(rt.props(fmt.Sprintf("submission-%d", m.rank), 0, func() actor.Actor {
			return &submission{rt: rt, rank: m.rank, uploader: up, device: dev, replay: rp}
		}))
		// Before any pass can reach the submission, so before any handoff.
		ctx.Send(rp, &replayWire{submission: sub})
		s.ranks[m.rank] = sub
		ctx.Respond(sub)
	}
}

// passConfig is the part of the configuration a pass's logic reads.
func (rt *Runtime) passConfig() stages.PassConfig {
	return stages.PassConfig{
		NoRetain: rt.cfg.NoRetain, DefectsAsWarnings: rt.cfg.DefectsAsWarnings,
		StrictRecording: rt.cfg.StrictRecording, SkipDevice: rt.cfg.SkipDevice, CountKernels: rt.cfg.CountKernels,
		FullEdges: rt.cfg.FullEdges,
	}
}

// NewActorSystem is an actor system whose own logging goes to the given
// logger (nil: discarded). protoactor logs every system start and every
// supervised restart at INFO on stdout, which would interleave with a run's
// report; hbg reports restarts and failures itself.
func NewActorSystem(log *slog.Logger) *actor.ActorSystem {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
}
