package actors

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

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
