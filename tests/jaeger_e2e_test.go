package tests

// TestJaegerEndToEnd runs hbgrun against a real Jaeger and reads the run
// back from Jaeger's query API.
//
// What it expects of hbgrun (the span names and attributes are trace/'s
// constants; see trace/doc.go for the tree):
//
//   - `hbgrun run config/models/dsv4_flash_decode.yaml --form blocks
//     --rounds 2 --ranks 2 --otlp ENDPOINT --json` exits 0 and prints a
//     trace.Report as JSON on stdout;
//   - one trace per invocation: a root `hbgrun` span (model, form, rounds,
//     ranks), one `hbg.run` child per rank (model, form, rank);
//   - per pass listed in the report, one span per measured phase (args,
//     host_orch, graph_upload, arena_h2d, device_wall) child of its rank's
//     hbg.run, with hbg.rank, hbg.round, hbg.cold; its duration is the
//     pass's figure (device_wall: hbg.device.sim_ns is the figure and the
//     duration is simulation_ns);
//   - one `record` span per recorded Definition (counts.recorded_definitions),
//     child of the host_orch span of the pass that asked for it, with
//     hbg.graph.key, hbg.graph.full_key, hbg.record.boundary_width,
//     hbg.record.nodes (summing to the pass's recorded_nodes) and
//     hbg.record.verify=false; only cold passes record (Definitions are kept
//     across rounds); verification re-recordings (hbg.record.verify=true)
//     are extra record spans, under host_orch too, of a key that also has a
//     recording;
//   - one `build_definition` child per record span (same key, same nodes,
//     hbg.definition.bytes > 0);
//   - `upload` spans, children of their pass's graph_upload span (or of its
//     host_orch, for a Definition uploaded as soon as it was built), with
//     hbg.graph.key, hbg.upload.bytes (summing to the pass's
//     uploaded_definition_bytes) and hbg.device.object_id; every recorded
//     key is uploaded;
//   - no span marked as an error; service name hbgrun.
//
// It runs twice, over OTLP/HTTP and OTLP/gRPC. It needs the Go module proxy
// the first time (to build Jaeger, minutes) and loopback ports only.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/trace"
)

// The run the test traces.
var jaegerRunArgs = []string{
	"run", "config/models/dsv4_flash_decode.yaml",
	"--form", "blocks", "--rounds", "2", "--ranks", "2", "--json",
}

func TestJaegerEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a real Jaeger and runs hbgrun against it; skipped in -short")
	}
	jaeger := jaegerStart(t, jaegerBinary(t))

	// First trace/ alone, in this process, with the span shape hbgrun's
	// actors make: if this fails, the fault is in trace/ or in this test,
	// not in hbgrun.
	t.Run("trace-package", func(t *testing.T) {
		tag := fmt.Sprintf("inproc-%d", time.Now().UnixNano())
		since := time.Now().Add(-time.Minute)
		rep := jaegerInProcessRun(t, jaeger.OTLPHTTP(), tag)
		trs := jaeger.waitTraces(t, tag, since, jaegerExpect(rep).complete)
		require.Len(t, trs, 1, "one invocation is one trace")
		assert.Equal(t, rep.TraceID, trs[0].TraceID)
		jaegerCheckRun(t, rep, &trs[0])
	})

	hbgrun := jaegerHbgrunBinary(t)
	for _, proto := range []struct{ name, endpoint string }{
		{"otlp-http", jaeger.OTLPHTTP()},
		{"otlp-grpc", jaeger.OTLPGRPC()},
	} {
		t.Run(proto.name, func(t *testing.T) {
			tag := fmt.Sprintf("%s-%d", proto.name, time.Now().UnixNano())
			since := time.Now().Add(-time.Minute)
			rep := jaegerHbgrunRun(t, hbgrun, tag, append(jaegerRunArgs, "--otlp", proto.endpoint)...)
			require.Equal(t, 2, rep.Rounds)
			require.Equal(t, 2, rep.Ranks)
			require.Len(t, rep.Passes, 4, "rounds x ranks passes in the report")

			want := jaegerExpect(rep)
			trs := jaeger.waitTraces(t, tag, since, want.complete)
			require.Len(t, trs, 1, "one invocation is one trace")
			if rep.TraceID != "" {
				assert.Equal(t, rep.TraceID, trs[0].TraceID, "the report names the run's trace")
			}
			jaegerCheckRun(t, rep, &trs[0])
		})
	}

	// Ranks on two nodes: one trace, with spans from the driver and both
	// node processes, the nodes' spans under the driver's pass spans.
	t.Run("remote", func(t *testing.T) {
		jaegerRemoteRun(t, jaeger, hbgrun)
	})

	// Without --otlp and OTEL_* variables hbgrun exports nothing: nothing
	// connects to the default OTLP ports while it runs.
	t.Run("no-exporter", func(t *testing.T) {
		watch := jaegerWatchDefaultPorts(t)
		rep := jaegerHbgrunRun(t, hbgrun, "none", jaegerRunArgs...)
		assert.Empty(t, rep.Exporter, "the report names no exporter")
		assert.Empty(t, rep.TraceID, "no span was recorded")
		watch.assertNoConnection(t)
	})
}

// jaegerExpectation is how many spans of each kind the report implies.
type jaegerExpectation struct {
	runs, phases, records int
	uploadBytes           int64
}

func jaegerExpect(rep *trace.Report) jaegerExpectation {
	e := jaegerExpectation{runs: rep.Ranks, records: int(rep.Counts.RecordedDefinitions)}
	for i := range rep.Passes {
		p := &rep.Passes[i]
		for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
			if p.Has(ph) {
				e.phases++
			}
		}
		e.uploadBytes += p.UploadedDefinitionBytes
	}
	return e
}

// complete reports whether Jaeger holds every span the report implies.
func (e jaegerExpectation) complete(trs []jaegerTrace) bool {
	var runs, phases, records, builds int
	var uploadBytes int64
	for _, tr := range trs {
		for i := range tr.Spans {
			s := &tr.Spans[i]
			switch s.OperationName {
			case trace.SpanRun:
				runs++
			case trace.SpanRecord:
				records++
			case trace.SpanBuild:
				builds++
			case trace.SpanUpload:
				uploadBytes += s.intTag(string(trace.KeyUploadBytes))
			default:
				if _, err := trace.ParsePhase(s.OperationName); err == nil {
					phases++
				}
			}
		}
	}
	return runs >= e.runs && phases >= e.phases && records >= e.records && builds >= e.records && uploadBytes >= e.uploadBytes
}

// jaegerRun checks one run's trace against its report, a section per
// method; the maps are what the sections hand on.
type jaegerRun struct {
	t        *testing.T
	rep      *trace.Report
	byID     map[string]*jaegerSpan
	byName   map[string][]*jaegerSpan
	runs     map[int64]*jaegerSpan // by rank
	totals   map[passKey]*passTotals
	recorded map[string]bool // keys recorded (not verified)
}

type passKey struct {
	rank, round int64
	phase       string
}

type passTotals struct {
	records, nodes int
	uploadBytes    int64
}

func jaegerCheckRun(t *testing.T, rep *trace.Report, tr *jaegerTrace) {
	j := &jaegerRun{t: t, rep: rep, byID: map[string]*jaegerSpan{}, byName: map[string][]*jaegerSpan{},
		runs: map[int64]*jaegerSpan{}, totals: map[passKey]*passTotals{}, recorded: map[string]bool{}}
	j.index(tr)
	j.checkRuns()
	j.checkGolden()
	j.checkPhases()
	j.checkRecords()
	j.checkUploads()
	j.checkTotals()
}

// index files every span by id and name and checks none is an error.
func (j *jaegerRun) index(tr *jaegerTrace) {
	t, byID, byName := j.t, j.byID, j.byName
	for i := range tr.Spans {
		s := &tr.Spans[i]
		byID[s.SpanID] = s
		byName[s.OperationName] = append(byName[s.OperationName], s)
		assert.Equal(t, trace.DefaultServiceName, tr.Processes[s.ProcessID].ServiceName)
		if v, ok := s.tag("error"); ok {
			assert.NotEqual(t, true, v, "span %s marked as an error", s.OperationName)
		}
		if v, ok := s.tag("otel.status_code"); ok {
			assert.NotEqual(t, "ERROR", v, "span %s has status ERROR", s.OperationName)
		}
	}
}

func (j *jaegerRun) parent(s *jaegerSpan) *jaegerSpan {
	p := j.byID[s.parentID()]
	require.NotNil(j.t, p, "parent of %s (%s) is not in the trace", s.OperationName, s.SpanID)
	return p
}

// at is the totals of s's pass.
func (j *jaegerRun) at(s *jaegerSpan) *passTotals {
	k := passKey{s.intTag(string(trace.KeyRank)), s.intTag(string(trace.KeyRound)), ""}
	if j.totals[k] == nil {
		j.totals[k] = &passTotals{}
	}
	return j.totals[k]
}

func (j *jaegerRun) checkRuns() {
	t, rep, byName := j.t, j.rep, j.byName
	// The command and the runs.
	require.Len(t, byName[trace.SpanCommand], 1, "one %s root", trace.SpanCommand)
	cmd := byName[trace.SpanCommand][0]
	assert.Equal(t, "", cmd.parentID())
	assert.Equal(t, rep.Model, cmd.strTag(string(trace.KeyModel)))
	assert.Equal(t, rep.Form, cmd.strTag(string(trace.KeyForm)))
	assert.Equal(t, int64(rep.Rounds), cmd.intTag(string(trace.KeyRounds)))
	assert.Equal(t, int64(rep.Ranks), cmd.intTag(string(trace.KeyRanks)))

	runs := j.runs
	require.Len(t, byName[trace.SpanRun], rep.Ranks, "one %s per rank", trace.SpanRun)
	for _, r := range byName[trace.SpanRun] {
		assert.Same(t, cmd, j.parent(r))
		assert.Equal(t, rep.Model, r.strTag(string(trace.KeyModel)))
		assert.Equal(t, rep.Form, r.strTag(string(trace.KeyForm)))
		rank := r.intTag(string(trace.KeyRank))
		require.NotContains(t, runs, rank, "two runs of rank %d", rank)
		runs[rank] = r
	}
}

func (j *jaegerRun) checkGolden() {
	t, rep, byName, runs := j.t, j.rep, j.byName, j.runs
	// The wait for the golden reference, before each rank's first pass,
	// under that rank's run: the trace has no blank stretch before it
	// (an hbgrun run, which checks golden; the trace package's own run
	// has no reference).
	if rep.Golden != nil {
		require.NotEmpty(t, byName[trace.SpanGoldenReference], "no %s span", trace.SpanGoldenReference)
		for _, g := range byName[trace.SpanGoldenReference] {
			assert.Same(t, runs[g.intTag(string(trace.KeyRank))], j.parent(g), "%s is a child of its rank's run", trace.SpanGoldenReference)
		}
	}
}

func (j *jaegerRun) checkPhases() {
	t, rep, byName, runs := j.t, j.rep, j.byName, j.runs
	// Every phase of every pass, under its rank's run, agreeing with the
	// report. Jaeger keeps µs: a duration may differ from ns/1000 by one.
	phaseSpans := map[passKey]*jaegerSpan{}
	for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
		for _, s := range byName[ph.String()] {
			k := passKey{s.intTag(string(trace.KeyRank)), s.intTag(string(trace.KeyRound)), ph.String()}
			require.NotContains(t, phaseSpans, k, "two %s spans for rank %d round %d", k.phase, k.rank, k.round)
			phaseSpans[k] = s
			assert.Same(t, runs[k.rank], j.parent(s), "%s of rank %d round %d is a child of its run", k.phase, k.rank, k.round)
		}
	}
	nearUs := func(ns int64, s *jaegerSpan) {
		t.Helper()
		assert.InDelta(t, ns/1000, s.Duration, 1, "%s rank %v round %v: span %dµs, report %dns", s.OperationName, s.intTag("hbg.rank"), s.intTag("hbg.round"), s.Duration, ns)
	}
	measured := 0
	for i := range rep.Passes {
		p := &rep.Passes[i]
		assert.Equal(t, p.Round == 0, p.Cold, "round 0 is the cold pass")
		if rep.Device == trace.DeviceSim {
			for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
				assert.True(t, p.Has(ph), "rank %d round %d measured no %s", p.Rank, p.Round, ph)
			}
		}
		for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
			if !p.Has(ph) {
				continue
			}
			measured++
			s := phaseSpans[passKey{int64(p.Rank), int64(p.Round), ph.String()}]
			if !assert.NotNil(t, s, "no %s span for rank %d round %d", ph, p.Rank, p.Round) {
				continue
			}
			assert.Equal(t, p.Cold, s.boolTag(string(trace.KeyCold)))
			if ph == trace.PhaseDeviceWall {
				assert.Equal(t, p.Phases[ph], s.intTag(string(trace.KeyDeviceSimNs)), "device_wall carries the simulated wall")
				if p.SimulationNs > 0 {
					nearUs(p.SimulationNs, s)
				}
			} else {
				nearUs(p.Phases[ph], s)
			}
		}
	}
	assert.Equal(t, measured, len(phaseSpans), "no phase span beyond the report's passes")
}

func (j *jaegerRun) checkRecords() {
	t, rep, byName := j.t, j.rep, j.byName
	// Recordings and their builds, under the host_orch of the pass that
	// asked; only cold passes record.
	fullKey := regexp.MustCompile(`^[0-9a-f]{16}$`)
	recorded, verified := j.recorded, map[string]bool{}
	var recordedNodes int64
	definitions := 0
	for _, r := range byName[trace.SpanRecord] {
		orch := j.parent(r)
		if !assert.Equal(t, trace.PhaseHostOrch.String(), orch.OperationName, "a recording is a child of the host_orch that asked for it") {
			continue
		}
		key := r.strTag(string(trace.KeyGraphKey))
		verify, hasVerify := r.tag(string(trace.KeyVerify))
		assert.True(t, hasVerify, "record %s has %s", key, trace.KeyVerify)
		if verify == true {
			// A check of a kept Definition: no new Definition, not in the
			// report's recording counts.
			verified[key] = true
			assert.Positive(t, r.intTag(string(trace.KeyNodes)), "verify record %s nodes", key)
			continue
		}
		definitions++
		assert.True(t, orch.boolTag(string(trace.KeyCold)), "only cold passes record new Definitions")
		assert.NotEmpty(t, key)
		assert.Regexp(t, fullKey, r.strTag(string(trace.KeyFullKey)))
		assert.Positive(t, r.intTag(string(trace.KeyBoundaryWidth)), "record %s boundary width", key)
		nodes := r.intTag(string(trace.KeyNodes))
		assert.Positive(t, nodes, "record %s nodes", key)
		recorded[key] = true
		recordedNodes += nodes
		pt := j.at(orch)
		pt.records++
		pt.nodes += int(nodes)

		var builds []*jaegerSpan
		for _, b := range byName[trace.SpanBuild] {
			if b.parentID() == r.SpanID {
				builds = append(builds, b)
			}
		}
		if assert.Len(t, builds, 1, "one %s under record %s", trace.SpanBuild, key) {
			b := builds[0]
			assert.Equal(t, key, b.strTag(string(trace.KeyGraphKey)))
			assert.Equal(t, nodes, b.intTag(string(trace.KeyNodes)))
			assert.Positive(t, b.intTag(string(trace.KeyImageBytes)), "build %s image bytes", key)
		}
	}
	assert.Equal(t, int(rep.Counts.RecordedDefinitions), definitions, "one %s span per recorded Definition", trace.SpanRecord)
	for _, b := range byName[trace.SpanBuild] {
		assert.Equal(t, trace.SpanRecord, j.parent(b).OperationName, "a build is a child of its recording")
	}
	assert.Equal(t, rep.Counts.RecordedNodes, recordedNodes)
	for key := range verified {
		assert.True(t, recorded[key], "key %s verified but never recorded", key)
	}
}

func (j *jaegerRun) checkUploads() {
	t, byName, recorded := j.t, j.byName, j.recorded
	// Uploads, under the graph_upload of their pass, or under its host_orch
	// when a Definition was uploaded as soon as it was built.
	uploaded := map[string]bool{}
	for _, u := range byName[trace.SpanUpload] {
		gu := j.parent(u)
		if gu.OperationName != trace.PhaseGraphUpload.String() && gu.OperationName != trace.PhaseHostOrch.String() {
			assert.Fail(t, "an upload is a child of its pass's graph_upload or host_orch", "parent %s", gu.OperationName)
			continue
		}
		key := u.strTag(string(trace.KeyGraphKey))
		assert.NotEmpty(t, key)
		bytes := u.intTag(string(trace.KeyUploadBytes))
		assert.Positive(t, bytes, "upload %s bytes", key)
		_, hasObj := u.tag(string(trace.KeyObjectID))
		assert.True(t, hasObj, "upload %s has %s", key, trace.KeyObjectID)
		uploaded[key] = true
		j.at(gu).uploadBytes += bytes
	}
	for key := range recorded {
		assert.True(t, uploaded[key], "recorded key %s was never uploaded", key)
	}
	assert.NotEmpty(t, byName[trace.SpanUpload], "the blocks form uploads Definitions")
}

func (j *jaegerRun) checkTotals() {
	t, rep, totals := j.t, j.rep, j.totals
	// Per pass, the spans add up to the report's figures.
	for i := range rep.Passes {
		p := &rep.Passes[i]
		pt := totals[passKey{int64(p.Rank), int64(p.Round), ""}]
		if pt == nil {
			pt = &passTotals{}
		}
		assert.Equal(t, p.BuiltDefinitions, pt.records, "rank %d round %d: record spans vs built_definitions", p.Rank, p.Round)
		assert.Equal(t, p.RecordedNodes, pt.nodes, "rank %d round %d: recorded nodes", p.Rank, p.Round)
		assert.Equal(t, p.UploadedDefinitionBytes, pt.uploadBytes, "rank %d round %d: uploaded bytes", p.Rank, p.Round)
		if !p.Cold {
			assert.Zero(t, p.BuiltDefinitions, "rank %d round %d: a warm pass built Definitions (are they kept across rounds?)", p.Rank, p.Round)
		}
	}
}

// strTag, intTag and boolTag read a span's tag of that type (zero when absent).
func (s *jaegerSpan) strTag(key string) string {
	v, _ := s.tag(key)
	str, _ := v.(string)
	return str
}

func (s *jaegerSpan) intTag(key string) int64 {
	v, _ := s.tag(key)
	switch n := v.(type) {
	case json.Number:
		i, _ := n.Int64()
		return i
	case float64:
		return int64(n)
	}
	return 0
}

func (s *jaegerSpan) boolTag(key string) bool {
	v, _ := s.tag(key)
	b, _ := v.(bool)
	return b
}
