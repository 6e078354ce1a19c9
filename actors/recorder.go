package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// recorder runs Graph bodies on a private TensorMap (stages.Recorder) and
// builds what it recorded: the image is written straight from the
// recorder's buffers (stages.Recorder.Publish), so a recording is never
// copied, the pool's recorders build in parallel, and the result goes to the
// store in one message. The pool is prewarmed: every recorder exists before
// the first Graph call, so no actor is spawned on the submitting path.
type recorder struct {
	name   string
	store  *actor.PID
	tracer *trace.Tracer
	rec    stages.Recorder
	stats  *Stats
	// hook, when set (tests only: start's last argument), runs before each
	// recording, so a test can inject a fault into a recorder.
	hook func(job *mailbox.RecordJob)
}

// newRecorder makes a prewarmed recorder: its buffers are sized for an
// MoE-sized body (291 nodes) when it is spawned, inside Start, before the
// first Graph call, as upstream's prewarmed workers are. A restart makes a
// new one the same way.
func newRecorder(name string, store *actor.PID, tracer *trace.Tracer, stats *Stats, hook func(*mailbox.RecordJob)) *recorder {
	r := &recorder{name: name, store: store, tracer: tracer, stats: stats, hook: hook}
	r.rec.Reserve(320)
	return r
}

func (r *recorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Restarting:
		r.stats.Restarts.Add(1)
	case *mailbox.RecordJob:
		r.record(ctx, m)
	}
}

func (r *recorder) record(ctx actor.Context, job *mailbox.RecordJob) {
	rctx, span := r.tracer.StartRecord(job.Trace.Context(context.Background()), trace.RecordInfo{
		Key: job.Key, FullKey: job.FullKey, BoundaryWidth: len(job.Boundary) + len(job.Scalars), Verify: job.Verify, Actor: r.name,
	})
	t0 := trace.Now()
	err, aborted := r.recordBody(job)
	if aborted != nil {
		// The job fails with its key and cause; then the panic goes to the
		// supervisor, which restarts this recorder (its half-used buffers
		// go with it); its mailbox, and so every queued job, survives the
		// restart.
		span.Finish(r.rec.Nodes(), aborted)
		ctx.Send(r.store, &mailbox.Built{Recorder: ctx.Self(), Job: job, Recording: stages.Recording{Err: aborted, Panicked: true}})
		panic(aborted)
	}
	out := &mailbox.Built{Recorder: ctx.Self(), Job: job, Recording: stages.Recording{Err: err, Nodes: r.rec.Nodes()}}
	out.Defects = append(out.Defects, r.rec.Defects...)
	out.RecordNs = trace.Now() - t0
	span.Finish(out.Nodes, err)
	if err == nil {
		// The build is the recording's child; nothing half-built is ever
		// imaged, let alone uploaded.
		_, bspan := r.tracer.StartBuild(rctx, trace.BuildInfo{
			Key: job.Key, FullKey: job.FullKey, Nodes: out.Nodes, Actor: r.name,
		})
		t1 := trace.Now()
		out.Def = r.rec.Publish()
		out.BuildNs = trace.Now() - t1
		bspan.Finish(int64(len(out.Def.Image)), nil)
	}
	ctx.Send(r.store, out)
}

// recordBody records job's body on a goroutine of its own and waits for
// it. The body is the caller's code: one that calls runtime.Goexit (as
// t.Fatal does) ends the goroutine it runs on, and run on the recorder's
// own it would end the mailbox's goroutine with it, which nothing restarts:
// the recorder and every job queued to it would be lost, and Stop would
// wait for it forever. aborted says why the body did not return (it wraps
// ErrBodyPanicked or ErrBodyExited), nil when it did.
func (r *recorder) recordBody(job *mailbox.RecordJob) (err, aborted error) {
	done := make(chan struct{})
	go func() {
		returned := false
		defer func() {
			if !returned {
				p := recover()
				if b, ok := p.(*stages.EdgeBoundError); ok {
					// Not the body's panic but the bound's: the
					// recording fails, the recorder is reset as after
					// a panic.
					aborted = b
				} else if p != nil {
					aborted = fmt.Errorf("graph %q: %w while recording: %w", job.Key, ErrBodyPanicked, panicError(p))
				} else {
					aborted = fmt.Errorf("graph %q: %w while recording", job.Key, ErrBodyExited)
				}
			}
			close(done)
		}()
		if r.hook != nil {
			r.hook(job)
		}
		r.rec.SetFullEdges(job.FullEdges)
		r.rec.SetMaxEdges(job.MaxEdges)
		r.rec.SetIdentity(job.Identity)
		err = r.rec.RecordBody(job.Key, job.FullKey, job.Boundary, job.Roots, job.Scalars, job.ExtDeps, job.Body)
		returned = true
	}()
	<-done
	return err, aborted
}
