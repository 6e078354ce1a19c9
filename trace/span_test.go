package trace

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// recorded sets up a provider that keeps every ended span in memory.
func recorded(t *testing.T, timeline bool) (*Provider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	p, shutdown, err := Setup(context.Background(), Config{Exporter: exp, Sync: true, Timeline: timeline})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, shutdown(context.Background())) })
	return p, exp
}

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]any {
	m := make(map[attribute.Key]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.AsInterface()
	}
	return m
}

// runShape drives the tracer the way hbgrun's actors do: a command, a run
// per rank, each pass's phases, recordings on "recorder" goroutines reached
// by message with a Carrier, builds and uploads. It returns the passes.
func runShape(t *testing.T, tr *Tracer, ranks, rounds int) []Pass {
	t.Helper()
	info := RunInfo{Model: "dsv4_flash_decode", Form: "blocks", Rounds: rounds, Ranks: ranks}
	ctx, cmd := tr.StartCommand(context.Background(), info)
	defer cmd.End()

	type recordRequest struct {
		key   string
		trace Carrier
		done  chan Carrier // the recording's carrier, for the build
	}
	requests := make(chan recordRequest)
	var wg sync.WaitGroup
	wg.Go(func() { // the recorder actor
		for req := range requests {
			_, rs := tr.StartRecord(req.trace.Context(context.Background()), RecordInfo{Key: req.key, FullKey: 0xabc, BoundaryWidth: 12, Actor: "recorder-1"})
			rs.Finish(100, nil)
			req.done <- rs.Carrier()
		}
	})

	var passes []Pass
	for rank := range ranks {
		rctx, run := tr.StartRun(ctx, info, rank)
		for round := range rounds {
			p := NewPass(rank, round)
			_, ph := tr.StartPhase(rctx, PhaseArgs, rank, round)
			p.Set(PhaseArgs, ph.Finish())

			_, orch := tr.StartPhase(rctx, PhaseHostOrch, rank, round)
			var ops Ops
			var built []Carrier
			if p.Cold {
				for _, key := range []string{"attn", "moe"} {
					req := recordRequest{key: key, trace: orch.Carrier(), done: make(chan Carrier, 1)}
					requests <- req
					rc := <-req.done
					_, bs := tr.StartBuild(rc.Context(context.Background()), BuildInfo{Key: key, FullKey: 0xabc, Nodes: 100, Actor: "builder"})
					bs.Finish(4096, nil)
					built = append(built, rc)
					p.RecordedNodes += 100
					p.BuiltDefinitions++
				}
			}
			ops.Add(OpSubmitTask, 10, 1000)
			orch.SetOps(&ops)
			p.Ops = ops
			p.Set(PhaseHostOrch, orch.Finish())

			// An upload carries the host_orch span of the Graph call that
			// asked, as the record request did (the uploader gets it with
			// the Definition), wherever the upload falls in time.
			_, up := tr.StartPhase(rctx, PhaseGraphUpload, rank, round)
			for i := range built {
				_, us := tr.StartUpload(orch.Carrier().Context(context.Background()), UploadInfo{Key: "k", FullKey: 0xabc, Bytes: 4096, Actor: "uploader"})
				us.Finish(uint64(100+i), nil)
				p.UploadedDefinitionBytes += 4096
			}
			p.Set(PhaseGraphUpload, up.Finish())

			_, h2d := tr.StartPhase(rctx, PhaseArenaH2D, rank, round)
			p.Set(PhaseArenaH2D, h2d.Finish())

			_, dev := tr.StartPhase(rctx, PhaseDeviceWall, rank, round)
			sim, wall := dev.FinishDevice(123_456)
			p.Set(PhaseDeviceWall, sim)
			p.SimulationNs = wall
			passes = append(passes, p)
		}
		run.End()
	}
	close(requests)
	wg.Wait()
	return passes
}

func TestSpanTree(t *testing.T) {
	p, exp := recorded(t, false)
	const ranks, rounds = 2, 3
	passes := runShape(t, p.Tracer(), ranks, rounds)
	spans := exp.GetSpans()

	byID := map[oteltrace.SpanID]tracetest.SpanStub{}
	count := map[string]int{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		count[s.Name]++
	}
	parent := func(s tracetest.SpanStub) tracetest.SpanStub {
		par, ok := byID[s.Parent.SpanID()]
		require.True(t, ok, "parent of %s not recorded", s.Name)
		return par
	}
	assert.Equal(t, map[string]int{
		SpanCommand: 1, SpanRun: ranks,
		"args": ranks * rounds, "host_orch": ranks * rounds, "graph_upload": ranks * rounds, "arena_h2d": ranks * rounds, "device_wall": ranks * rounds,
		SpanRecord: 2 * ranks, SpanBuild: 2 * ranks, SpanUpload: 2 * ranks,
	}, count)

	traceID := spans[0].SpanContext.TraceID()
	for _, s := range spans {
		assert.Equal(t, traceID, s.SpanContext.TraceID(), "one invocation is one trace")
		a := attrMap(s.Attributes)
		switch s.Name {
		case SpanCommand:
			assert.False(t, s.Parent.IsValid())
			assert.Equal(t, map[attribute.Key]any{KeyModel: "dsv4_flash_decode", KeyForm: "blocks", KeyRounds: int64(rounds), KeyRanks: int64(ranks)}, a)
		case SpanRun:
			assert.Equal(t, SpanCommand, parent(s).Name)
			assert.Equal(t, "blocks", a[KeyForm])
			assert.Contains(t, a, KeyRank)
		case "args", "host_orch", "graph_upload", "arena_h2d", "device_wall":
			run := parent(s)
			assert.Equal(t, SpanRun, run.Name)
			assert.Equal(t, attrMap(run.Attributes)[KeyRank], a[KeyRank])
			assert.Equal(t, a[KeyRound] == int64(0), a[KeyCold])
			ph, err := ParsePhase(s.Name)
			require.NoError(t, err)
			pass := passes[int(a[KeyRank].(int64))*rounds+int(a[KeyRound].(int64))]
			if ph == PhaseDeviceWall {
				assert.Equal(t, int64(123_456), a[KeyDeviceSimNs])
				assert.Equal(t, DurationHostWall, a[KeyDurationClock], "the span says its length is the host's wall")
				assert.Equal(t, pass.SimulationNs, int64(s.EndTime.Sub(s.StartTime)), "the span covers the simulation's real wall")
			} else {
				assert.Equal(t, pass.Phases[ph], int64(s.EndTime.Sub(s.StartTime)), "the pass and the span agree to the ns")
			}
			if ph == PhaseHostOrch {
				assert.Equal(t, int64(10), a["hbg.ops.submit_task.count"])
				assert.Equal(t, int64(1000), a["hbg.ops.submit_task.total_ns"])
				assert.NotContains(t, a, attribute.Key("hbg.ops.record_node.count"), "ops with no count are left out")
			}
		case SpanRecord:
			orch := parent(s)
			assert.Equal(t, "host_orch", orch.Name)
			assert.Equal(t, true, attrMap(orch.Attributes)[KeyCold], "recordings happen in the cold pass")
			assert.Equal(t, int64(100), a[KeyNodes])
			assert.Equal(t, int64(12), a[KeyBoundaryWidth])
			assert.Equal(t, "0000000000000abc", a[KeyFullKey])
			assert.Equal(t, "recorder-1", a[KeyActor])
			assert.Equal(t, false, a[KeyVerify])
			assert.Contains(t, []any{"attn", "moe"}, a[KeyGraphKey])
		case SpanBuild:
			rec := parent(s)
			assert.Equal(t, SpanRecord, rec.Name)
			assert.Equal(t, attrMap(rec.Attributes)[KeyGraphKey], a[KeyGraphKey])
			assert.Equal(t, int64(4096), a[KeyImageBytes])
			assert.Equal(t, int64(100), a[KeyNodes])
		case SpanUpload:
			assert.Equal(t, "host_orch", parent(s).Name)
			assert.Equal(t, int64(4096), a[KeyUploadBytes])
			assert.Contains(t, []any{int64(100), int64(101)}, a[KeyObjectID])
		default:
			t.Errorf("unexpected span %q", s.Name)
		}
		assert.Equal(t, codes.Unset, s.Status.Code, s.Name)
	}
	res := attrMap(spans[0].Resource.Attributes())
	assert.Equal(t, "hbgrun", res["service.name"])
}

func TestFinishMarksFailure(t *testing.T) {
	p, exp := recorded(t, false)
	tr := p.Tracer()
	_, rs := tr.StartRecord(context.Background(), RecordInfo{Key: "k"})
	rs.Finish(3, errors.New("body panicked: index out of range"))
	rs.End() // a second End is ignored
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	assert.Equal(t, codes.Error, spans[0].Status.Code)
	assert.Equal(t, "body panicked: index out of range", spans[0].Status.Description)
	require.Len(t, spans[0].Events, 1)
	assert.Equal(t, "exception", spans[0].Events[0].Name)
	assert.NotContains(t, attrMap(spans[0].Attributes), KeyActor, "no actor named, no attribute")
}

func TestCarrier(t *testing.T) {
	p, exp := recorded(t, false)
	tr := p.Tracer()
	ctx, run := tr.StartRun(context.Background(), RunInfo{}, 0)
	c := Inject(ctx)
	require.True(t, c.IsValid())
	assert.Equal(t, run.Carrier(), c)
	assert.Regexp(t, `^[0-9a-f]{32}$`, run.TraceID())

	// Text round trip (for messages that leave the process).
	text, err := json.Marshal(struct{ Trace Carrier }{c})
	require.NoError(t, err)
	assert.Regexp(t, `^\{"Trace":"00-[0-9a-f]{32}-[0-9a-f]{16}-01"\}$`, string(text))
	var back struct{ Trace Carrier }
	require.NoError(t, json.Unmarshal(text, &back))
	assert.Equal(t, c.SpanContext().TraceID(), back.Trace.SpanContext().TraceID())
	assert.Equal(t, c.SpanContext().SpanID(), back.Trace.SpanContext().SpanID())
	assert.True(t, back.Trace.SpanContext().IsRemote())

	_, child := tr.StartPhase(back.Trace.Context(context.Background()), PhaseArgs, 0, 0)
	child.Finish()
	run.End()
	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	assert.Equal(t, spans[1].SpanContext.SpanID(), spans[0].Parent.SpanID())

	// The zero Carrier carries nothing and leaves a context alone.
	var zero Carrier
	assert.False(t, zero.IsValid())
	assert.Equal(t, "", zero.String())
	bg := context.Background()
	assert.Equal(t, bg, zero.Context(bg))
	require.NoError(t, zero.UnmarshalText(nil))
	assert.Error(t, zero.UnmarshalText([]byte("not-a-traceparent")))
}

func TestNoopTracer(t *testing.T) {
	for name, tr := range map[string]*Tracer{"nil provider": NewTracer(nil), "noop provider": NewTracer(noop.NewTracerProvider())} {
		t.Run(name, func(t *testing.T) {
			ctx, cmd := tr.StartCommand(context.Background(), RunInfo{})
			_, ph := tr.StartPhase(ctx, PhaseHostOrch, 0, 0)
			ph.SetOps(&Ops{})
			assert.GreaterOrEqual(t, ph.Finish(), int64(0), "phases are timed even when not traced")
			assert.False(t, cmd.Carrier().IsValid())
			assert.Equal(t, "", cmd.TraceID())
			cmd.End()
		})
	}
}

// BenchmarkPhaseSpan is one phase span on the default (no-op) tracer: what
// a pass pays per phase when nothing is exported.
func BenchmarkPhaseSpan(b *testing.B) {
	tr := NewTracer(nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, s := tr.StartPhase(ctx, PhaseHostOrch, 0, 1)
		s.Finish()
	}
}
