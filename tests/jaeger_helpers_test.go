package tests

// Helpers of jaeger_e2e_test.go: build and start a real Jaeger, build and run
// hbgrun, read traces back from Jaeger's HTTP API.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/hbg-dev/hbg/trace"
)

// jaegerRepoRoot is the main module's directory (tests/ is one below it).
func jaegerRepoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "tests must run from the tests/ directory of the repo")
	return root
}

// jaegerGo runs the go command in dir, failing the test with its output.
func jaegerGo(t *testing.T, ctx context.Context, dir string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// A tool module under a git work tree: do not let a VCS stamp fail the
	// build in a CI checkout.
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s in %s:\n%s", strings.Join(args, " "), dir, out)
}

// jaegerBinary returns tools/jaeger/bin/jaeger, building it when it is
// missing or older than the tool module's go.mod/go.sum (the version pin).
// The first build takes minutes on a 2-core machine; later runs reuse the
// binary, and so can a Makefile target (trace/README_SECTION.md).
func jaegerBinary(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(jaegerRepoRoot(t), "tools", "jaeger")
	bin := filepath.Join(dir, "bin", "jaeger")
	if jaegerUpToDate(bin, filepath.Join(dir, "go.mod"), filepath.Join(dir, "go.sum")) {
		return bin
	}
	t.Logf("building Jaeger into %s (the first build takes several minutes)", bin)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// Build beside the target and rename, so a concurrent reader never sees
	// half a binary.
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	jaegerGo(t, ctx, dir, "build", "-o", tmp, "github.com/jaegertracing/jaeger/cmd/jaeger")
	require.NoError(t, os.Rename(tmp, bin))
	t.Logf("built Jaeger in %s", time.Since(start).Round(time.Second))
	return bin
}

func jaegerUpToDate(bin string, deps ...string) bool {
	bi, err := os.Stat(bin)
	if err != nil {
		return false
	}
	for _, d := range deps {
		di, err := os.Stat(d)
		if err != nil || di.ModTime().After(bi.ModTime()) {
			return false
		}
	}
	return true
}

// jaegerFreePort asks the kernel for a free loopback port. Another process
// could take it before Jaeger binds it; Jaeger then exits and the test says
// so with its log.
func jaegerFreePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// jaegerConfig is a Jaeger v2 (OpenTelemetry collector) configuration with
// in-memory storage, OTLP receivers, the query service and the health check
// on the given ports, and the collector's own metrics off (they would take
// port 8888).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:%[1]d
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%[2]d
    grpc:
      endpoint: 127.0.0.1:%[3]d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%[4]d
      http:
        endpoint: 127.0.0.1:%[5]d
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// jaegerServer is a running Jaeger.
type jaegerServer struct {
	health, query, otlpGRPC, otlpHTTP int
	log                               string
}

// OTLPHTTP and OTLPGRPC are --otlp values for hbgrun.
func (j *jaegerServer) OTLPHTTP() string { return fmt.Sprintf("http://127.0.0.1:%d", j.otlpHTTP) }
func (j *jaegerServer) OTLPGRPC() string { return fmt.Sprintf("grpc://127.0.0.1:%d", j.otlpGRPC) }

// jaegerStart starts Jaeger on free ports and returns once its health check
// reports it up and its query API answers. It is stopped when the test ends.
func jaegerStart(t *testing.T, bin string) *jaegerServer {
	t.Helper()
	dir := t.TempDir()
	j := &jaegerServer{
		health: jaegerFreePort(t), query: jaegerFreePort(t),
		otlpGRPC: jaegerFreePort(t), otlpHTTP: jaegerFreePort(t),
		log: filepath.Join(dir, "jaeger.log"),
	}
	queryGRPC := jaegerFreePort(t)
	cfg := filepath.Join(dir, "jaeger.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, j.health, j.query, queryGRPC, j.otlpGRPC, j.otlpHTTP), 0o644))
	logf, err := os.Create(j.log)
	require.NoError(t, err)

	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
		if t.Failed() {
			t.Logf("Jaeger's log (%s):\n%s", j.log, jaegerTail(j.log, 60))
		}
	})

	// Jaeger is another process: polling its health endpoint is the only way
	// to know it is ready. Bounded, and it stops early if Jaeger exits.
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if jaegerGet(fmt.Sprintf("http://127.0.0.1:%d/status", j.health)) == nil &&
			jaegerGet(fmt.Sprintf("http://127.0.0.1:%d/api/services", j.query)) == nil {
			return j
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("Jaeger exited before it was ready (%v); log:\n%s", err, jaegerTail(j.log, 60))
		case <-deadline:
			t.Fatalf("Jaeger not ready after 2m; log:\n%s", jaegerTail(j.log, 60))
		case <-tick.C:
		}
	}
}

// jaegerGet reports whether url answers 200.
func jaegerGet(u string) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}

func jaegerTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// jaegerHbgrunBinary is cmd/hbgrun, built once for every test of the
// package (hbgrun): each of these tests linked a copy of its own.
func jaegerHbgrunBinary(t *testing.T) string {
	t.Helper()
	return hbgrun(t)
}

// jaegerHbgrunRun runs hbgrun with args and OTEL_RESOURCE_ATTRIBUTES tagging its
// spans with hbg.e2e.run=tag (so the test finds them among other runs), and
// decodes its JSON report from stdout.
func jaegerHbgrunRun(t *testing.T, bin, tag string, args ...string) *trace.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = jaegerRepoRoot(t)
	env := []string{"OTEL_RESOURCE_ATTRIBUTES=hbg.e2e.run=" + tag}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") { // only --otlp decides where spans go
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	require.NoError(t, err, "hbgrun %s\nstderr:\n%s", strings.Join(args, " "), stderr.String())
	t.Logf("hbgrun %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	var rep trace.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), "hbgrun --json output:\n%s", stdout.String())
	return &rep
}

// Jaeger's query API JSON (the model the UI reads).
type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []jaegerTag `json:"tags"`
	ProcessID     string      `json:"processID"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type jaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []jaegerTag `json:"tags"`
}

// tag returns a span's tag by key.
func (s *jaegerSpan) tag(key string) (any, bool) {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return tg.Value, true
		}
	}
	return nil, false
}

// parentID is the span's CHILD_OF parent, "" for a root.
func (s *jaegerSpan) parentID() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// traces returns the traces of service hbgrun whose process carries
// hbg.e2e.run=tag, started since `since`.
func (j *jaegerServer) traces(tag string, since time.Time) ([]jaegerTrace, error) {
	q := url.Values{
		"service": {trace.DefaultServiceName},
		"start":   {fmt.Sprint(since.UnixMicro())},
		"limit":   {"1000"},
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/traces?%s", j.query, q.Encode()))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/api/traces: %s: %s", resp.Status, body)
	}
	var doc struct {
		Data   []jaegerTrace `json:"data"`
		Errors []any         `json:"errors"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // ids and ns stay exact
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("/api/traces: %w", err)
	}
	if len(doc.Errors) > 0 {
		return nil, fmt.Errorf("/api/traces: errors %v", doc.Errors)
	}
	var out []jaegerTrace
	for _, tr := range doc.Data {
		for _, p := range tr.Processes {
			if jaegerHasTag(p.Tags, "hbg.e2e.run", tag) {
				out = append(out, tr)
				break
			}
		}
	}
	return out, nil
}

func jaegerHasTag(tags []jaegerTag, key, value string) bool {
	for _, tg := range tags {
		if tg.Key == key && fmt.Sprint(tg.Value) == value {
			return true
		}
	}
	return false
}

// waitTraces polls Jaeger until complete says the run's spans are all
// there: hbgrun has flushed them before exiting, but the collector stores
// them after its own batching. Bounded; on timeout it returns what it has,
// and the assertions say what is missing.
func (j *jaegerServer) waitTraces(t *testing.T, tag string, since time.Time, complete func([]jaegerTrace) bool) []jaegerTrace {
	t.Helper()
	deadline := time.After(time.Minute)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last []jaegerTrace
	var lastErr error
	for {
		trs, err := j.traces(tag, since)
		if err == nil {
			last = trs
			if complete(trs) {
				return trs
			}
		}
		lastErr = err
		select {
		case <-deadline:
			if lastErr != nil {
				t.Logf("last query error: %v", lastErr)
			}
			t.Logf("Jaeger did not hold the complete run after 1m; checking what it has")
			return last
		case <-tick.C:
		}
	}
}

// jaegerInProcessRun exports, from this process, the spans of a 2-round,
// 2-rank run shaped as hbgrun's actors shape it (recordings reached through
// a Carrier on another goroutine), and returns its report.
func jaegerInProcessRun(t *testing.T, endpoint, tag string) *trace.Report {
	t.Helper()
	ctx := context.Background()
	p, shutdown, err := trace.Setup(ctx, trace.Config{
		Endpoint:   endpoint,
		Attributes: []attribute.KeyValue{attribute.String("hbg.e2e.run", tag)},
	})
	require.NoError(t, err)
	tr := p.Tracer()
	info := trace.RunInfo{Model: "inproc", Form: "blocks", Rounds: 2, Ranks: 2}
	cctx, cmd := tr.StartCommand(ctx, info)

	type job struct {
		key   string
		trace trace.Carrier
		done  chan struct{}
	}
	jobs := make(chan job)
	recorderDone := make(chan struct{})
	go func() { // a recorder actor: record, then build under the recording
		defer close(recorderDone)
		for j := range jobs {
			_, rs := tr.StartRecord(j.trace.Context(context.Background()), trace.RecordInfo{Key: j.key, FullKey: 0xfeed, BoundaryWidth: 9, Actor: "recorder-0"})
			rs.Finish(40, nil)
			_, bs := tr.StartBuild(rs.Carrier().Context(context.Background()), trace.BuildInfo{Key: j.key, FullKey: 0xfeed, Nodes: 40, Actor: "builder"})
			bs.Finish(2048, nil)
			close(j.done)
		}
	}()

	var passes []trace.Pass
	for rank := range info.Ranks {
		rctx, run := tr.StartRun(cctx, info, rank)
		for round := range info.Rounds {
			pass := trace.NewPass(rank, round)
			_, a := tr.StartPhase(rctx, trace.PhaseArgs, rank, round)
			pass.Set(trace.PhaseArgs, a.Finish())
			_, orch := tr.StartPhase(rctx, trace.PhaseHostOrch, rank, round)
			var keys []string
			if pass.Cold {
				keys = []string{"attn", "moe"}
				for _, k := range keys {
					j := job{key: k, trace: orch.Carrier(), done: make(chan struct{})}
					jobs <- j
					<-j.done
					pass.RecordedNodes += 40
					pass.BuiltDefinitions++
				}
			}
			pass.Set(trace.PhaseHostOrch, orch.Finish())
			uctx, up := tr.StartPhase(rctx, trace.PhaseGraphUpload, rank, round)
			for i, k := range keys {
				_, us := tr.StartUpload(uctx, trace.UploadInfo{Key: k, FullKey: 0xfeed, Bytes: 2048, Actor: "uploader"})
				us.Finish(uint64(rank*100+i), nil)
				pass.UploadedDefinitionBytes += 2048
			}
			pass.Set(trace.PhaseGraphUpload, up.Finish())
			_, h2d := tr.StartPhase(rctx, trace.PhaseArenaH2D, rank, round)
			pass.Set(trace.PhaseArenaH2D, h2d.Finish())
			_, dev := tr.StartPhase(rctx, trace.PhaseDeviceWall, rank, round)
			sim, wall := dev.FinishDevice(777_000)
			pass.Set(trace.PhaseDeviceWall, sim)
			pass.SimulationNs = wall
			passes = append(passes, pass)
		}
		run.End()
	}
	close(jobs)
	<-recorderDone
	rep := trace.NewReport(info, passes)
	for _, p := range passes {
		rep.Counts.RecordedDefinitions += int64(p.BuiltDefinitions)
		rep.Counts.RecordedNodes += int64(p.RecordedNodes)
	}
	rep.TraceID = cmd.TraceID()
	cmd.End()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, shutdown(sctx))
	return rep
}

// jaegerPortWatch listens on the default OTLP ports (4317, 4318) on both
// loopback addresses, to see whether anything connects.
type jaegerPortWatch struct{ listeners []*net.TCPListener }

func jaegerWatchDefaultPorts(t *testing.T) *jaegerPortWatch {
	t.Helper()
	w := &jaegerPortWatch{}
	for _, addr := range []string{"127.0.0.1:4317", "127.0.0.1:4318", "[::1]:4317", "[::1]:4318"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("cannot watch %s: %v", addr, err) // taken, or no IPv6
			continue
		}
		t.Cleanup(func() { ln.Close() })
		w.listeners = append(w.listeners, ln.(*net.TCPListener))
	}
	if len(w.listeners) == 0 {
		t.Skip("none of the default OTLP ports could be watched")
	}
	return w
}

// assertNoConnection checks, once the watched process has exited, that no
// connection is waiting: the kernel completes a handshake into the backlog
// even before Accept, and an expired deadline makes Accept report without
// waiting.
func (w *jaegerPortWatch) assertNoConnection(t *testing.T) {
	t.Helper()
	for _, ln := range w.listeners {
		require.NoError(t, ln.SetDeadline(time.Now()))
		c, err := ln.Accept()
		if err == nil {
			c.Close()
			t.Errorf("something connected to %s", ln.Addr())
			continue
		}
		var ne net.Error
		assert.True(t, errors.As(err, &ne) && ne.Timeout(), "accept on %s: %v", ln.Addr(), err)
	}
}
