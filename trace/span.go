package trace

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span names. Phase spans are named by Phase.String (args, host_orch,
// graph_upload, arena_h2d, device_wall).
const (
	// SpanCommand is the root of one hbgrun invocation; the per-rank runs
	// are its children, so a whole invocation is one trace.
	SpanCommand = "hbgrun"
	// SpanRun is one rank's run: its phases, every pass, are its children.
	SpanRun = "hbg.run"
	// SpanRecord is one recording of a graph key on a recorder.
	SpanRecord = "record"
	// SpanBuild is building one Definition's flat image.
	SpanBuild = "build_definition"
	// SpanUpload is uploading one Definition to a device.
	SpanUpload = "upload"
	// SpanStoreLoad is loading and verifying one Definition from the store
	// on disk, in place of its recording (a child of host_orch).
	SpanStoreLoad = "store_load"
	// SpanPeerFetch is asking the cluster for one Definition the store
	// misses (package peer), in place of its recording or before it (a
	// child of host_orch); SpanPeerServe is a node answering such a request
	// (a child of the asker's peer_fetch, in another process).
	SpanPeerFetch = "peer_fetch"
	SpanPeerServe = "peer_serve"
	// SpanPreload is loading an orchestration's Definitions from the store
	// on disk before its first pass (Runtime.Preload): its store_load spans
	// are its children.
	SpanPreload = "preload"
	// SpanGoldenReference is a pass's wait for its orchestration's golden
	// reference (the inline twin and the eager form, run on devices of
	// their own once per orchestration) before the first pass is sent: a
	// child of the run, on the rank's track.
	SpanGoldenReference = "golden_reference"
	// SpanLoadModel is reading, parsing and compiling the model file
	// before the run (a child of the command).
	SpanLoadModel = "load_model"
)

// Attribute keys. They are a contract: the Jaeger end-to-end test and any
// dashboard query them by name.
const (
	KeyModel  = attribute.Key("hbg.model")  // string: model name
	KeyForm   = attribute.Key("hbg.form")   // string: form name (eager, pair, blocks, full…)
	KeyRounds = attribute.Key("hbg.rounds") // int: rounds in the run
	KeyRanks  = attribute.Key("hbg.ranks")  // int: ranks in the run
	KeyRank   = attribute.Key("hbg.rank")   // int
	KeyRound  = attribute.Key("hbg.round")  // int, 0-based
	KeyCold   = attribute.Key("hbg.cold")   // bool: first pass of the rank

	// KeyDeviceSimNs is the simulated device wall on a device_wall span,
	// whose own duration is the real wall of the simulation.
	KeyDeviceSimNs = attribute.Key("hbg.device.sim_ns")
	// KeyDurationClock says on a device_wall span which clock its own
	// duration is on (DurationHostWall): a viewer shows the span's length
	// and nothing else, and the simulation's real time (tens of ms) was
	// read as the device's simulated wall.
	KeyDurationClock = attribute.Key("hbg.duration_clock")

	KeyGraphKey      = attribute.Key("hbg.graph.key")             // string: the graph key
	KeyFullKey       = attribute.Key("hbg.graph.full_key")        // string: full_key, 16 hex digits
	KeyNodes         = attribute.Key("hbg.record.nodes")          // int: nodes recorded (record) or built (build_definition)
	KeyBoundaryWidth = attribute.Key("hbg.record.boundary_width") // int: boundary tensors + scalars
	KeyVerify        = attribute.Key("hbg.record.verify")         // bool: a re-recording that checks a kept Definition
	KeyImageBytes    = attribute.Key("hbg.definition.bytes")      // int: built image bytes
	KeyUploadBytes   = attribute.Key("hbg.upload.bytes")          // int: bytes copied to the device
	KeyObjectID      = attribute.Key("hbg.device.object_id")      // int: the device object the upload made
	KeyActor         = attribute.Key("hbg.actor")                 // string: the actor that did the work (its timeline track)
	KeyPeer          = attribute.Key("hbg.peer")                  // string: the node asked (peer_fetch) or asking (peer_serve), host:port
	KeyPeerOutcome   = attribute.Key("hbg.peer.outcome")          // string: image, record, wait or fallback (peer package)

	// Optional phase payloads, upstream's segment attributes.
	KeyTasks       = attribute.Key("hbg.tasks")       // int: tasks submitted (host_orch) or run (device_wall)
	KeyBytes       = attribute.Key("hbg.bytes")       // int: bytes moved by the phase (graph_upload, arena_h2d)
	KeyDefinitions = attribute.Key("hbg.definitions") // int: Definitions uploaded (graph_upload)
)

// opKeys are the host_orch span's per-operation attributes,
// hbg.ops.<op>.count and hbg.ops.<op>.total_ns, built once.
var opKeys = func() (k [NumOps][2]attribute.Key) {
	for op := Op(0); op < NumOps; op++ {
		k[op][0] = attribute.Key("hbg.ops." + op.String() + ".count")
		k[op][1] = attribute.Key("hbg.ops." + op.String() + ".total_ns")
	}
	return k
}()

// Tracer makes hbg's spans. It is safe for concurrent use. A nil *Tracer
// is not usable: NewTracer(nil) gives a no-op one.
type Tracer struct {
	t oteltrace.Tracer
	// noop: spans are recorded nowhere, so a phase keeps only its clock
	// readings (a no-op span still costs ~1 µs and 7 allocations).
	noop bool
}

// noSpan is the span of a phase on a no-op tracer.
var noSpan oteltrace.Span = noop.Span{}

// instrumentationName names hbg's tracer (the OTel "scope").
const instrumentationName = "github.com/hbg-dev/hbg/trace"

// NewTracer wraps a tracer provider: the one Setup made, or one a host
// program already has. A nil provider gives a no-op tracer.
func NewTracer(tp oteltrace.TracerProvider) *Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	_, isNoop := tp.(noop.TracerProvider)
	return &Tracer{t: tp.Tracer(instrumentationName), noop: isNoop}
}

// Span is a started span. It is a small value: copy it, send its Carrier
// to other actors, end it once (later Ends are ignored, so `defer s.End()`
// after a Finish is safe).
type Span struct {
	s oteltrace.Span
}

// End ends the span now.
func (s Span) End() { s.s.End() }

// Fail marks the span failed with err (recorded as an exception event).
// It does not end the span. A nil err does nothing.
func (s Span) Fail(err error) {
	if err == nil {
		return
	}
	s.s.RecordError(err)
	s.s.SetStatus(codes.Error, err.Error())
}

// SetAttributes adds attributes, e.g. a phase's payload (KeyTasks, KeyBytes).
func (s Span) SetAttributes(kv ...attribute.KeyValue) { s.s.SetAttributes(kv...) }

// Carrier is the span's context, to put in a message for another actor.
func (s Span) Carrier() Carrier { return Carrier{sc: s.s.SpanContext()} }

// TraceID is the span's trace id as 32 hex digits (what Jaeger's search
// takes), or "" when the span is not recorded (the no-op provider).
func (s Span) TraceID() string {
	sc := s.s.SpanContext()
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// OTel is the underlying OpenTelemetry span.
func (s Span) OTel() oteltrace.Span { return s.s }

// RunInfo names a run.
type RunInfo struct {
	Model  string
	Form   string
	Rounds int
	Ranks  int
}

// StartCommand starts the root span of an hbgrun invocation (SpanCommand,
// with model, form, rounds and ranks). Start each rank's run under the
// returned context.
func (t *Tracer) StartCommand(ctx context.Context, info RunInfo) (context.Context, Span) {
	return t.StartCommandAt(ctx, info, time.Now())
}

// StartCommandAt is StartCommand for a command that began at start, before
// its tracer was made (its model loaded first: LoadedModel).
func (t *Tracer) StartCommandAt(ctx context.Context, info RunInfo, start time.Time) (context.Context, Span) {
	ctx, s := t.t.Start(ctx, SpanCommand, oteltrace.WithTimestamp(start), oteltrace.WithAttributes(
		KeyModel.String(info.Model), KeyForm.String(info.Form),
		KeyRounds.Int(info.Rounds), KeyRanks.Int(info.Ranks),
	))
	return ctx, Span{s}
}

// LoadedModel records, as a child of the span in ctx, the reading and
// compiling of the model (SpanLoadModel) from start to end: it happens
// before the tracer exists, and without it a trace starts with a blank
// stretch as long as it took.
func (t *Tracer) LoadedModel(ctx context.Context, model string, start, end time.Time) {
	_, s := t.t.Start(ctx, SpanLoadModel, oteltrace.WithTimestamp(start), oteltrace.WithAttributes(KeyModel.String(model)))
	s.End(oteltrace.WithTimestamp(end))
}

// StartPreload starts a preload (SpanPreload, with model and form) as a
// child of the span in ctx.
func (t *Tracer) StartPreload(ctx context.Context, info RunInfo) (context.Context, Span) {
	ctx, s := t.t.Start(ctx, SpanPreload, oteltrace.WithAttributes(
		KeyModel.String(info.Model), KeyForm.String(info.Form),
	))
	return ctx, Span{s}
}

// StartRun starts one rank's run (SpanRun, with model, form and rank).
// Every phase span of every pass of the rank is its child.
func (t *Tracer) StartRun(ctx context.Context, info RunInfo, rank int) (context.Context, Span) {
	ctx, s := t.t.Start(ctx, SpanRun, oteltrace.WithAttributes(
		KeyModel.String(info.Model), KeyForm.String(info.Form),
		KeyRank.Int(rank), KeyRounds.Int(info.Rounds),
	))
	return ctx, Span{s}
}

// StartGoldenReference starts the wait of pass (rank, round) for the
// golden reference of form (SpanGoldenReference) as a child of the span in
// ctx.
func (t *Tracer) StartGoldenReference(ctx context.Context, form string, rank, round int) Span {
	_, s := t.t.Start(ctx, SpanGoldenReference, oteltrace.WithAttributes(
		KeyForm.String(form), KeyRank.Int(rank), KeyRound.Int(round),
	))
	return Span{s}
}

// PhaseSpan is a running phase. Finish ends it and returns its duration,
// taken from the same two clock readings as the span's own timestamps, so
// the Pass and the trace agree to the ns.
type PhaseSpan struct {
	Span
	start time.Time
	noop  bool // on a no-op tracer: nothing to end
}

// StartPhase starts phase ph of pass (rank, round) as a child of the span in
// ctx, which should be the rank's run. Attributes: rank, round, cold
// (round 0, as NewPass).
func (t *Tracer) StartPhase(ctx context.Context, ph Phase, rank, round int) (context.Context, PhaseSpan) {
	start := time.Now()
	if t.noop {
		// A no-op span carries its parent's span context: ctx already does.
		return ctx, PhaseSpan{Span: Span{noSpan}, start: start, noop: true}
	}
	ctx, s := t.t.Start(ctx, ph.String(),
		oteltrace.WithTimestamp(start),
		oteltrace.WithAttributes(KeyRank.Int(rank), KeyRound.Int(round), KeyCold.Bool(round == 0)),
	)
	return ctx, PhaseSpan{Span: Span{s}, start: start}
}

// StartNs is when the phase started on the Now timeline: the offset that
// places the simulated device's slices under their device_wall span in a
// Chrome trace.
func (s PhaseSpan) StartNs() int64 { return sinceEpoch(s.start) }

// Finish ends the phase and returns its duration in ns, for Pass.Set.
func (s PhaseSpan) Finish() int64 {
	d := time.Since(s.start) // monotonic
	if s.noop {
		return int64(d)
	}
	// The end is start+d rather than a second wall reading, so the exported
	// duration is exactly the figure returned.
	s.s.End(oteltrace.WithTimestamp(s.start.Add(d)))
	return int64(d)
}

// DurationHostWall is KeyDurationClock's value on a device_wall span.
const DurationHostWall = "host wall time of the simulation; the simulated device wall is hbg.device.sim_ns"

// FinishDevice ends a device_wall phase: the span covers the real wall of
// the simulation and carries the simulated wall as KeyDeviceSimNs. It
// returns simNs, which is what Pass.Phases[PhaseDeviceWall] holds; the real
// wall is returned second, for Pass.SimulationNs.
func (s PhaseSpan) FinishDevice(simNs int64) (sim, wall int64) {
	s.s.SetAttributes(KeyDeviceSimNs.Int64(simNs), KeyDurationClock.String(DurationHostWall))
	return simNs, s.Finish()
}

// SetBytes puts the bytes the phase moved on its span (KeyBytes).
func (s PhaseSpan) SetBytes(n int) {
	if !s.noop {
		s.s.SetAttributes(KeyBytes.Int(n))
	}
}

// SetOps puts per-operation totals on the span (hbg.ops.<op>.count and
// hbg.ops.<op>.total_ns), for host_orch. Operations with count 0 are left
// out.
func (s PhaseSpan) SetOps(o *Ops) {
	if s.noop {
		return
	}
	var kv [2 * NumOps]attribute.KeyValue
	n := 0
	for op := Op(0); op < NumOps; op++ {
		if o[op].Count == 0 {
			continue
		}
		kv[n] = opKeys[op][0].Int64(o[op].Count)
		kv[n+1] = opKeys[op][1].Int64(o[op].TotalNs)
		n += 2
	}
	s.s.SetAttributes(kv[:n]...)
}

// RecordInfo describes a recording.
type RecordInfo struct {
	Key     string
	FullKey uint64
	// BoundaryWidth is the boundary's tensors plus scalars.
	BoundaryWidth int
	// Verify marks a re-recording of a key that already has a Definition,
	// made with a later call's values to catch a body that bakes a value it
	// should patch. It makes no new Definition, so the report's
	// recorded_definitions and recorded_nodes leave it out.
	Verify bool
	// Actor names the recorder (its timeline track), e.g. "recorder-3".
	Actor string
}

// RecordSpan is a running recording.
type RecordSpan struct{ Span }

// StartRecord starts a recording (SpanRecord). ctx should carry the
// host_orch phase span of the pass that asked for it (Carrier.Context on
// the recorder), so the recording shows under that pass.
func (t *Tracer) StartRecord(ctx context.Context, info RecordInfo) (context.Context, RecordSpan) {
	ctx, s := t.t.Start(ctx, SpanRecord, oteltrace.WithAttributes(
		KeyGraphKey.String(info.Key), KeyFullKey.String(hex16(info.FullKey)),
		KeyBoundaryWidth.Int(info.BoundaryWidth), KeyVerify.Bool(info.Verify),
	), actorAttr(info.Actor))
	return ctx, RecordSpan{Span{s}}
}

// Finish ends the recording with the number of nodes it recorded. A non-nil
// err marks it failed.
func (s RecordSpan) Finish(nodes int, err error) {
	s.s.SetAttributes(KeyNodes.Int(nodes))
	s.Fail(err)
	s.s.End()
}

// BuildInfo describes a Definition build.
type BuildInfo struct {
	Key     string
	FullKey uint64
	Nodes   int
	Actor   string
}

// BuildSpan is a running Definition build.
type BuildSpan struct{ Span }

// StartBuild starts building a Definition (SpanBuild). ctx should carry the
// recording's span: the build is its child.
func (t *Tracer) StartBuild(ctx context.Context, info BuildInfo) (context.Context, BuildSpan) {
	ctx, s := t.t.Start(ctx, SpanBuild, oteltrace.WithAttributes(
		KeyGraphKey.String(info.Key), KeyFullKey.String(hex16(info.FullKey)),
		KeyNodes.Int(info.Nodes),
	), actorAttr(info.Actor))
	return ctx, BuildSpan{Span{s}}
}

// Finish ends the build with the image's size. A non-nil err marks it
// failed (and no image should be uploaded).
func (s BuildSpan) Finish(imageBytes int64, err error) {
	s.s.SetAttributes(KeyImageBytes.Int64(imageBytes))
	s.Fail(err)
	s.s.End()
}

// UploadInfo describes an upload of a Definition.
type UploadInfo struct {
	Key     string
	FullKey uint64
	Bytes   int64
	Actor   string
}

// UploadSpan is a running upload.
type UploadSpan struct{ Span }

// StartUpload starts an upload (SpanUpload). ctx should carry the
// host_orch phase span of the Graph call that asked for the Definition
// (the record request's Carrier, which the Definition comes back with): an
// upload starts as soon as its Definition is built, while the orchestration
// may still run, so it is host_orch's child even when it ends in
// graph_upload.
func (t *Tracer) StartUpload(ctx context.Context, info UploadInfo) (context.Context, UploadSpan) {
	ctx, s := t.t.Start(ctx, SpanUpload, oteltrace.WithAttributes(
		KeyGraphKey.String(info.Key), KeyFullKey.String(hex16(info.FullKey)),
		KeyUploadBytes.Int64(info.Bytes),
	), actorAttr(info.Actor))
	return ctx, UploadSpan{Span{s}}
}

// Finish ends the upload with the device object it made.
func (s UploadSpan) Finish(objectID uint64, err error) {
	s.s.SetAttributes(KeyObjectID.Int64(int64(objectID)))
	s.Fail(err)
	s.s.End()
}

// StoreLoadInfo describes a load from the store on disk.
type StoreLoadInfo struct {
	Key     string
	FullKey uint64
	Actor   string
}

// StoreLoadSpan is a running load.
type StoreLoadSpan struct{ Span }

// StartStoreLoad starts a load (SpanStoreLoad). ctx should carry the
// host_orch phase span of the pass that asked for the Definition.
func (t *Tracer) StartStoreLoad(ctx context.Context, info StoreLoadInfo) (context.Context, StoreLoadSpan) {
	ctx, s := t.t.Start(ctx, SpanStoreLoad, oteltrace.WithAttributes(
		KeyGraphKey.String(info.Key), KeyFullKey.String(hex16(info.FullKey)),
	), actorAttr(info.Actor))
	return ctx, StoreLoadSpan{Span{s}}
}

// Finish ends the load with the image's size (0 on a miss). A non-nil err
// marks it failed: what was on disk was rejected.
func (s StoreLoadSpan) Finish(imageBytes int64, err error) {
	s.s.SetAttributes(KeyImageBytes.Int64(imageBytes))
	s.Fail(err)
	s.s.End()
}

// PeerFetchInfo describes a request to the cluster for a Definition.
type PeerFetchInfo struct {
	Key     string
	FullKey uint64
	Actor   string
}

// PeerFetchSpan is a running request to the cluster.
type PeerFetchSpan struct{ Span }

// StartPeerFetch starts a request to the cluster (SpanPeerFetch). ctx
// should carry the host_orch phase span of the pass that asked for the
// Definition.
func (t *Tracer) StartPeerFetch(ctx context.Context, info PeerFetchInfo) (context.Context, PeerFetchSpan) {
	ctx, s := t.t.Start(ctx, SpanPeerFetch, oteltrace.WithAttributes(
		KeyGraphKey.String(info.Key), KeyFullKey.String(hex16(info.FullKey)),
	), actorAttr(info.Actor))
	return ctx, PeerFetchSpan{Span{s}}
}

// Finish ends the request: the node that answered, how (KeyPeerOutcome)
// and the image's size (0 when the answer was to record it). A non-nil err
// marks it failed: the image was rejected, or no answer came.
func (s PeerFetchSpan) Finish(peer, outcome string, imageBytes int64, err error) {
	s.s.SetAttributes(KeyPeer.String(peer), KeyPeerOutcome.String(outcome), KeyImageBytes.Int64(imageBytes))
	s.Fail(err)
	s.s.End()
}

// StartPeerServe starts a node's answer to another node's request
// (SpanPeerServe); ctx carries the asker's peer_fetch span, propagated
// across the wire.
func (t *Tracer) StartPeerServe(ctx context.Context, info PeerFetchInfo, asker string) (context.Context, Span) {
	ctx, s := t.t.Start(ctx, SpanPeerServe, oteltrace.WithAttributes(
		KeyGraphKey.String(info.Key), KeyFullKey.String(hex16(info.FullKey)), KeyPeer.String(asker),
	), actorAttr(info.Actor))
	return ctx, Span{s}
}

// actorAttr adds KeyActor when the caller named its actor.
func actorAttr(actor string) oteltrace.SpanStartOption {
	if actor == "" {
		return oteltrace.WithAttributes()
	}
	return oteltrace.WithAttributes(KeyActor.String(actor))
}

func hex16(v uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}
