package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hbg-dev/hbg/trace"
)

// RunSpec is a whole run: rounds passes on each of ranks ranks.
type RunSpec struct {
	Orchestration *Orchestration
	Rounds        int
	Ranks         int
	// Info names the run in its spans.
	Info trace.RunInfo
	// OnPass, if set, is called after every pass that came back with a
	// result, its error (a golden mismatch, say) included (from the rank's
	// goroutine), e.g. to advance a progress bar.
	OnPass func(*PassResult)
}

// PassAsker asks for passes without waiting for them: the run window
// (RunWindow) drives one. Runtime implements it, and so does a driver of
// ranks on other nodes (package remote).
type PassAsker interface {
	AskPass(ctx context.Context, orch *Orchestration, rank, round int) (AskedPass, error)
}

// AskedPass is a pass asked for and not yet waited for.
type AskedPass interface {
	// Wait waits for the pass's result, as Runtime.Pass does.
	Wait(ctx context.Context) (*PassResult, error)
	// Drop gives the pass up and returns once its rank has let it go.
	Drop()
}

// AskPass implements PassAsker (Runtime.Ask).
func (rt *Runtime) AskPass(ctx context.Context, orch *Orchestration, rank, round int) (AskedPass, error) {
	return rt.Ask(ctx, orch, rank, round)
}

// Run runs every rank concurrently, each its rounds in order, and returns
// the passes rank by rank, round by round. Each rank has its own submission
// actor and device; the Definition store and the recorders are shared, so a
// key recorded for one rank is replayed by the others. A rank keeps
// Config.InFlight passes asked for, so its host orchestrates round r+1
// while its device runs round r.
func (rt *Runtime) Run(ctx context.Context, spec RunSpec) ([]*PassResult, error) {
	if spec.Rounds < 1 || spec.Ranks < 1 {
		return nil, fmt.Errorf("rounds %d and ranks %d: want at least 1 of each", spec.Rounds, spec.Ranks)
	}
	return RunWindow(ctx, rt, rt.tracer, rt.cfg.InFlight, spec)
}

// RunWindow is the one run window of local and remote runs: every rank at
// once, each with inFlight passes asked for ahead of the one it waits for.
// A rank that fails stops, dropping what it still has asked for (no pass
// outlives the run), and the others go on to their end: on a cluster, the
// ranks of the nodes that live complete. The error joins the failed ranks'
// errors, each naming its rank and round. out holds every result that came
// back, failed ones included, each given to spec.OnPass as it comes.
func RunWindow(ctx context.Context, a PassAsker, tracer *trace.Tracer, inFlight int, spec RunSpec) ([]*PassResult, error) {
	out := make([]*PassResult, spec.Rounds*spec.Ranks)
	errs := make([]error, spec.Ranks)
	var wg sync.WaitGroup
	for rank := 0; rank < spec.Ranks; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, span := tracer.StartRun(ctx, spec.Info, rank)
			defer span.End()
			errs[rank] = runRank(ctx, rctx, a, inFlight, spec, rank, out[rank*spec.Rounds:(rank+1)*spec.Rounds])
			span.Fail(errs[rank])
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// runRank runs one rank's rounds: passes are asked for under rctx (the
// rank's run span) and waited for under ctx.
func runRank(ctx, rctx context.Context, a PassAsker, inFlight int, spec RunSpec, rank int, out []*PassResult) error {
	var window []AskedPass
	defer func() {
		for _, p := range window {
			p.Drop()
		}
	}()
	asked := 0
	for round := 0; round < spec.Rounds; round++ {
		for asked < spec.Rounds && len(window) < inFlight {
			p, err := a.AskPass(rctx, spec.Orchestration, rank, asked)
			if err != nil {
				return err
			}
			window = append(window, p)
			asked++
		}
		p := window[0]
		window = window[1:]
		res, err := p.Wait(ctx)
		if res != nil {
			out[round] = res
			if spec.OnPass != nil {
				spec.OnPass(res)
			}
			if err != nil {
				// The pass's own error: the waiter's name their pass.
				return fmt.Errorf("rank %d round %d: %w", rank, round, err)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
