package actors

import (
	"context"
	"fmt"
	"time"
)

// PassTransport is where a caller's passes run, as the one caller side of
// a pass (PassCaller) sees it: this process's ranks (Runtime) or ranks on
// other nodes over the wire (package remote's driver). The caller checks
// what every pass must be and waits for the answer; the transport only
// carries the pass there and lets it go when the caller gives up.
type PassTransport interface {
	// CheckPass refuses what this transport cannot run, beyond what every
	// pass is checked for (an orchestration with a Run function, a rank and
	// a round not negative): an error wraps ErrInvalidPass.
	CheckPass(orch *Orchestration, rank, round int) error
	// SendPass sends one pass, checked, with ctx's span as its parent. Its
	// answer (one, at most) comes on the ticket's Reply.
	SendPass(ctx context.Context, orch *Orchestration, rank, round int) (PassTicket, error)
}

// PassTicket is one pass a transport sent.
type PassTicket interface {
	// Reply is where the pass's answer comes (buffered; written once).
	Reply() <-chan *PassResult
	// Answered says the caller has the pass's answer, before it returns
	// it (a transport's checks of a result, its span's end).
	Answered(res *PassResult)
	// GiveUp says the caller gave up on the pass with err (its ctx, the
	// pass timeout, the transport's stop, or a Drop): the rank lets it go.
	// It returns a channel closed or written once the rank has let it go,
	// or nil when the transport cannot know that.
	GiveUp(err error) <-chan *PassResult
}

// PassCaller is the caller side of a pass, one for the local runtime and the
// remote driver (they once had a copy each, and had drifted: only one
// waited on its stop). A wait ends with the first of: the pass's answer,
// the caller's ctx, Timeout, or Stopped closing; on any but the answer,
// the rank is told to let the pass go, and the error names the rank and
// round and wraps ctx.Err(), context.DeadlineExceeded or ErrStopped.
type PassCaller struct {
	Transport PassTransport
	// Timeout bounds each wait (Config.PassTimeout).
	Timeout time.Duration
	// Stopped closes when the transport stops: every wait ends with
	// ErrStopped, and no pass is sent after.
	Stopped <-chan struct{}
}

// CalledPass is a pass sent and not yet waited for (AskedPass).
type CalledPass struct {
	c           *PassCaller
	t           PassTicket
	rank, round int
}

// Ask checks a pass and sends it; the caller waits for it with Wait, or
// gives it up with Drop. Every CalledPass must be one or the other.
func (c *PassCaller) Ask(ctx context.Context, orch *Orchestration, rank, round int) (*CalledPass, error) {
	switch {
	case orch == nil:
		return nil, fmt.Errorf("rank %d round %d: %w: nil orchestration", rank, round, ErrInvalidPass)
	case orch.Run == nil:
		return nil, fmt.Errorf("rank %d round %d: %w: orchestration %q has no Run function", rank, round, ErrInvalidPass, orch.Name)
	case rank < 0:
		return nil, fmt.Errorf("rank %d round %d: %w: negative rank", rank, round, ErrInvalidPass)
	case round < 0:
		return nil, fmt.Errorf("rank %d round %d: %w: negative round", rank, round, ErrInvalidPass)
	}
	if err := c.Transport.CheckPass(orch, rank, round); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rank %d round %d: %w", rank, round, err)
	}
	select {
	case <-c.Stopped:
		return nil, fmt.Errorf("rank %d round %d: %w", rank, round, ErrStopped)
	default:
	}
	t, err := c.Transport.SendPass(ctx, orch, rank, round)
	if err != nil {
		return nil, err
	}
	return &CalledPass{c: c, t: t, rank: rank, round: round}, nil
}

// Pass sends a pass and waits for it.
func (c *PassCaller) Pass(ctx context.Context, orch *Orchestration, rank, round int) (*PassResult, error) {
	p, err := c.Ask(ctx, orch, rank, round)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Wait waits for the pass's answer; a pass's own error is also res.Err.
func (p *CalledPass) Wait(ctx context.Context) (*PassResult, error) {
	c := p.c
	t := time.NewTimer(c.Timeout)
	defer t.Stop()
	var err error
	select {
	case res := <-p.t.Reply():
		p.t.Answered(res)
		return res, res.Err
	case <-ctx.Done():
		err = fmt.Errorf("rank %d round %d: %w", p.rank, p.round, ctx.Err())
	case <-t.C:
		err = fmt.Errorf("rank %d round %d: no result after %v (Config.PassTimeout): %w", p.rank, p.round, c.Timeout, context.DeadlineExceeded)
	case <-c.Stopped:
		err = fmt.Errorf("rank %d round %d: %w", p.rank, p.round, ErrStopped)
	}
	p.t.GiveUp(err)
	return nil, err
}

// Drop gives the pass up and returns once its rank has let it go (or the
// transport stopped, or it cannot say).
func (p *CalledPass) Drop() {
	if let := p.t.GiveUp(fmt.Errorf("rank %d round %d: dropped: %w", p.rank, p.round, context.Canceled)); let != nil {
		select {
		case <-let:
		case <-p.c.Stopped:
		}
	}
}
