package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/propagation"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
	"github.com/hbg-dev/hbg/wire"
)

// releaseTimeout bounds how long a released run may take to stop its ranks
// and flush its spans.
const releaseTimeout = 10 * time.Second

// host is one run's ranks on a node, an actor of Kind: it is placed
// (wire.Place: the model, the options, its ranks), runs passes
// (wire.PassRequest) and answers each with a wire.PassResult to the
// driver, until released (wire.Release) or its driver is gone.
//
// A rank's passes are asked of the runtime in the order they arrive, by
// one goroutine per rank (so the host's mailbox never waits on a pass),
// and answered as each ends.
type host struct {
	n      *Node
	run    string
	driver *actor.PID
	rt     *actors.Runtime
	orch   *actors.Orchestration
	ranks  map[int32]chan queuedPass
	// conn is the connection the placement came over: the run's passes,
	// cancels and release must come over it.
	conn authn.Conn
	// token is the placement's (wire.Place.Token), in every answer.
	token []byte
	// heard is when the driver last sent anything (the actor's own).
	heard time.Time

	// passes are the passes accepted and not yet answered, by the
	// driver's seq: a CancelPass ends one.
	mu     sync.Mutex
	passes map[uint64]context.CancelCauseFunc

	done     chan struct{} // closed by shutdown: the rank loops end
	loops    sync.WaitGroup
	waiters  sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// unplacedTimeout is how long a host may wait for its placement: a driver
// sends it as soon as the spawn is answered, so a minute is the transfer
// of the largest model over a slow link.
const unplacedTimeout = time.Minute

// idleCheck is the host's tick to release a placement whose driver fell
// silent (NodeConfig.PlacementIdle).
type idleCheck struct{}

type unplaced struct{}

// rankQueue bounds the passes of one rank waiting to be asked for; past
// it a pass is refused with actors.ErrRankBusy (the runtime's own queue
// is behind it).
const rankQueue = 4096

func (h *host) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.Place:
		placed := &wire.Placed{Run: m.GetRun(), Node: h.n.addr, Ranks: m.GetRanks()}
		err := h.place(ctx, m)
		if err != nil {
			placed.Failure = wire.FailureOf(err)
		}
		ctx.Respond(placed)
		if err != nil && h.rt == nil {
			// Nothing placed: the actor holds nothing worth keeping.
			ctx.Stop(ctx.Self())
		}
		if err == nil {
			h.n.settle(ctx.Self().Id)
			h.heard = time.Now()
			h.tickIdle(ctx)
		}
	case *wire.PassRequest, *wire.CancelPass, *wire.Ping, *wire.Release:
		if h.rt == nil || !sameDriver(h.conn, authn.Of(ctx)) {
			// Not the placing driver's: dropped unanswered (an answer
			// would go to the driver, who did not ask).
			return
		}
		h.heard = time.Now()
		h.driverMessage(ctx)
	case idleCheck:
		if h.rt == nil || h.stopping() {
			return
		}
		if time.Since(h.heard) < h.n.cfg.PlacementIdle {
			h.tickIdle(ctx)
			return
		}
		// The driver has sent nothing, not even its heartbeat: its slot
		// goes back to the node.
		sctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		_ = h.shutdown(sctx)
		cancel()
		ctx.Stop(ctx.Self())
	case *actor.Terminated:
		// Only the driver's own end releases the run: a Terminated from
		// the wire names whom it likes (a peer node of the run could name
		// itself), so it must be for the driver this host watches and
		// come from this process (protoactor's endpoint watcher, when the
		// driver's connection ends) or over the driver's own connection.
		if h.rt == nil || !sameActor(m.GetWho(), h.driver) {
			return
		}
		if c := authn.Of(ctx); c.Remote() && !sameDriver(h.conn, c) {
			return
		}
		// The driver is gone: nobody will read these ranks' results.
		sctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		_ = h.shutdown(sctx)
		cancel()
		ctx.Stop(ctx.Self())
	case *actor.Started:
		// A host spawned and never placed holds no run: it goes, so that
		// spawning alone piles nothing up on the node.
		self, root := ctx.Self(), ctx.ActorSystem().Root
		time.AfterFunc(unplacedTimeout, func() { root.Send(self, unplaced{}) })
	case unplaced:
		if h.rt == nil {
			ctx.Stop(ctx.Self())
		}
	case *actor.Stopping:
		h.n.settle(ctx.Self().Id)
		sctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		_ = h.shutdown(sctx)
		cancel()
	}
}

// sameDriver says whether a message came over the connection the run was
// placed over (its remote address, port and all, and its certificate's
// names), or both from this process. Not merely the same host: another
// process there (a peer node of the run, which knows the run id) would
// pass. A driver does not reconnect to a node it placed on: a connection
// that ends loses the node to its run.
func sameDriver(placed, c authn.Conn) bool {
	return placed.Addr == c.Addr && slices.Equal(placed.Names, c.Names)
}

// sameActor says whether two PIDs name one actor.
func sameActor(a, b *actor.PID) bool {
	return a != nil && b != nil && a.GetAddress() == b.GetAddress() && a.GetId() == b.GetId()
}

// tickIdle asks for the next idle check a quarter of PlacementIdle on.
func (h *host) tickIdle(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(h.n.cfg.PlacementIdle/4, func() { root.Send(self, idleCheck{}) })
}

// driverMessage is a message of the placing driver's.
func (h *host) driverMessage(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.PassRequest:
		h.pass(m)
	case *wire.CancelPass:
		h.mu.Lock()
		cancel := h.passes[m.GetSeq()]
		h.mu.Unlock()
		if cancel != nil && m.GetRun() == h.run {
			cancel(fmt.Errorf("%w: its driver gave up on it: %s", context.Canceled, m.GetReason()))
		}
	case *wire.Ping:
		ctx.Respond(&wire.Pong{Seq: m.GetSeq(), Node: h.n.addr, Token: h.token})
	case *wire.Release:
		rel := &wire.Released{Run: h.run}
		// The store's writes first: a stopped runtime has no writer to ask.
		for _, err := range h.flushStore() {
			rel.Warnings = append(rel.Warnings, fmt.Sprintf("node %s: %v", h.n.addr, err))
		}
		sctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		err := h.shutdown(sctx)
		if f := h.n.cfg.Flush; f != nil {
			err = errors.Join(err, f(sctx))
		}
		cancel()
		if err != nil {
			rel.Warnings = append(rel.Warnings, fmt.Sprintf("node %s: %v", h.n.addr, err))
		}
		ctx.Respond(rel)
		ctx.Stop(ctx.Self())
	}
}

// place builds the run's runtime from a validated placement: the model
// must hash to the hash sent, and parse.
func (h *host) place(ctx actor.Context, m *wire.Place) error {
	if h.rt != nil {
		return fmt.Errorf("run %s: placed twice on node %s", h.run, h.n.addr)
	}
	if err := m.Validate(); err != nil {
		return err
	}
	conn := authn.Of(ctx)
	if err := h.n.authorize(conn, ctx.Sender(), m); err != nil {
		return err
	}
	cfg := h.n.cfg
	if n := len(m.GetRanks()); n > cfg.MaxRanks {
		return fmt.Errorf("node %s: %w: %d ranks, over the node's limit of %d (--max-ranks)", h.n.addr, ErrTooManyRanks, n, cfg.MaxRanks)
	}
	if n, max := len(m.GetModelYaml()), cfg.Transport.maxModel(); n > max {
		return fmt.Errorf("node %s: model %s: %w: %d bytes, over the node's limit of %d (--max-model)", h.n.addr, m.GetModelName(), ErrModelTooLarge, n, max)
	}
	if err := h.n.reserve(h, m.GetDriverAddress()); err != nil {
		return err
	}
	built := false
	defer func() {
		if !built {
			h.n.unreserve(h)
		}
	}()
	model, err := config.Parse(m.GetModelName(), m.GetModelYaml())
	if err != nil {
		return fmt.Errorf("node %s: %w", h.n.addr, err)
	}
	// The node's bound, not the model's: a placed model's max_tasks is
	// the sender's word, and a pass of 10^9 tasks costs the node its
	// memory (every run on it), so it is refused here, before any pass.
	limit := h.n.maxTasks()
	if own := model.MaxTasks(); own < limit {
		limit = own
	}
	model.LimitTasks(limit)
	edges := h.n.maxEdges()
	if own := model.MaxEdges(); own < edges {
		edges = own
	}
	model.LimitEdges(edges)
	orch, err := model.Orchestration(m.GetForm())
	if err != nil {
		return fmt.Errorf("node %s: %w", h.n.addr, err)
	}
	// Size stops counting past limit, naming the op where it crossed.
	switch n, err := model.Size(m.GetForm(), limit); {
	case n > limit && err != nil:
		return fmt.Errorf("node %s: model %s form %s: %w: more than %d tasks per pass, the node's limit (--max-tasks): %v", h.n.addr, m.GetModelName(), m.GetForm(), ErrTooManyTasks, limit, err)
	case n > limit:
		return fmt.Errorf("node %s: model %s form %s: %w: more than %d tasks per pass, the node's limit (--max-tasks)", h.n.addr, m.GetModelName(), m.GetForm(), ErrTooManyTasks, limit)
	case err != nil:
		return fmt.Errorf("node %s: %w", h.n.addr, err)
	}
	// The pass's edges are counted by expanding it on the host, bounded
	// by the node's own bound, before any runtime is built for it.
	if _, err := config.ValidateForm(model, m.GetForm()); errors.Is(err, stages.ErrTooManyEdges) {
		return fmt.Errorf("node %s: model %s form %s: %w: %w (the node's limit: --max-edges)", h.n.addr, m.GetModelName(), m.GetForm(), ErrTooManyEdges, err)
	}
	rt, err := actors.Start(ctx.ActorSystem(), nodeConfig(h.n, m))
	if err != nil {
		return fmt.Errorf("node %s: %w", h.n.addr, err)
	}
	built = true
	h.conn, h.token = conn, m.GetToken()
	h.run, h.orch, h.rt = m.GetRun(), orch, rt
	h.driver = actor.NewPID(m.GetDriverAddress(), m.GetDriverId())
	h.done = make(chan struct{})
	h.ranks = map[int32]chan queuedPass{}
	h.passes = map[uint64]context.CancelCauseFunc{}
	for _, r := range m.GetRanks() {
		ch := make(chan queuedPass, rankQueue)
		h.ranks[r] = ch
		h.loops.Add(1)
		go h.rankLoop(int(r), ch)
	}
	// Registered with every field set: Node.Stop may shut it down from
	// another goroutine from now on.
	if !h.n.add(h) {
		_ = h.shutdown(context.Background())
		return fmt.Errorf("node %s: %w", h.n.addr, actors.ErrStopped)
	}
	ctx.Watch(h.driver)
	return nil
}

func (h *host) pass(m *wire.PassRequest) {
	fail := func(err error) {
		h.reply(m, &actors.PassResult{Pass: trace.NewPass(int(m.GetRank()), int(m.GetRound())), Err: err})
	}
	if err := m.Validate(); err != nil {
		fail(err)
		return
	}
	if h.stopping() {
		fail(fmt.Errorf("rank %d round %d on node %s: %w", m.GetRank(), m.GetRound(), h.n.addr, actors.ErrStopped))
		return
	}
	ch, ok := h.ranks[m.GetRank()]
	if !ok {
		fail(fmt.Errorf("rank %d round %d: %w: rank not placed on node %s", m.GetRank(), m.GetRound(), actors.ErrInvalidPass, h.n.addr))
		return
	}
	// The pass's spans are children of the driver's pass span.
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(m.GetTrace()))
	ctx, cancel := context.WithCancelCause(ctx)
	select {
	case ch <- queuedPass{m, ctx}:
		h.mu.Lock()
		h.passes[m.GetSeq()] = cancel
		h.mu.Unlock()
	default:
		cancel(nil)
		fail(&actors.RankBusyError{Rank: int(m.GetRank()), Round: int(m.GetRound()), Queued: rankQueue})
	}
}

// queuedPass is a pass accepted for a rank, with the context that ends it.
type queuedPass struct {
	m   *wire.PassRequest
	ctx context.Context
}

// rankLoop asks the runtime for one rank's passes in order, and answers
// each as it ends.
func (h *host) rankLoop(rank int, ch chan queuedPass) {
	defer h.loops.Done()
	for {
		select {
		case <-h.done:
			return
		case a := <-ch:
			m := a.m
			p, err := h.rt.Ask(a.ctx, h.orch, rank, int(m.GetRound()))
			if err != nil {
				h.reply(m, &actors.PassResult{Pass: trace.NewPass(rank, int(m.GetRound())), Err: err})
				continue
			}
			h.waiters.Add(1)
			go func() {
				defer h.waiters.Done()
				res, err := p.Wait(a.ctx)
				if res == nil {
					res = &actors.PassResult{Pass: trace.NewPass(rank, int(m.GetRound())), Err: err}
				}
				h.reply(m, res)
			}()
		}
	}
}

func (h *host) reply(m *wire.PassRequest, res *actors.PassResult) {
	h.mu.Lock()
	if cancel := h.passes[m.GetSeq()]; cancel != nil {
		delete(h.passes, m.GetSeq())
		cancel(nil)
	}
	h.mu.Unlock()
	out := wire.FromResult(res)
	out.Run, out.Seq, out.Node, out.Token = m.GetRun(), m.GetSeq(), h.n.addr, h.token
	if res.Pass.Rank != int(m.GetRank()) || res.Pass.Round != int(m.GetRound()) {
		out.Rank, out.Round = m.GetRank(), m.GetRound()
	}
	h.n.sys.Root.Send(h.driver, out)
}

// shutdown stops the run's ranks: passes in flight or queued fail with
// actors.ErrStopped and are answered. Safe to call more than once and from
// any goroutine.
func (h *host) shutdown(ctx context.Context) error {
	h.stopOnce.Do(func() {
		if h.rt == nil {
			return
		}
		close(h.done)
		// The loops end before the waiters are counted out: no pass is
		// asked for after this.
		h.loops.Wait()
		h.stopErr = h.rt.Stop(ctx)
		waited := make(chan struct{})
		go func() { h.waiters.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-ctx.Done():
			h.stopErr = errors.Join(h.stopErr, fmt.Errorf("run %s: passes still answering: %w", h.run, ctx.Err()))
		}
		h.n.remove(h)
	})
	return h.stopErr
}

func (h *host) stopping() bool {
	if h.done == nil {
		return false
	}
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// flushStore is the run's store writes that failed.
func (h *host) flushStore() []error {
	if h.rt == nil {
		return nil
	}
	return h.rt.FlushStore()
}
