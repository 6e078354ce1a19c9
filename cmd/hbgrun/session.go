package main

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/trace"
)

// Bounds on the end of a run: how long spans may take to reach a
// collector, and how long an interrupted run's in-flight passes get to end
// once the runtime is told to stop.
const (
	flushTimeout = 15 * time.Second
	stopGrace    = 5 * time.Second
)

func init() {
	// The exporter's failures are counted and reported once, at the end
	// (session.finish); OpenTelemetry's default handler would also log a
	// bare line per failed batch.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
}

// session is one invocation's tracing and actor system.
type session struct {
	sys      *actor.ActorSystem
	provider *trace.Provider
	shutdown func(context.Context) error
	tracer   *trace.Tracer
	stderr   io.Writer
	// ctx is the command's: ended by SIGINT or SIGTERM.
	ctx context.Context
}

func newSession(ctx context.Context, f *runFlags, stderr io.Writer) (*session, error) {
	p, shutdown, err := trace.Setup(ctx, trace.Config{Endpoint: f.otlp, Timeline: f.traceOut != "", ServiceVersion: version(), Attributes: instance("hbgrun")})
	if err != nil {
		return nil, usageError{fmt.Errorf("tracing: %w", err)}
	}
	return &session{sys: actors.NewActorSystem(nil), provider: p, shutdown: shutdown, tracer: p.Tracer(), stderr: stderr, ctx: ctx}, nil
}

// finish stops the actor system and flushes the spans. It returns where the
// spans went, for the report ("" when nowhere, or when none got there), and
// an error when spans were to be exported and none could be. Spans partly
// lost are reported on stderr with their count.
func (s *session) finish() (string, error) {
	s.sys.Shutdown()
	if s.ctx.Err() != nil && s.provider.Exporting() {
		// An interrupted command's only other line is "interrupted": say
		// what it waits for, and how not to.
		fmt.Fprintf(s.stderr, "hbgrun: flushing spans to %s (at most %v; Ctrl-C again to skip)\n", s.provider.Destination(), flushTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	ferr := s.shutdown(ctx)
	if !s.provider.Exporting() {
		return "", ferr
	}
	dest := s.provider.Destination()
	st := s.provider.Exported()
	cause := st.Err
	if cause == nil {
		cause = ferr
	}
	switch {
	case st.Failed == 0 && ferr == nil:
		return dest, nil
	case st.Exported == 0:
		return "", fmt.Errorf("no span could be exported to %s (%d lost): %w", dest, st.Failed, cause)
	}
	fmt.Fprintf(s.stderr, "hbgrun: %d of %d spans could not be exported to %s: %v\n", st.Failed, st.Failed+st.Exported, dest, cause)
	return fmt.Sprintf("%s (%d of %d spans)", dest, st.Exported, st.Failed+st.Exported), nil
}

// stopper stops a runtime once, and gives up waiting after stopGrace (a
// pass stuck in flight must not hold an interrupted command).
type stopper struct {
	rt   interface{ Stop(context.Context) error }
	once sync.Once
}

func (s *stopper) stop() { _ = s.stopWithin(stopGrace) }

// stopWithin stops the runtime, waiting at most d, and returns Stop's
// error; a later call does nothing and returns nil.
func (s *stopper) stopWithin(d time.Duration) (err error) {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		err = s.rt.Stop(ctx)
	})
	return err
}

// output is a file named by a flag, created before any work so that a bad
// path is the user's mistake, reported at once, not after the run.
type output struct {
	flag, path string
	f          *os.File
}

// openSession creates the --trace-out file before any work (a bad path is
// the user's mistake, found before the run), then the session.
func openSession(ctx context.Context, f *runFlags, stderr io.Writer) (*session, *output, error) {
	traceOut, err := createOutput("--trace-out", f.traceOut)
	if err != nil {
		return nil, nil, err
	}
	s, err := newSession(ctx, f, stderr)
	if err != nil {
		traceOut.discard()
		return nil, nil, err
	}
	return s, traceOut, nil
}

// createOutput creates path for flag; "" is no output (a nil *output,
// whose methods do nothing).
func createOutput(flag, path string) (*output, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", flag, err)}
	}
	return &output{flag: flag, path: path, f: f}, nil
}

// write fills the file with fn's output and closes it.
func (o *output) write(fn func(w io.Writer) error) error {
	if o == nil {
		return nil
	}
	var err error
	if strings.HasSuffix(o.path, ".gz") {
		// A name that says gzip gets gzip: a long run's trace is mostly
		// repeated names, a tenth of its size compressed.
		zw := gzip.NewWriter(o.f)
		err = errors.Join(fn(zw), zw.Close())
	} else {
		err = fn(o.f)
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(o.path)
		return fmt.Errorf("%s %s: %w", o.flag, o.path, err)
	}
	return nil
}

// discard removes the file when there is nothing to write into it.
func (o *output) discard() {
	if o == nil {
		return
	}
	o.f.Close()
	os.Remove(o.path)
}

// interrupted reports whether the command's context was cancelled: it has
// no deadline, so only a signal cancels it.
func interrupted(ctx context.Context) bool { return ctx.Err() != nil }
