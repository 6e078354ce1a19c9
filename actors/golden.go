package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/npu"
)

// The golden check (ARCHITECTURE §4) is package golden's, a pure function
// of an orchestration; this is its shell: the reference is made once per
// orchestration on a goroutine of its own, because it runs the caller's
// code, and a pass waits for it as for anything else, until its ctx,
// Config.PassTimeout or Stop.

// ErrReferenceExited marks a golden reference whose orchestration or body
// never returned: it called runtime.Goexit (as t.Fatal does), which ended
// the goroutine that computed the reference. Each pass of the
// orchestration fails with it.
var ErrReferenceExited = errors.New("golden reference: the orchestration exited its goroutine (runtime.Goexit) instead of returning")

// checkGolden fills a pass's golden check, with Config.Golden. The
// reference is made by then: the pass was sent only after it was.
func (rt *Runtime) checkGolden(orch *Orchestration, res *PassResult) {
	if !rt.cfg.Golden || res.Err != nil || res.Device == nil {
		return
	}
	e := rt.golden.start(orch, rt.cfg.Device)
	<-e.done
	if e.err != nil {
		res.Err = e.err
		return
	}
	// The source map numbers tasks as a clean pass does: a pass whose call
	// took the ordinary path numbers them otherwise.
	if len(res.Device.Races) > 0 && res.Counts.BoundaryMismatches == 0 && res.Counts.FallbackCalls == 0 && res.Counts.OrdinaryWhileRecording == 0 {
		e.source().NameRaces(res.Device.Races)
	}
	res.Golden = e.ref.CompareBarriered(res.Device, res.Counts.Barriers)
}

// reference waits for orch's golden reference, started the first time a
// pass of orch is asked for. The reference runs the caller's orchestration
// and bodies, which may block, so the wait ends with ctx, Stop or
// Config.PassTimeout like any pass's; the reference goes on and is there
// for the next pass that asks, once the caller's code returns.
func (rt *Runtime) reference(ctx context.Context, orch *Orchestration, rank, round int) error {
	e := rt.golden.start(orch, rt.cfg.Device)
	select {
	case <-e.done:
		return nil // an error is the pass's: checkGolden reports it
	default:
	}
	// The wait is the trace's: without its span, a run's first pass starts
	// after a blank stretch as long as the reference took.
	span := rt.tracer.StartGoldenReference(ctx, orch.Name, rank, round)
	defer span.End()
	t := time.NewTimer(rt.cfg.PassTimeout)
	defer t.Stop()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rank %d round %d: golden reference of %q: %w", rank, round, orch.Name, ctx.Err())
	case <-t.C:
		return fmt.Errorf("rank %d round %d: golden reference of %q: not made after %v (Config.PassTimeout): %w", rank, round, orch.Name, rt.cfg.PassTimeout, context.DeadlineExceeded)
	case <-rt.stopped:
		return fmt.Errorf("rank %d round %d: %w", rank, round, ErrStopped)
	}
}

// goldenCache computes each orchestration's reference once (its Name and
// Step are its identity), each in a goroutine of its own.
type goldenCache struct {
	mu   sync.Mutex
	refs map[string]*goldenEntry
}

type goldenEntry struct {
	done chan struct{} // closed when ref or err is set
	ref  *golden.Reference
	err  error
	// source names the ops of the form's tasks, made the first time a
	// pass races: a clean run never pays for it.
	source func() *golden.Source
}

// start gives orch's entry, starting its computation if none has.
func (c *goldenCache) start(orch *Orchestration, cfg npu.Config) *goldenEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == nil {
		c.refs = map[string]*goldenEntry{}
	}
	// A round of a program whose steps change is its own reference.
	name := orch.Name + "\x00" + orch.Step
	e := c.refs[name]
	if e == nil {
		e = &goldenEntry{done: make(chan struct{}), source: sync.OnceValue(func() *golden.Source { return golden.SourceOf(orch) })}
		c.refs[name] = e
		go func() {
			returned := false
			// Deferred, so that a Goexit in the caller's code, which ends
			// this goroutine, still ends every wait for the reference.
			defer func() {
				if !returned {
					e.err = fmt.Errorf("golden reference of %q: %w", orch.Name, ErrReferenceExited)
				}
				close(e.done)
			}()
			e.ref, e.err = golden.Compute(orch, cfg)
			returned = true
		}()
	}
	return e
}
