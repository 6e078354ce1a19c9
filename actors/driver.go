package actors

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/hbg-dev/hbg/trace"
)

// RunSpec is a whole run: rounds passes on each of ranks ranks.
type RunSpec struct {
	Orchestration *Orchestration
	Rounds        int
	Ranks         int
	// Info names the run in its spans.
	Info trace.RunInfo
	// OnPass, if set, is called after every pass (from the rank's
	// goroutine), e.g. to advance a progress bar.
	OnPass func(*PassResult)
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
	out := make([]*PassResult, spec.Rounds*spec.Ranks)
	g, gctx := errgroup.WithContext(ctx)
	for rank := 0; rank < spec.Ranks; rank++ {
		g.Go(func() error {
			rctx, span := rt.tracer.StartRun(gctx, spec.Info, rank)
			defer span.End()
			var window []*call
			// On the way out, wait for what is still asked for, so no pass
			// outlives Run.
			defer func() {
				for _, c := range window {
					rt.sys.Root.Send(c.sub, &cancelPass{id: c.req.id, err: context.Canceled})
					select {
					case <-c.req.reply:
					case <-rt.stopped:
					}
				}
			}()
			asked := 0
			for round := 0; round < spec.Rounds; round++ {
				for asked < spec.Rounds && len(window) < rt.cfg.InFlight {
					c, err := rt.submit(rctx, spec.Orchestration, rank, asked)
					if err != nil {
						span.Fail(err)
						return err
					}
					window = append(window, c)
					asked++
				}
				c := window[0]
				window = window[1:]
				res, err := rt.wait(gctx, c)
				if res != nil {
					out[rank*spec.Rounds+round] = res
					if spec.OnPass != nil {
						spec.OnPass(res)
					}
				}
				if err != nil {
					span.Fail(err)
					return fmt.Errorf("rank %d round %d: %w", rank, round, err)
				}
			}
			return nil
		})
	}
	err := g.Wait()
	return out, err
}
