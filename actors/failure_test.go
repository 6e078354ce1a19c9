package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
)

// Every failure ends: these tests bound each wait with a few seconds, where
// the bugs they guard against hung until a 10-minute pass timeout.

const prompt = 5 * time.Second

// gate blocks recordings until opened: a pass waits in its graph_upload for
// as long as the test wants.
type gate struct {
	entered chan string // a recording started (its key)
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan string, 1024), open: make(chan struct{})} }

func (g *gate) hook(job *mailbox.RecordJob) {
	g.entered <- job.Key
	<-g.open
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(prompt):
		t.Fatal("no recording started")
	}
}

type result struct {
	res *PassResult
	err error
}

func passAsync(rt *Runtime, ctx context.Context, orch *Orchestration, rank, round int) <-chan result {
	out := make(chan result, 1)
	go func() {
		res, err := rt.Pass(ctx, orch, rank, round)
		out <- result{res, err}
	}()
	return out
}

func await(t *testing.T, c <-chan result) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(prompt):
		t.Fatalf("a pass did not end within %v", prompt)
		return result{}
	}
}

// TestRecorderNeverLost: 12 keys whose bodies panic, one recorder. A
// restart budget (10 a second) once stopped the recorder for good and the
// jobs queued to it were lost: the pass hung. Now the pass fails promptly
// naming a key, and the runtime serves the next pass.
func TestRecorderNeverLost(t *testing.T) {
	panicky := func(o stages.Submitter, b *stages.Boundary) error { panic("boom") }
	rt := newRuntime(t, Config{Recorders: 1}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	_, err := rt.Pass(ctx, keysModel{keys: 12, calls: 1, body: panicky}.orchestration("panicky"), 0, 0)
	if err == nil || !strings.Contains(err.Error(), "body panicked") || !errors.Is(err, ErrBodyPanicked) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a body panic, got %v", err)
	}
	res, err := rt.Pass(ctx, keysModel{keys: 3, calls: 2}.orchestration("clean"), 0, 1)
	if err != nil || res.Pass.BuiltDefinitions != 3 {
		t.Fatalf("clean pass after the panics: %v", err)
	}
	// Every job reached the recorder: one restart each (the last one ran
	// before the clean pass's first recording).
	if n := rt.Stats.Restarts.Load(); n != 12 {
		t.Errorf("%d restarts, want 12", n)
	}
}

// TestBodyGoexit: a body that calls runtime.Goexit (as t.Fatal does) while
// it is recorded fails its pass with ErrBodyExited, naming its key, within
// the test's bound; the recorder is restarted, the next pass (other keys)
// records on it, and Stop returns. The Goexit once ended the recorder's
// mailbox goroutine, which nothing restarts: the pass hung until its ctx,
// and Stop never returned.
func TestBodyGoexit(t *testing.T) {
	exiting := func(o stages.Submitter, b *stages.Boundary) error {
		runtime.Goexit()
		return nil
	}
	sys := NewActorSystem(nil)
	defer sys.Shutdown()
	rt, err := start(sys, Config{Recorders: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	_, err = rt.Pass(ctx, keysModel{keys: 1, calls: 1, body: exiting}.orchestration("goexit"), 0, 0)
	if !errors.Is(err, ErrBodyExited) || !strings.Contains(err.Error(), `graph "key-0"`) {
		t.Fatalf("want the body's Goexit naming key-0, got %v", err)
	}
	res, err := rt.Pass(ctx, keysModel{keys: 2, calls: 2}.orchestration("clean"), 0, 1)
	if err != nil || res.Pass.BuiltDefinitions != 2 {
		t.Fatalf("clean pass after the Goexit: %v", err)
	}
	if n := rt.Stats.Restarts.Load(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestBodyErrorIsAValue: a body that returns an error fails the pass with
// it (errors.Is holds), and no recorder restarts: a failure is not a crash.
func TestBodyErrorIsAValue(t *testing.T) {
	errBad := errors.New("bad block parameter")
	failing := func(o stages.Submitter, b *stages.Boundary) error {
		if b.Scalars[0].Value == 1 {
			return errBad
		}
		return rowBody(o, b)
	}
	rt := newRuntime(t, Config{Recorders: 1}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	_, err := rt.Pass(ctx, keysModel{keys: 2, calls: 1, body: failing}.orchestration("failing"), 0, 0)
	if !errors.Is(err, errBad) || !strings.Contains(err.Error(), `graph "key-1"`) {
		t.Fatalf("want the body's error naming key-1, got %v", err)
	}
	if n := rt.Stats.Restarts.Load(); n != 0 {
		t.Errorf("%d restarts for a body that returned an error", n)
	}
	// Run inline (the eager twin), the same body fails the pass the same way.
	_, err = rt.Pass(ctx, golden.Inline(keysModel{keys: 2, calls: 1, body: failing}.orchestration("failing")), 0, 1)
	if !errors.Is(err, errBad) || !strings.Contains(err.Error(), `graph "key-1"`) {
		t.Fatalf("inline: want the body's error naming key-1, got %v", err)
	}
	// A body that panics with an error is reached the same way, recorded
	// or inline.
	panicking := func(o stages.Submitter, b *stages.Boundary) error {
		if b.Scalars[0].Value == 1 {
			panic(fmt.Errorf("wrapped: %w", errBad))
		}
		return rowBody(o, b)
	}
	for round, orch := range []*Orchestration{
		keysModel{keys: 2, calls: 1, body: panicking}.orchestration("panicking"),
		golden.Inline(keysModel{keys: 2, calls: 1, body: panicking}.orchestration("panicking")),
	} {
		if _, err = rt.Pass(ctx, orch, 0, 2+round); !errors.Is(err, errBad) {
			t.Errorf("%s: want the panic's error, got %v", orch.Name, err)
		}
	}
}

// TestGoldenReferenceEnds: with Config.Golden, the golden reference runs
// the caller's orchestration, which may block; the pass that waits for it
// still ends with its ctx, Config.PassTimeout and Stop, and the reference
// is there for the next pass once the orchestration returns.
func TestGoldenReferenceEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		end  func(cancel context.CancelFunc, rt *Runtime)
		want error
	}{
		{"cancel", Config{}, func(cancel context.CancelFunc, _ *Runtime) { cancel() }, context.Canceled},
		{"pass timeout", Config{PassTimeout: 100 * time.Millisecond}, func(context.CancelFunc, *Runtime) {}, context.DeadlineExceeded},
		{"stop", Config{}, func(_ context.CancelFunc, rt *Runtime) { go rt.Stop(context.Background()) }, ErrStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Golden, tc.cfg.SkipDevice = true, false
			rt := newRuntime(t, tc.cfg, nil)
			orch := keysModel{keys: 2, calls: 2}.orchestration("blocking-" + tc.name)
			run, entered, release := orch.Run, make(chan struct{}, 8), make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(release) })
			orch.Run = func(o stages.Submitter) error {
				entered <- struct{}{}
				<-release
				return run(o)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := passAsync(rt, ctx, orch, 0, 0)
			select {
			case <-entered: // the reference runs the orchestration
			case <-time.After(prompt):
				t.Fatal("the reference did not start")
			}
			tc.end(cancel, rt)
			if r := await(t, c); !errors.Is(r.err, tc.want) {
				t.Fatalf("got %v, want %v", r.err, tc.want)
			}
			once.Do(func() { close(release) })
			if tc.want == ErrStopped {
				return
			}
			pctx, pcancel := context.WithTimeout(context.Background(), prompt)
			defer pcancel()
			res, err := rt.Pass(pctx, orch, 0, 1)
			if err != nil || res.Golden == nil || !res.Golden.OK() {
				t.Fatalf("the next pass: %v, golden %+v", err, res)
			}
		})
	}
}

// TestGoldenReferenceGoexit: an orchestration that calls runtime.Goexit
// while the golden reference runs it fails the pass with
// ErrReferenceExited within the test's bound (the reference's goroutine
// ended without a result, and every wait for it once hung until its
// bound), and the next orchestration's pass passes its check.
func TestGoldenReferenceGoexit(t *testing.T) {
	rt := newRuntime(t, Config{Golden: true}, nil)
	orch := keysModel{keys: 1, calls: 2}.orchestration("goexit")
	run, first := orch.Run, true
	orch.Run = func(o stages.Submitter) error {
		// The reference runs the orchestration first, before the pass
		// is sent; the pass itself returns.
		if first {
			first = false
			runtime.Goexit()
		}
		return run(o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	if _, err := rt.Pass(ctx, orch, 0, 0); !errors.Is(err, ErrReferenceExited) {
		t.Fatalf("want ErrReferenceExited, got %v", err)
	}
	res, err := rt.Pass(ctx, keysModel{keys: 2, calls: 2}.orchestration("clean"), 0, 1)
	if err != nil || res.Golden == nil || !res.Golden.OK() {
		t.Fatalf("the next pass: %v, golden %+v", err, res)
	}
}

// TestStop: Stop fails every pass in flight or queued at once with
// ErrStopped, and Pass after Stop returns it; the callers do not wait for
// a timeout.
func TestStop(t *testing.T) {
	g := newGate()
	defer g.release()
	sys := NewActorSystem(nil)
	defer sys.Shutdown()
	rt, err := start(sys, Config{Recorders: 2, InFlight: 1}, g.hook)
	if err != nil {
		t.Fatal(err)
	}
	orch := keysModel{keys: 1, calls: 1}.orchestration("stop")
	var calls []<-chan result
	for rank := 0; rank < 2; rank++ {
		for round := 0; round < 3; round++ { // one in flight, two queued
			calls = append(calls, passAsync(rt, context.Background(), orch, rank, round))
		}
	}
	g.waitEntered(t) // rank 1's job waits on rank 0's recording of the key
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), prompt)
		defer cancel()
		stopped <- rt.Stop(ctx)
	}()
	for _, c := range calls {
		if r := await(t, c); !errors.Is(r.err, ErrStopped) {
			t.Errorf("a pass in flight at Stop: %v, want ErrStopped", r.err)
		}
	}
	g.release() // let the blocked recorders finish, so the actors can stop
	if err := <-stopped; err != nil {
		// The actors still registered say who did not stop.
		var alive []string
		for _, b := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
			for k := range b.Items() {
				alive = append(alive, k)
			}
		}
		t.Errorf("Stop: %v; still alive: %v", err, alive)
	}
	if _, err := rt.Pass(context.Background(), orch, 0, 3); !errors.Is(err, ErrStopped) {
		t.Errorf("Pass after Stop: %v, want ErrStopped", err)
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestPassContext: an ended context runs nothing; a context that ends while
// the pass waits returns its error at once and frees the rank.
func TestPassContext(t *testing.T) {
	runs := 0
	counted := &Orchestration{Name: "counted", Run: func(stages.Submitter) error { runs++; return nil }}
	rt := newRuntime(t, Config{SkipDevice: true}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rt.Pass(ctx, counted, 0, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	if _, err := rt.Pass(context.Background(), counted, 0, 0); err != nil || runs != 1 {
		t.Fatalf("the cancelled pass ran (runs %d) or the next failed: %v", runs, err)
	}

	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			defer g.release()
			rt := newRuntime(t, Config{Recorders: 1, InFlight: 1}, g.hook)
			orch := keysModel{keys: 1, calls: 1}.orchestration("ctx-" + tc.name)
			ctx, cancel := tc.ctx()
			defer cancel()
			c := passAsync(rt, ctx, orch, 0, 0)
			g.waitEntered(t)
			if tc.want == context.Canceled {
				cancel()
			}
			if r := await(t, c); !errors.Is(r.err, tc.want) {
				t.Fatalf("got %v, want %v", r.err, tc.want)
			}
			// The rank is free: the next pass runs (its key records again,
			// or joins the recording still blocked, once released).
			next := passAsync(rt, context.Background(), orch, 0, 1)
			g.release()
			if r := await(t, next); r.err != nil {
				t.Fatalf("pass after a cancelled one: %v", r.err)
			}
		})
	}
}

// TestManyCallersOneRank: 64 concurrent passes on one rank are queued and
// all served (they once got "a pass is already running on this rank"); past
// Config.QueueDepth a pass fails at once with a RankBusyError naming the
// rank.
func TestManyCallersOneRank(t *testing.T) {
	rt := newRuntime(t, Config{}, nil)
	orch := keysModel{keys: 4, calls: 2}.orchestration("many")
	var calls []<-chan result
	for i := 0; i < 64; i++ {
		calls = append(calls, passAsync(rt, context.Background(), orch, 0, i))
	}
	for i, c := range calls {
		if r := await(t, c); r.err != nil {
			t.Fatalf("caller %d: %v", i, r.err)
		}
	}

	g := newGate()
	defer g.release()
	rt = newRuntime(t, Config{InFlight: 1, QueueDepth: 2}, g.hook)
	orch = keysModel{keys: 1, calls: 1}.orchestration("busy")
	var waiting []*Pending
	for round := 0; round < 3; round++ { // one in flight, two queued
		c, err := rt.Ask(context.Background(), orch, 3, round)
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, c)
	}
	_, err := rt.Pass(context.Background(), orch, 3, 3)
	var busy *RankBusyError
	if !errors.As(err, &busy) || busy.Rank != 3 || !errors.Is(err, ErrRankBusy) {
		t.Fatalf("want a RankBusyError for rank 3, got %v", err)
	}
	g.release()
	for _, c := range waiting {
		ctx, cancel := context.WithTimeout(context.Background(), prompt)
		if _, err := c.Wait(ctx); err != nil {
			t.Errorf("queued pass: %v", err)
		}
		cancel()
	}
}

// TestInvalidPass: mistakes in the request are errors at once.
func TestInvalidPass(t *testing.T) {
	rt := newRuntime(t, Config{}, nil)
	ok := keysModel{keys: 1, calls: 1}.orchestration("ok")
	for name, f := range map[string]func() error{
		"nil orchestration": func() error { _, err := rt.Pass(context.Background(), nil, 0, 0); return err },
		"no Run":            func() error { _, err := rt.Pass(context.Background(), &Orchestration{Name: "x"}, 0, 0); return err },
		"negative rank":     func() error { _, err := rt.Pass(context.Background(), ok, -1, 0); return err },
		"negative round":    func() error { _, err := rt.Pass(context.Background(), ok, 0, -3); return err },
	} {
		if err := f(); !errors.Is(err, ErrInvalidPass) {
			t.Errorf("%s: %v, want ErrInvalidPass", name, err)
		}
	}
}

// TestBodyGoexitOrdinary: the key whose recording exited its goroutine
// runs on the ordinary path in the next pass, where the body runs inside
// the submission's own turn; its Goexit fails that pass at once with
// ErrBodyExited (the orchestration runs on a goroutine of its own), the rank
// still serves a clean pass after it, and Stop returns. The Goexit once
// ended the submission's mailbox goroutine: the second pass waited for its
// ctx and Stop timed out.
func TestBodyGoexitOrdinary(t *testing.T) {
	exiting := func(o stages.Submitter, b *stages.Boundary) error {
		runtime.Goexit()
		return nil
	}
	sys := NewActorSystem(nil)
	defer sys.Shutdown()
	rt, err := start(sys, Config{Recorders: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	orch := keysModel{keys: 1, calls: 1, body: exiting}.orchestration("goexit")
	for round := 0; round < 3; round++ {
		if _, err := rt.Pass(ctx, orch, 0, round); !errors.Is(err, ErrBodyExited) {
			t.Fatalf("round %d: want ErrBodyExited, got %v", round, err)
		}
	}
	res, err := rt.Pass(ctx, keysModel{keys: 2, calls: 2}.orchestration("clean"), 0, 3)
	if err != nil || res.Pass.BuiltDefinitions != 2 {
		t.Fatalf("clean pass after the Goexits: %v", err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}
