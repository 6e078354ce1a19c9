// Package trace is hbg's observability: OpenTelemetry spans for each phase of
// each pass, per-operation totals inside host_orch, the phase table, the JSON
// report, a Chrome trace-event timeline and a progress bar.
//
// Nothing here is global. Setup returns a provider; the command passes it
// (or the *Tracer made from it) to whoever makes spans. A program that
// already has an OpenTelemetry TracerProvider skips Setup and calls
// NewTracer(itsProvider).
//
// # Set-up
//
//	p, shutdown, err := trace.Setup(ctx, trace.Config{Endpoint: otlpFlag, Timeline: traceOut != ""})
//	if err != nil { return err }
//	defer shutdown(context.WithoutCancel(ctx)) // flushes; bound it with a timeout
//	tr := p.Tracer()
//
// By default (no --otlp, no OTEL_EXPORTER_OTLP_*ENDPOINT in the environment,
// no Timeline) the provider is OpenTelemetry's no-op provider: nothing is
// recorded, nothing is exported, no connection is made. --otlp takes
// grpc://host:port (Jaeger's OTLP/gRPC port is 4317) or http://host:port
// (OTLP/HTTP, 4318; /v1/traces is appended). Spans are filed under service
// "hbgrun".
//
// # Spans
//
// The span tree of one `hbgrun run`, with the attributes of each span
// (constants Key*):
//
//	hbgrun                      hbg.model hbg.form hbg.rounds hbg.ranks    StartCommand
//	└─ hbg.run  (per rank)      hbg.model hbg.form hbg.rank hbg.rounds     StartRun
//	   ├─ args                  hbg.rank hbg.round hbg.cold                StartPhase, per pass
//	   ├─ host_orch             … + hbg.ops.<op>.count / .total_ns         (PhaseSpan.SetOps)
//	   │  ├─ record             hbg.graph.key hbg.graph.full_key           StartRecord, on a recorder
//	   │  │  │                  hbg.record.boundary_width hbg.record.nodes
//	   │  │  │                  hbg.record.verify [hbg.actor]
//	   │  │  └─ build_definition hbg.graph.key hbg.graph.full_key          StartBuild
//	   │  │                     hbg.record.nodes hbg.definition.bytes [hbg.actor]
//	   │  └─ upload             hbg.graph.key hbg.graph.full_key           StartUpload, per Definition
//	   │                        hbg.upload.bytes hbg.device.object_id [hbg.actor]
//	   ├─ graph_upload          hbg.rank hbg.round hbg.cold
//	   ├─ arena_h2d             hbg.rank hbg.round hbg.cold
//	   └─ device_wall           … + hbg.device.sim_ns                      PhaseSpan.FinishDevice
//
// Rounds are 0-based and round 0 is the cold pass (hbg.cold = true). A
// phase span's duration is real host time; device_wall's span covers the
// real wall of the simulation and its hbg.device.sim_ns attribute the
// simulated wall, which is what the phase table reports for device_wall.
// Phases may carry payload attributes (hbg.tasks, hbg.bytes,
// hbg.definitions) as upstream's segments do.
//
// There is never a span per task: per-task costs go to Ops.
//
// # Across actors
//
// protoactor messages carry no context.Context. A message that asks another
// actor for work that should show under the asking span carries a Carrier:
//
//	ctx, orch := tr.StartPhase(runCtx, trace.PhaseHostOrch, rank, round)
//	recorders.Tell(&RecordRequest{…, Trace: orch.Carrier()})      // one-way, no future
//
//	// on the recorder:
//	ctx, rs := tr.StartRecord(msg.Trace.Context(context.Background()), trace.RecordInfo{Key: k, …, Actor: "recorder-2"})
//	… record …
//	rs.Finish(nodes, err)
//	_, bs := tr.StartBuild(ctx, trace.BuildInfo{Key: k, …}) // the recorder builds what it recorded
//	… build …
//	bs.Finish(bytes, err)
//
// A recording is a child of the host_orch span of the pass that asked for
// it, its build a child of the recording, and an upload a child of that
// host_orch span too (the Definition comes back to the uploader with the
// request's Carrier). A span may end after its parent (a recording or an
// upload that outlives host_orch is fine).
//
// # Per-operation totals
//
// Ops counts operations inside host_orch (submit_task, alloc_tensors,
// record_node, graph_submit, build_definition) with their summed ns: two
// Now() readings and two adds, no allocation, no lock. Each actor owns one
// Ops, sends it by value at the end of a pass, and the pass's owner merges
// them into Pass.Ops (and onto the host_orch span with SetOps).
//
// # Phase table and report
//
// A Pass holds one rank's phase durations for one round (Set each phase with
// the ns that PhaseSpan.Finish returns, so the table and the trace agree)
// and the counters that explain them. Summarize is a pure function from
// passes to the Table: per phase min / median / max / n over the warm
// passes (every pass but the first of each rank), the cold passes apart,
// and the control plane (host_orch + graph_upload + arena_h2d) as the
// spread of per-pass sums, never a sum of per-phase minima. The median of an
// even count is the mean of the two middle values, truncated to whole ns.
// NewReport wraps the table into the Report, whose JSON field names are a
// contract (see Report); Report.WriteText prints the table the way
// upstream's hbg_bind_phases does, then the op totals, counts and the golden
// check line.
//
// # Timeline
//
// With Config.Timeline the provider also keeps every ended span as a Slice
// (Provider.Slices): host spans on a track per rank, recorder and uploader
// spans on a track per actor (hbg.actor). The device simulator hands over
// its own per-core slices (process "rank N device (simulated)", track per
// core, shifted onto the host's clock by the caller), and WriteChromeTrace
// writes them all as a trace-event JSON file that Perfetto
// (https://ui.perfetto.dev) and chrome://tracing open.
//
// # Concurrency
//
// Tracer, Provider, Progress and the span types are safe for concurrent
// use. Ops and Pass are plain data owned by one goroutine at a time.
package trace
