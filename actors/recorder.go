package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// recorder runs Graph bodies on a private TensorMap (stages.Recorder). The
// pool is prewarmed: every recorder exists before the first Graph call, so
// no actor is spawned on the submitting path.
type recorder struct {
	name    string
	store   *actor.PID
	builder *actor.PID
	tracer  *trace.Tracer
	rec     stages.Recorder
	stats   *Stats
	// hook, when set (tests only: start's last argument), runs before each
	// recording, so a test can inject a fault into a recorder.
	hook func(job *mailbox.RecordJob)
}

// newRecorder makes a prewarmed recorder: its buffers are sized for an
// MoE-sized body (291 nodes) when it is spawned, inside Start, before the
// first Graph call, as upstream's prewarmed workers are. A restart makes a
// new one the same way.
func newRecorder(name string, store, builder *actor.PID, tracer *trace.Tracer, stats *Stats, hook func(*mailbox.RecordJob)) *recorder {
	r := &recorder{name: name, store: store, builder: builder, tracer: tracer, stats: stats, hook: hook}
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
	_, span := r.tracer.StartRecord(job.Trace.Context(context.Background()), trace.RecordInfo{
		Key: job.Key, FullKey: job.FullKey, BoundaryWidth: len(job.Boundary) + len(job.Scalars), Verify: job.Verify, Actor: r.name,
	})
	t0 := trace.Now()
	// A body that panics is reported with its key and cause, then the panic
	// goes on to the supervisor, which restarts this recorder; its mailbox,
	// and so every queued job, survives the restart.
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("graph %q: body panicked while recording: %v", job.Key, p)
			span.Finish(r.rec.Nodes(), err)
			ctx.Send(r.store, &mailbox.RecorderIdle{Recorder: ctx.Self()})
			ctx.Send(r.builder, &mailbox.Recorded{Job: job, Err: err, Panicked: true})
			panic(p)
		}
	}()
	if r.hook != nil {
		r.hook(job)
	}
	def, err := r.rec.Record(job.Key, job.FullKey, job.Boundary, job.Roots, job.Scalars, job.ExtDeps, job.Body)
	out := &mailbox.Recorded{Job: job, Def: def, Err: err, Nodes: r.rec.Nodes()}
	out.Defects = append(out.Defects, r.rec.Defects...)
	out.RecordNs = trace.Now() - t0
	out.Trace = span.Carrier()
	span.Finish(out.Nodes, err)
	// Idle goes first: once the builder has the recording, the pass can end
	// (built, uploaded, replayed) before this goroutine runs again, and a
	// late idle would land in a later, warm pass's message count.
	ctx.Send(r.store, &mailbox.RecorderIdle{Recorder: ctx.Self()})
	ctx.Send(r.builder, out)
}

// builder turns recorded Definitions into flat images with a content hash
// and publishes them to the store. A failed recording passes through with
// its error: nothing half-built is ever imaged, let alone uploaded.
type builder struct {
	store  *actor.PID
	tracer *trace.Tracer
}

func (b *builder) Receive(ctx actor.Context) {
	rec, ok := ctx.Message().(*mailbox.Recorded)
	if !ok {
		return
	}
	if rec.Err != nil {
		ctx.Send(b.store, &mailbox.Built{Recorded: rec})
		return
	}
	_, span := b.tracer.StartBuild(rec.Trace.Context(context.Background()), trace.BuildInfo{
		Key: rec.Job.Key, FullKey: rec.Job.FullKey, Nodes: rec.Nodes, Actor: "definition-builder",
	})
	t0 := trace.Now()
	img := stages.EncodeDefinition(rec.Def)
	built := &mailbox.Built{Recorded: rec, Image: img, Hash: rec.Def.ContentHash, BuildNs: trace.Now() - t0}
	span.Finish(int64(len(img)), nil)
	ctx.Send(b.store, built)
}
