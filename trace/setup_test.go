package trace

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// clearOTELEnv unsets every OTEL_* variable for the test (restored after).
func clearOTELEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "") // registers the restore
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

// emitSome makes one span of each kind and shuts the provider down, which
// flushes: any export would have been attempted by the time it returns.
func emitSome(t *testing.T, p *Provider, shutdown func(context.Context) error) {
	t.Helper()
	tr := p.Tracer()
	ctx, cmd := tr.StartCommand(context.Background(), RunInfo{Model: "m", Form: "f", Rounds: 1, Ranks: 1})
	rctx, run := tr.StartRun(ctx, RunInfo{Model: "m", Form: "f"}, 0)
	octx, orch := tr.StartPhase(rctx, PhaseHostOrch, 0, 0)
	_, rs := tr.StartRecord(octx, RecordInfo{Key: "k"})
	rs.Finish(1, nil)
	orch.Finish()
	run.End()
	cmd.End()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, shutdown(sctx))
}

// TestDefaultExportsNothing: with no --otlp and no OTEL_* variables, Setup
// makes no exporter and nothing connects to the default OTLP ports, on
// either loopback address, whether or not the timeline is on.
func TestDefaultExportsNothing(t *testing.T) {
	for _, cfg := range []Config{{}, {Timeline: true}} {
		t.Run(map[bool]string{false: "plain", true: "timeline"}[cfg.Timeline], func(t *testing.T) {
			clearOTELEnv(t)
			var listeners []*net.TCPListener
			for _, addr := range []string{"127.0.0.1:4317", "127.0.0.1:4318", "[::1]:4317", "[::1]:4318"} {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					// A collector already there, or no IPv6: the exporter
					// check below still holds.
					t.Logf("cannot watch %s: %v", addr, err)
					continue
				}
				t.Cleanup(func() { ln.Close() })
				listeners = append(listeners, ln.(*net.TCPListener))
			}

			p, shutdown, err := Setup(context.Background(), cfg)
			require.NoError(t, err)
			assert.False(t, p.Exporting())
			assert.Equal(t, "", p.Destination())
			if !cfg.Timeline {
				assert.IsType(t, noop.TracerProvider{}, p.TracerProvider, "no exporter, no timeline: the no-op provider")
			}
			emitSome(t, p, shutdown)
			if cfg.Timeline {
				assert.Len(t, p.Slices(), 4, "the timeline kept the spans")
			}

			// A connection the kernel accepted would be waiting in the
			// backlog; an expired deadline makes Accept say so without
			// waiting.
			for _, ln := range listeners {
				require.NoError(t, ln.SetDeadline(time.Now()))
				c, err := ln.Accept()
				if err == nil {
					c.Close()
					t.Fatalf("something connected to %s", ln.Addr())
				}
				var ne net.Error
				require.True(t, errors.As(err, &ne) && ne.Timeout(), "accept on %s: %v", ln.Addr(), err)
			}
		})
	}
}

// otlpSink receives OTLP trace exports over gRPC and HTTP and keeps the span
// names and resource service names.
type otlpSink struct {
	coltracepb.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []string
	services []string
	paths    []string
}

func (s *otlpSink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (s *otlpSink) add(req *coltracepb.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				s.services = append(s.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, sp.GetName())
			}
		}
	}
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.add(&req)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (s *otlpSink) check(t *testing.T, wantPath string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	names := slices.Clone(s.spans)
	slices.Sort(names)
	assert.Equal(t, []string{SpanRun, SpanCommand, "host_orch", SpanRecord}, names)
	for _, svc := range s.services {
		assert.Equal(t, "hbgrun", svc)
	}
	if wantPath != "" {
		require.NotEmpty(t, s.paths)
		for _, p := range s.paths {
			assert.Equal(t, wantPath, p)
		}
	}
}

func grpcSink(t *testing.T) (*otlpSink, string) {
	t.Helper()
	sink := &otlpSink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, sink)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return sink, ln.Addr().String()
}

func httpSink(t *testing.T) (*otlpSink, string) {
	t.Helper()
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	return sink, srv.Listener.Addr().String()
}

// The --otlp flag picks the protocol by scheme and wins over the
// environment.
func TestEndpointFlag(t *testing.T) {
	t.Run("grpc", func(t *testing.T) {
		clearOTELEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // must be ignored
		sink, addr := grpcSink(t)
		p, shutdown, err := Setup(context.Background(), Config{Endpoint: "grpc://" + addr})
		require.NoError(t, err)
		assert.Equal(t, "otlp/grpc "+addr, p.Destination())
		emitSome(t, p, shutdown)
		sink.check(t, "")
	})
	t.Run("http default path", func(t *testing.T) {
		clearOTELEnv(t)
		sink, addr := httpSink(t)
		p, shutdown, err := Setup(context.Background(), Config{Endpoint: "http://" + addr})
		require.NoError(t, err)
		assert.Equal(t, "otlp/http http://"+addr+"/v1/traces", p.Destination())
		emitSome(t, p, shutdown)
		sink.check(t, "/v1/traces")
	})
	t.Run("http own path", func(t *testing.T) {
		clearOTELEnv(t)
		sink, addr := httpSink(t)
		p, shutdown, err := Setup(context.Background(), Config{Endpoint: "http://" + addr + "/otlp/v1/traces"})
		require.NoError(t, err)
		emitSome(t, p, shutdown)
		sink.check(t, "/otlp/v1/traces")
	})
}

// The standard variables choose the exporter when there is no flag.
func TestEnvironment(t *testing.T) {
	t.Run("endpoint alone is http/protobuf", func(t *testing.T) {
		clearOTELEnv(t)
		sink, addr := httpSink(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
		p, shutdown, err := Setup(context.Background(), Config{})
		require.NoError(t, err)
		assert.True(t, p.Exporting())
		emitSome(t, p, shutdown)
		sink.check(t, "/v1/traces")
	})
	t.Run("traces endpoint with grpc protocol", func(t *testing.T) {
		clearOTELEnv(t)
		sink, addr := grpcSink(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // the traces variable wins
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+addr)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		p, shutdown, err := Setup(context.Background(), Config{})
		require.NoError(t, err)
		assert.Equal(t, "otlp/grpc http://"+addr, p.Destination())
		emitSome(t, p, shutdown)
		sink.check(t, "")
	})
	t.Run("service name from the environment", func(t *testing.T) {
		clearOTELEnv(t)
		t.Setenv("OTEL_SERVICE_NAME", "hbg-bench")
		t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "hbg.test=1")
		p, exp := recorded(t, false)
		_, s := p.Tracer().StartRun(context.Background(), RunInfo{}, 0)
		s.End()
		res := attrMap(exp.GetSpans()[0].Resource.Attributes())
		assert.Equal(t, "hbg-bench", res["service.name"])
		assert.Equal(t, "1", res["hbg.test"])
	})
	for _, off := range [][2]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		t.Run(off[0], func(t *testing.T) {
			clearOTELEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(off[0], off[1])
			p, _, err := Setup(context.Background(), Config{})
			require.NoError(t, err)
			assert.False(t, p.Exporting())
		})
	}
}

func TestSetupErrors(t *testing.T) {
	for _, tt := range []struct{ endpoint, want string }{
		{"localhost:4317", "want grpc://host:port"},
		{"4317", "want grpc://host:port"},
		{"ftp://localhost:4317", `unknown scheme "ftp"`},
		{"grpc://localhost:4317/v1/traces", "OTLP/gRPC endpoint has no path"},
		{"http://", "want grpc://host:port"},
	} {
		t.Run(tt.endpoint, func(t *testing.T) {
			clearOTELEnv(t)
			_, shutdown, err := Setup(context.Background(), Config{Endpoint: tt.endpoint})
			assert.ErrorContains(t, err, tt.want)
			assert.NoError(t, shutdown(context.Background()), "shutdown is callable after an error")
		})
	}
	t.Run("bad protocol variable", func(t *testing.T) {
		clearOTELEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
		_, _, err := Setup(context.Background(), Config{})
		assert.ErrorContains(t, err, `OTEL_EXPORTER_OTLP_PROTOCOL "thrift"`)
	})
	// http/json was sent as protobuf, which a collector told JSON refuses.
	t.Run("http/json", func(t *testing.T) {
		clearOTELEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
		_, _, err := Setup(context.Background(), Config{})
		assert.ErrorContains(t, err, `OTEL_EXPORTER_OTLP_PROTOCOL "http/json": want grpc or http/protobuf`)
	})
	t.Run("exporter variable", func(t *testing.T) {
		clearOTELEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
		_, _, err := Setup(context.Background(), Config{})
		assert.ErrorContains(t, err, `OTEL_TRACES_EXPORTER "zipkin": want otlp or none`)
	})
}

// An endpoint without a port gets the OTLP default of its protocol, not
// the URL scheme's (443 for https); a bad port is refused.
func TestEndpointDefaultPorts(t *testing.T) {
	for _, tt := range []struct{ endpoint, dest string }{
		{"grpc://collector.example", "otlp/grpc collector.example:4317"},
		{"grpcs://collector.example", "otlp/grpcs collector.example:4317"},
		{"http://collector.example", "otlp/http http://collector.example:4318/v1/traces"},
		{"https://collector.example/otlp", "otlp/https https://collector.example:4318/otlp"},
		{"grpc://[::1]", "otlp/grpc [::1]:4317"},
		{"http://collector.example:9999", "otlp/http http://collector.example:9999/v1/traces"},
	} {
		t.Run(tt.endpoint, func(t *testing.T) {
			clearOTELEnv(t)
			p, shutdown, err := Setup(context.Background(), Config{Endpoint: tt.endpoint})
			require.NoError(t, err)
			t.Cleanup(func() { _ = shutdown(context.Background()) })
			assert.Equal(t, tt.dest, p.Destination())
		})
	}
	for _, bad := range []string{"http://collector.example:", "grpc://collector.example:0", "http://collector.example:65536", "http://user@collector.example"} {
		t.Run(bad, func(t *testing.T) {
			clearOTELEnv(t)
			_, _, err := Setup(context.Background(), Config{Endpoint: bad})
			assert.Error(t, err)
		})
	}
}

// Spans that could not be exported are counted, with the reason, so that a
// run can report them rather than a log line.
func TestExportFailuresCounted(t *testing.T) {
	clearOTELEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")
	p, shutdown, err := Setup(context.Background(), Config{Endpoint: "http://" + addr, Sync: true})
	require.NoError(t, err)
	tr := p.Tracer()
	for range 3 {
		_, s := tr.StartRun(context.Background(), RunInfo{}, 0)
		s.End()
	}
	_ = shutdown(context.Background())
	st := p.Exported()
	assert.Equal(t, int64(0), st.Exported)
	assert.Equal(t, int64(3), st.Failed)
	assert.Error(t, st.Err)

	sink, good := httpSink(t)
	p, shutdown, err = Setup(context.Background(), Config{Endpoint: "http://" + good})
	require.NoError(t, err)
	emitSome(t, p, shutdown)
	sink.check(t, "/v1/traces")
	assert.Equal(t, ExportStats{Exported: 4}, p.Exported())
}

// ServiceVersion becomes every span's resource service.version.
func TestServiceVersion(t *testing.T) {
	clearOTELEnv(t)
	exp := tracetest.NewInMemoryExporter()
	p, shutdown, err := Setup(context.Background(), Config{Exporter: exp, Sync: true, ServiceVersion: "v1.2.3 abc go1.26"})
	require.NoError(t, err)
	_, s := p.Tracer().StartRun(context.Background(), RunInfo{}, 0)
	s.End()
	spans := exp.GetSpans() // shutdown clears them
	require.NoError(t, shutdown(context.Background()))
	require.Len(t, spans, 1)
	assert.Equal(t, "v1.2.3 abc go1.26", attrMap(spans[0].Resource.Attributes())["service.version"])
}

// A collector that refuses the connection is given up on within 3 s, with
// the reason, over both protocols (the 10-11 s was the SDK's
// default retry cut short by the export timeout): a flush bounded at 3 s
// ends with the refusal, not with its own deadline.
func TestRefusedCollectorWithin3s(t *testing.T) {
	for _, scheme := range []string{"grpc", "http"} {
		t.Run(scheme, func(t *testing.T) {
			clearOTELEnv(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := ln.Addr().String()
			require.NoError(t, ln.Close()) // nothing listens there now
			p, shutdown, err := Setup(context.Background(), Config{Endpoint: scheme + "://" + addr})
			require.NoError(t, err)
			_, s := p.Tracer().StartRun(context.Background(), RunInfo{}, 0)
			s.End()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = shutdown(ctx)
			require.NoError(t, ctx.Err(), "the flush outlasted 3 s")
			st := p.Exported()
			assert.Equal(t, int64(1), st.Failed)
			require.Error(t, st.Err)
			assert.Contains(t, st.Err.Error(), "connection refused")
		})
	}
}
