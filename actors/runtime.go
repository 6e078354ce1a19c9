// Package actors is hbg's runtime as an actor system: a submission actor per
// rank, a prewarmed pool of recorders, a Definition builder, a Definition
// store that outlives runs, an uploader and a device actor per rank, all
// under one supervisor. The actors are thin: each owns state and calls the
// pure steps in stages/ and npu/.
package actors

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// Config configures a runtime.
type Config struct {
	// Recorders is the size of the prewarmed recorder pool (default 8). It
	// bounds how many bodies record at once, never which keys record.
	Recorders int
	// NoRetain drops every Definition after each pass, so each pass records,
	// builds and uploads again (upstream's behaviour, for comparison).
	NoRetain bool
	// SkipDevice stops each pass after the run image is copied.
	SkipDevice bool
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
	// Tracer makes the spans; nil traces nothing.
	Tracer *trace.Tracer
	// PassTimeout bounds one pass (default 10 minutes).
	PassTimeout time.Duration
	// StoreDir is the Definition store on disk (package diskstore) that
	// Definitions outlive the process in, shared by every process that
	// names it; "" or "off" keeps them in memory only. hbgrun's default is
	// diskstore.DefaultDir().
	StoreDir string
	// StoreMax bounds the store on disk in bytes (0: diskstore.DefaultMax).
	StoreMax int64
}

// Orchestration is a program of tasks: a Go function or a model config
// interpreted as one. Name is its identity, hashed into every full_key.
type Orchestration struct {
	Name    string
	Entry   []stages.Root
	Kernels []stages.Kernel
	Run     func(o stages.Orchestrator) error
}

// Counts describe one pass.
type Counts struct {
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
	Err         error
}

// Stats are the runtime's lifetime counters.
type Stats struct {
	Recorded      atomic.Int64
	RecordedNodes atomic.Int64
	Restarts      atomic.Int64
	MaxQueued     atomic.Int64
}

// Runtime is hbg running inside an actor system.
type Runtime struct {
	sys        *actor.ActorSystem
	cfg        Config
	tracer     *trace.Tracer
	supervisor *actor.PID
	store      *actor.PID
	Stats      Stats
	Mailboxes  mailbox.Registry
	// recorderHook injects faults in tests; imageHook tampers with a run
	// image before it is copied (the golden check's own test).
	recorderHook func(*mailbox.RecordJob)
	imageHook    func(*stages.RunImage)
}

// Start starts the runtime inside an existing actor system: the supervisor,
// the store, the builder and the prewarmed recorder pool. Ranks (submission,
// uploader, device) start on their first pass.
func Start(sys *actor.ActorSystem, cfg Config) (*Runtime, error) {
	return start(sys, cfg, nil)
}

func start(sys *actor.ActorSystem, cfg Config, hook func(*mailbox.RecordJob)) (*Runtime, error) {
	if cfg.Recorders == 0 {
		cfg.Recorders = 8
	}
	if cfg.Recorders < 0 {
		return nil, fmt.Errorf("recorder pool size %d: want at least 1", cfg.Recorders)
	}
	if cfg.PassTimeout == 0 {
		cfg.PassTimeout = 10 * time.Minute
	}
	rt := &Runtime{sys: sys, cfg: cfg, tracer: cfg.Tracer, recorderHook: hook}
	if rt.tracer == nil {
		rt.tracer = trace.NewTracer(nil)
	}
	// A crashed child is restarted in place, its mailbox intact; ten
	// crashes within a second mean something is wrong beyond one body.
	strategy := actor.NewOneForOneStrategy(10, time.Second, func(any) actor.Directive { return actor.RestartDirective })
	props := rt.Mailboxes.Props("supervisor", 0, func() actor.Actor { return &supervisor{rt: rt} }, actor.WithSupervisor(strategy))
	rt.supervisor = sys.Root.Spawn(props)
	f := sys.Root.RequestFuture(rt.supervisor, &spawnCore{}, 30*time.Second)
	if _, err := f.Result(); err != nil {
		return nil, fmt.Errorf("starting the runtime: %w", err)
	}
	return rt, nil
}

// Stop stops every actor of the runtime.
func (rt *Runtime) Stop() {
	_ = rt.sys.Root.StopFuture(rt.supervisor).Wait()
}

// Pass runs one pass of orch on a rank and waits for its result. Passes of
// different ranks may run concurrently; passes of one rank are serialized
// by its submission actor. parent is the rank's run span.
func (rt *Runtime) Pass(ctx context.Context, orch *Orchestration, rank, round int, parent trace.Carrier) (*PassResult, error) {
	sub, err := rt.rankActor(rank)
	if err != nil {
		return nil, err
	}
	timeout := rt.cfg.PassTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	res, err := rt.sys.Root.RequestFuture(sub, &startPass{orch: orch, round: round, run: parent}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("rank %d round %d: %w", rank, round, err)
	}
	pr := res.(*PassResult)
	return pr, pr.Err
}

func (rt *Runtime) rankActor(rank int) (*actor.PID, error) {
	res, err := rt.sys.Root.RequestFuture(rt.supervisor, &spawnRank{rank: rank}, 30*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("starting rank %d: %w", rank, err)
	}
	return res.(*actor.PID), nil
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
		rt.store = ctx.Spawn(rt.Mailboxes.Props("store", 0, func() actor.Actor { return newStore(&rt.Stats) }))
		b := ctx.Spawn(rt.Mailboxes.Props("builder", 0, func() actor.Actor { return &builder{store: rt.store, tracer: rt.tracer} }))
		recs := make([]*actor.PID, rt.cfg.Recorders)
		for i := range recs {
			name := fmt.Sprintf("recorder-%d", i)
			recs[i] = ctx.Spawn(rt.Mailboxes.Props(name, 4, func() actor.Actor {
				return newRecorder(name, rt.store, b, rt.tracer, &rt.Stats, rt.recorderHook)
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
		dev := ctx.Spawn(newDeviceProps(rt, m.rank))
		up := ctx.Spawn(rt.Mailboxes.Props(fmt.Sprintf("uploader-%d", m.rank), 0, func() actor.Actor {
			return &uploader{rank: m.rank, device: dev, tracer: rt.tracer}
		}))
		sub := ctx.Spawn(rt.Mailboxes.Props(fmt.Sprintf("submission-%d", m.rank), 0, func() actor.Actor {
			return &submission{rt: rt, rank: m.rank, uploader: up, device: dev}
		}))
		s.ranks[m.rank] = sub
		ctx.Respond(sub)
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
