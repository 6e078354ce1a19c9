package trace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is the service every hbg span is filed under.
const DefaultServiceName = "hbgrun"

// The OTLP default ports (OpenTelemetry protocol specification), used when
// an endpoint names none: a URL's own default (443 for https) is not where
// a collector listens.
const (
	DefaultGRPCPort = "4317"
	DefaultHTTPPort = "4318"
)

// Config says where spans go. The zero value exports nothing and opens no
// connection, unless the standard OTEL_EXPORTER_OTLP_* variables ask for an
// exporter.
type Config struct {
	// Endpoint is the --otlp flag: "grpc://host:port" (OTLP/gRPC, plaintext),
	// "grpcs://host:port" (OTLP/gRPC over TLS), "http://host:port[/path]"
	// (OTLP/HTTP protobuf, plaintext) or "https://…" (OTLP/HTTP over TLS).
	// For http(s) an empty path means /v1/traces, as
	// OTEL_EXPORTER_OTLP_ENDPOINT does. When set it wins over the
	// environment's endpoint and protocol; the exporter still reads the other
	// OTEL_EXPORTER_OTLP_* variables (headers, timeout, certificates).
	//
	// When empty, the environment decides: an exporter is made only if
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is
	// set, with the protocol of OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
	// OTEL_EXPORTER_OTLP_PROTOCOL ("grpc", "http/protobuf" (the spec's
	// default); http/json, which OpenTelemetry Go does not serve, is an
	// error). OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn the
	// environment's exporter off; another OTEL_TRACES_EXPORTER than otlp
	// is an error.
	Endpoint string

	// ServiceName defaults to OTEL_SERVICE_NAME, then to "hbgrun".
	ServiceName string

	// ServiceVersion, when set, is the resource's service.version (the
	// command's build).
	ServiceVersion string

	// Attributes are added to the resource (every span of the process),
	// e.g. the command line or the commit.
	Attributes []attribute.KeyValue

	// Timeline keeps every ended span in memory, so that Provider.Slices can
	// hand them to WriteChromeTrace (--trace-out). It needs no exporter.
	Timeline bool

	// Exporter, when set, receives the spans instead of an OTLP exporter:
	// tests, or a program that brings its own pipeline. Endpoint and the
	// environment are then ignored.
	Exporter sdktrace.SpanExporter

	// Sync exports each span as it ends instead of in batches. Tests use
	// it; a run should not (an export per span is on the actor's path).
	Sync bool
}

// Provider is the tracer provider Setup made. It is an
// oteltrace.TracerProvider, so it can be handed to anything that takes one
// (protoactor's OpenTelemetry middleware, say); Tracer gives hbg's helpers.
type Provider struct {
	oteltrace.TracerProvider
	dest     string
	timeline *timelineProcessor
	counter  *countingExporter
}

// ExportStats is what became of the spans handed to the exporter: how many
// it sent, how many it could not send, and the last reason it gave. Read it
// after shutdown, when every span has been tried.
type ExportStats struct {
	Exported int64
	Failed   int64
	Err      error
}

// Exported reports what became of the spans so far (zero when nothing is
// exported).
func (p *Provider) Exported() ExportStats {
	if p.counter == nil {
		return ExportStats{}
	}
	return p.counter.stats()
}

// Tracer returns hbg's span helpers over this provider.
func (p *Provider) Tracer() *Tracer { return NewTracer(p.TracerProvider) }

// Exporting reports whether spans leave the process.
func (p *Provider) Exporting() bool { return p.dest != "" }

// Destination describes where spans go ("otlp/grpc 127.0.0.1:4317"), or ""
// when nothing is exported. For logs and the report, not for parsing.
func (p *Provider) Destination() string { return p.dest }

// Slices returns the spans that have ended so far as timeline slices (nil
// unless Config.Timeline), in the order they ended.
func (p *Provider) Slices() []Slice {
	if p.timeline == nil {
		return nil
	}
	return p.timeline.slices()
}

// Setup makes the tracer provider of a run. Nothing is global: the provider
// is returned and passed to whoever makes spans. shutdown flushes pending
// spans and closes the exporter; call it once, before the process exits,
// with a context that bounds how long a flush to an absent collector may
// take. shutdown is never nil, even with an error.
//
// With no exporter and no timeline the provider is OpenTelemetry's no-op
// provider: spans cost a context copy, carry their parent's ids, and nothing
// is recorded or sent.
func Setup(ctx context.Context, cfg Config) (*Provider, func(context.Context) error, error) {
	nop := func(context.Context) error { return nil }
	exp, dest, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, nop, err
	}
	if exp == nil && !cfg.Timeline {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, nop, nil
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		if exp != nil {
			err = errors.Join(err, exp.Shutdown(ctx))
		}
		return nil, nop, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	p := &Provider{dest: dest}
	if cfg.Timeline {
		p.timeline = &timelineProcessor{}
		opts = append(opts, sdktrace.WithSpanProcessor(p.timeline))
	}
	if exp != nil {
		p.counter = &countingExporter{SpanExporter: exp}
		exp = p.counter
		if cfg.Sync {
			opts = append(opts, sdktrace.WithSyncer(exp))
		} else {
			opts = append(opts, sdktrace.WithBatcher(exp))
		}
	}
	tp := sdktrace.NewTracerProvider(opts...)
	p.TracerProvider = tp
	shutdown := func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("trace: shut down tracer provider (exporting to %s): %w", orNone(dest), err)
		}
		return nil
	}
	return p, shutdown, nil
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = os.Getenv("OTEL_SERVICE_NAME")
	}
	if name == "" {
		name = DefaultServiceName
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", name),
		attribute.Int("process.pid", os.Getpid()),
	}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	attrs = append(attrs, cfg.Attributes...)
	// Detectors apply in order, later ones winning: OTEL_RESOURCE_ATTRIBUTES
	// may add attributes but the service name is the one decided above.
	// resource.Default is avoided on purpose: it reads the environment once
	// per process and caches it.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithAttributes(attrs...),
	)
	if err != nil {
		return nil, fmt.Errorf("trace: build resource: %w", err)
	}
	return res, nil
}

// newExporter picks the exporter: Config.Exporter, then the --otlp
// endpoint, then the environment. It returns nil when nothing is to be
// exported. No exporter dials on creation (gRPC connects lazily, HTTP per
// request), so a run that ends no span sends nothing.
func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, string, error) {
	if cfg.Exporter != nil {
		return cfg.Exporter, "custom exporter", nil
	}
	if cfg.Endpoint != "" {
		return exporterForEndpoint(ctx, cfg.Endpoint)
	}
	return exporterFromEnv(ctx)
}

func exporterForEndpoint(ctx context.Context, endpoint string) (sdktrace.SpanExporter, string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, "", fmt.Errorf("trace: --otlp %q: want grpc://host:port, grpcs://host:port, http://host:port or https://host:port[/path]", endpoint)
	}
	def := DefaultHTTPPort
	if u.Scheme == "grpc" || u.Scheme == "grpcs" {
		def = DefaultGRPCPort
	}
	switch port := u.Port(); {
	case port == "" && !strings.HasSuffix(u.Host, ":"):
		u.Host = net.JoinHostPort(u.Hostname(), def)
	default:
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, "", fmt.Errorf("trace: --otlp %q: port %q: want 1 to 65535 (or none, for the OTLP default %s)", endpoint, port, def)
		}
	}
	switch u.Scheme {
	case "grpc", "grpcs":
		if u.Path != "" && u.Path != "/" {
			return nil, "", fmt.Errorf("trace: --otlp %q: an OTLP/gRPC endpoint has no path", endpoint)
		}
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: retryElapsed})}
		if u.Scheme == "grpc" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, "", fmt.Errorf("trace: OTLP/gRPC exporter for %s: %w", u.Host, err)
		}
		return exp, "otlp/" + u.Scheme + " " + u.Host, nil
	case "http", "https":
		path := u.Path
		if path == "" || path == "/" {
			path = "/v1/traces"
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: retryElapsed})}
		if u.Scheme == "http" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, "", fmt.Errorf("trace: OTLP/HTTP exporter for %s: %w", u.Host, err)
		}
		return exp, "otlp/" + u.Scheme + " " + u.Scheme + "://" + u.Host + path, nil
	}
	return nil, "", fmt.Errorf("trace: --otlp %q: unknown scheme %q (want grpc, grpcs, http or https)", endpoint, u.Scheme)
}

// retryInitial, retryMax and retryElapsed are the exporters' retry of a failed export: a collector
// that refuses the connection (none listening) is given up on after 1.5 s,
// so the run says so within 3 s, instead of after the SDK's default of a
// minute cut short by the export's 10 s timeout. A collector that takes
// the connection and is slow to answer is bounded by that timeout
// (OTEL_EXPORTER_OTLP_TIMEOUT), not by this.
const (
	retryInitial = 200 * time.Millisecond
	retryMax     = 500 * time.Millisecond
	retryElapsed = 1500 * time.Millisecond
)

func exporterFromEnv(ctx context.Context) (sdktrace.SpanExporter, string, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return nil, "", nil
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		// Not ignored: a run told to export elsewhere that exported
		// nowhere would say nothing of it.
		return nil, "", fmt.Errorf("trace: OTEL_TRACES_EXPORTER %q: want otlp or none", e)
	}
	endpoint := firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" {
		return nil, "", nil
	}
	protocol := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if protocol == "" {
		protocol = "http/protobuf"
	}
	// The exporters read the endpoint (and the rest of OTEL_EXPORTER_OTLP_*)
	// themselves, with the spec's rules for paths and schemes.
	switch protocol {
	case "grpc":
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: retryElapsed}))
		if err != nil {
			return nil, "", fmt.Errorf("trace: OTLP/gRPC exporter for %s: %w", endpoint, err)
		}
		return exp, "otlp/grpc " + endpoint, nil
	case "http/protobuf":
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: retryInitial, MaxInterval: retryMax, MaxElapsedTime: retryElapsed}))
		if err != nil {
			return nil, "", fmt.Errorf("trace: OTLP/HTTP exporter for %s: %w", endpoint, err)
		}
		return exp, "otlp/" + protocol + " " + endpoint, nil
	}
	// http/json is the spec's too, but OpenTelemetry Go has no exporter for
	// it: sending protobuf to a collector that was told JSON is refused
	// there, so it is refused here, as OpenTelemetry's autoexport does.
	return nil, "", fmt.Errorf("trace: OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf (OpenTelemetry Go has no http/json exporter)", protocol)
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// countingExporter counts the spans its exporter sent and could not send,
// so that a run can say so instead of leaving it to a log line.
type countingExporter struct {
	sdktrace.SpanExporter
	mu       sync.Mutex
	exported int64
	failed   int64
	// pending is spans handed to an export that has not returned: a
	// collector that takes the connection and never answers holds them past
	// the run's flush deadline, and they are lost as surely as refused ones.
	pending int64
	err     error
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.mu.Lock()
	c.pending += int64(len(spans))
	c.mu.Unlock()
	err := c.SpanExporter.ExportSpans(ctx, spans)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending -= int64(len(spans))
	if err != nil {
		c.failed += int64(len(spans))
		c.err = err
	} else {
		c.exported += int64(len(spans))
	}
	return err
}

func (c *countingExporter) stats() ExportStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ExportStats{Exported: c.exported, Failed: c.failed + c.pending, Err: c.err}
}
