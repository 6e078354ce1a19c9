package remote

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	paremote "github.com/asynkron/protoactor-go/remote"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/trace"
	"github.com/hbg-dev/hbg/wire"
)

// SpanPass is the driver's span of one pass of a remote rank, a child of
// the rank's run span; the node's phase spans of the pass are its children.
const SpanPass = "hbg.remote.pass"

// KeyNode is the node (host:port) a remote pass ran on.
const KeyNode = attribute.Key("hbg.node")

// DefaultNodeTimeout is how long a node may stay silent before its passes
// fail (Config.NodeTimeout).
const DefaultNodeTimeout = 5 * time.Second

// placeTimeout bounds a node's answer to a placement: it parses the model
// and starts a runtime.
const placeTimeout = 2 * time.Minute

// Config configures a driver: the model and form its ranks run, and the
// nodes they live on.
type Config struct {
	// Nodes are the nodes' addresses (host:port); rank r lives on
	// Nodes[r % len(Nodes)]. With Etcd, they are the cluster's members
	// as Start finds them (Nodes must then be empty).
	Nodes []string
	// Etcd, if set, names the cluster in etcd whose members are the
	// nodes: the driver is the cluster's client and hears nodes join
	// (OnNodeJoined) and leave (a node lost) while it runs.
	Etcd Etcd
	// OnNodeJoined, if set, hears each node that joins the cluster after
	// Start found its members.
	OnNodeJoined func(addr string)
	// OnRanksMoved, if set, hears the ranks of a lost node of the
	// cluster placed again on a node that joined (to), or that could not
	// be (err): their passes waited, and then went there or failed.
	OnRanksMoved func(from, to string, ranks []int, err error)
	// OnNodeLeft, if set, hears each node that leaves the cluster (it
	// stopped, or died and its lease ended), whether it held ranks of
	// this run or not; one that did is lost too (OnNodeLost).
	OnNodeLeft func(addr string)
	// Ranks is how many ranks the run has.
	Ranks int
	// Model is the model's YAML, sent by content; ModelName names it in
	// messages (its file name); Form is the form the ranks run.
	ModelName string
	Model     []byte
	Form      string
	// MaxTasks, when positive, bounds the driver's pass of the model
	// (config.Model.LimitTasks: the driver's --max-tasks); each node has
	// its own (NodeConfig.MaxTasks).
	MaxTasks int64
	// MaxEdges, when positive, bounds the dependency edges of the driver's
	// pass of the model (the driver's --max-edges); each node has its own
	// (NodeConfig.MaxEdges).
	MaxEdges int64
	// Runtime is the nodes' runtime options: Recorders, NoRetain,
	// SkipDevice, DefectsAsWarnings, StrictRecording, InFlight, Golden,
	// Device.NoRace and PassTimeout cross to every node; Tracer makes the
	// driver's run spans. The store on disk is each node's own (its
	// --store); the rest of actors.Config does not cross.
	Runtime actors.Config
	// TracerProvider makes the driver's pass spans (nil: none).
	TracerProvider oteltrace.TracerProvider
	// NodeTimeout bounds how long a node may be unreachable or silent
	// before its ranks' passes fail with a *NodeError (default
	// DefaultNodeTimeout).
	NodeTimeout time.Duration
	// Listen is the driver's own address, which nodes answer to (default:
	// the address this machine reaches the first node from, any port).
	// Unused with Remote.
	Listen string
	// Advertise, if set, is the host:port nodes reach the driver at, when
	// that is not Listen (as NodeConfig.Advertise).
	Advertise string
	// OnNodeLost, if set, is called once per node lost, as soon as it is
	// (from whichever goroutine found it), before its passes fail. A node
	// lost while Start places the ranks is Start's error instead.
	OnNodeLost func(*NodeError)
	// Remote, if set, is protoactor remote already running on sys (an
	// embedder's): the driver uses it and leaves it running at Stop.
	// Otherwise Start starts remote on sys at Listen, with RemoteOptions
	// (gRPC options), and Stop stops it. protoactor's remote sets gRPC's
	// process-wide logger as it starts, so a process runs one.
	Remote        *paremote.Remote
	RemoteOptions []paremote.ConfigOption
	// Transport is the driver's mutual TLS (its certificate, key and the
	// authority that signs the nodes') and the largest model it sends. A
	// Remote given must have been started with it (StartRemoteTransport).
	Transport Transport

	// dropped, in tests, hears every answer to a pass given up on.
	dropped func(*wire.PassResult)
}

// Runtime is a driver: ranks that live on nodes, with the shape of
// actors.Runtime (Pass, Run, Stop), so an embedder can swap one for the
// other. Its orchestration is the model it placed (Orchestration), sent
// by content: Pass takes that orchestration and refuses any other.
type Runtime struct {
	sys    *actor.ActorSystem
	rem    *paremote.Remote
	cfg    Config
	orch   *actors.Orchestration
	tracer *trace.Tracer
	otel   oteltrace.Tracer
	run    string
	client *actor.PID
	sub    *eventstream.Subscription
	nodes  []*nodeState
	// cluster is the cluster in etcd the nodes are members of (nil: a
	// static list).
	cluster *cluster.Cluster
	// base is the nodes Start placed on: rank r's is nodes[r % base],
	// unless it was placed again (moved, under mu); the nodes past base
	// are slots for those placed again.
	base  int
	moved map[int]int
	// joined are the nodes that joined the cluster while the run ran.
	joined []string

	mu      sync.Mutex
	pending map[uint64]*pending
	nextSeq uint64

	stopped  chan struct{}
	stopOnce sync.Once
	caller   actors.PassCaller // the caller side of every pass (remotePasses)
	// placed is set when Start has placed every rank: a node lost before
	// that is Start's error, said once, not also OnNodeLost's.
	placed   atomic.Bool
	beats    sync.WaitGroup
	warnings []string

	// Wire counts the passes' messages over the wire.
	Wire WireStats
}

// WireStats count the messages of passes between a driver and its nodes
// (PassRequest out, PassResult in) and their encoded sizes.
type WireStats struct {
	Sent, Received           atomic.Int64
	SentBytes, ReceivedBytes atomic.Int64
	// Cancels counts the passes given up on that their node was told to
	// end; Ended, those of them whose node answered that it ended them.
	Cancels, Ended atomic.Int64
	// Forged counts the results refused because they did not carry the
	// token of the node their pass was sent to.
	Forged atomic.Int64
}

type nodeState struct {
	addr  string
	pid   *actor.PID
	ranks []int
	lost  *NodeError // under Runtime.mu
	// gone is closed when the node is lost: a placement waiting for its
	// answer ends then.
	gone chan struct{}
	// token is this run's placement's on the node (wire.Place.Token):
	// only the node has it, so an answer with it is the node's.
	token []byte
	// moving says the node is lost and its ranks are being placed again
	// (under Runtime.mu): their passes wait.
	moving bool
}

// pending is a pass asked of a node and not yet answered.
type pending struct {
	seq               uint64
	rank, round, node int
	reply             chan *actors.PassResult
	span              oteltrace.Span
}

// Start places cfg.Ranks ranks round robin on cfg.Nodes and returns when
// every node has them ready. It starts protoactor remote on sys (which
// must not run remote already). A node that cannot be reached within
// NodeTimeout fails Start with a *NodeError.
func Start(sys *actor.ActorSystem, cfg Config) (*Runtime, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	model, err := config.Parse(cfg.ModelName, cfg.Model)
	if err != nil {
		return nil, err
	}
	model.LimitTasks(cfg.MaxTasks)
	model.LimitEdges(cfg.MaxEdges)
	orch, err := model.Orchestration(cfg.Form)
	if err != nil {
		return nil, err
	}
	// With a cluster in etcd the nodes are known only once the driver is
	// its client, which needs the driver's remote running: started first.
	var (
		rem *paremote.Remote
		cl  *cluster.Cluster
	)
	undo := func() {
		if cl != nil {
			_ = cl.Config.ClusterProvider.Shutdown(false)
		}
		if rem != nil && cfg.Remote == nil {
			ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			defer cancel()
			_ = shutdownRemote(ctx, rem)
		}
	}
	if cfg.Etcd.On() {
		if rem, err = driverRemote(sys, &cfg); err != nil {
			return nil, err
		}
		if cl, err = inCluster(sys, rem, cfg.Etcd, false, nil, nil); err != nil {
			undo()
			return nil, fmt.Errorf("remote: %w", err)
		}
		if cfg.Nodes = providerOf(cl).addrs(); len(cfg.Nodes) == 0 {
			undo()
			return nil, fmt.Errorf("remote: cluster %s in etcd %v: %w (is a node started with the same --etcd-endpoints and --cluster?)", cfg.Etcd.name(), cfg.Etcd.Endpoints, ErrNoMembers)
		}
	}
	if err := probeAll(cfg); err != nil {
		undo()
		return nil, err
	}
	if rem == nil {
		if rem, err = driverRemote(sys, &cfg); err != nil {
			return nil, err
		}
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	rt := &Runtime{
		sys: sys, rem: rem, cfg: cfg, orch: orch, tracer: cfg.Runtime.Tracer, cluster: cl,
		otel: tp.Tracer("github.com/hbg-dev/hbg/remote"), run: newRunID(),
		pending: map[uint64]*pending{}, stopped: make(chan struct{}),
	}
	if rt.tracer == nil {
		rt.tracer = trace.NewTracer(tp)
	}
	rt.caller = actors.PassCaller{Transport: remotePasses{rt}, Timeout: cfg.Runtime.PassTimeout, Stopped: rt.stopped}
	for _, a := range cfg.Nodes {
		rt.nodes = append(rt.nodes, &nodeState{addr: a, gone: make(chan struct{}), token: newToken()})
	}
	rt.base = len(rt.nodes)
	if cl != nil {
		// A node of a cluster that is lost has its ranks placed again on
		// one that joined (replace): each takes one of these slots, made
		// now so that rt.nodes never grows under its readers.
		for range cfg.Nodes {
			rt.nodes = append(rt.nodes, &nodeState{gone: make(chan struct{}), token: newToken()})
		}
	}
	for r := 0; r < cfg.Ranks; r++ {
		ns := rt.nodes[r%rt.base]
		ns.ranks = append(ns.ranks, r)
	}
	rt.client = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &client{rt: rt} }))
	rt.sub = sys.EventStream.Subscribe(rt.event)
	errs := make([]error, len(rt.nodes))
	var wg sync.WaitGroup
	for i, ns := range rt.nodes {
		if len(ns.ranks) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = rt.place(i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_ = rt.Stop(ctx)
		return nil, err
	}
	rt.placed.Store(true)
	if f := rt.cfg.OnNodeLost; f != nil {
		// Lost after its own placement, while another node's went on.
		for _, ns := range rt.nodes {
			rt.mu.Lock()
			lost := ns.lost
			rt.mu.Unlock()
			if lost != nil {
				f(lost)
			}
		}
	}
	for i, ns := range rt.nodes[:rt.base] {
		// The slots past base beat from their placement (replace).
		rt.mu.Lock()
		placed := ns.pid != nil
		rt.mu.Unlock()
		if placed {
			rt.beats.Add(1)
			go rt.heartbeat(i)
		}
	}
	return rt, nil
}

// check refuses a Config Start cannot run (its defaults filled in).
func (cfg *Config) check() error {
	switch {
	case len(cfg.Nodes) > 0 && cfg.Etcd.On():
		return errors.New("remote: nodes given both as a list and as a cluster in etcd: want one")
	case len(cfg.Nodes) == 0 && !cfg.Etcd.On():
		return errors.New("remote: no nodes")
	case cfg.Ranks < 1:
		return fmt.Errorf("remote: %d ranks: want at least 1", cfg.Ranks)
	case cfg.NodeTimeout < 0:
		return fmt.Errorf("remote: node timeout %v: want a positive duration", cfg.NodeTimeout)
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = DefaultNodeTimeout
	}
	cfg.Runtime.EnsureDefaults()
	if err := cfg.Runtime.Validate(); err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	if n, max := len(cfg.Model), cfg.Transport.maxModel(); n > max {
		// gRPC would refuse the placement and end the connection: said
		// now, with the sizes, not as a node lost.
		return fmt.Errorf("remote: model %s: %w: %d bytes, over the %d-byte limit of what a placement carries (--max-model)", cfg.ModelName, ErrModelTooLarge, n, max)
	}
	return nil
}

// Orchestration is the orchestration the ranks run: the model's form, as
// the driver parsed it (its Name is its identity, the same on every node).
func (rt *Runtime) Orchestration() *actors.Orchestration { return rt.orch }

// Node is the address of the node rank lives on.
func (rt *Runtime) Node(rank int) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.nodes[rt.route(rank)].addr
}

// Warnings are what the nodes reported as their runs were released (store
// writes that failed, spans not flushed); read them after Stop returned.
func (rt *Runtime) Warnings() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.warnings)
}

// Pass runs one pass of orch on a rank and waits for its result, as
// actors.Runtime.Pass does. orch must be the placed model's
// (Orchestration; its Name is checked): the nodes run the model they were
// sent. A pass of a rank whose node is lost fails with a *NodeError
// (errors.Is(err, ErrNodeLost)).
func (rt *Runtime) Pass(ctx context.Context, orch *actors.Orchestration, rank, round int) (*actors.PassResult, error) {
	return rt.caller.Pass(ctx, orch, rank, round)
}

// remotePasses is the driver as the one caller side of a pass
// (actors.PassCaller) sees it: a pass goes to its rank's node.
type remotePasses struct{ rt *Runtime }

func (r remotePasses) CheckPass(orch *actors.Orchestration, rank, round int) error {
	rt := r.rt
	switch {
	case orch.Name != rt.orch.Name:
		return fmt.Errorf("rank %d round %d: %w: orchestration %q, but the nodes run %q", rank, round, actors.ErrInvalidPass, orch.Name, rt.orch.Name)
	case rank >= rt.cfg.Ranks:
		return fmt.Errorf("rank %d round %d: %w: ranks are 0 to %d", rank, round, actors.ErrInvalidPass, rt.cfg.Ranks-1)
	}
	return nil
}

func (r remotePasses) SendPass(ctx context.Context, orch *actors.Orchestration, rank, round int) (actors.PassTicket, error) {
	rt := r.rt
	rt.mu.Lock()
	i := rt.route(rank)
	ns := rt.nodes[i]
	addr := ns.addr
	rt.mu.Unlock()
	sctx, span := rt.otel.Start(ctx, SpanPass, oteltrace.WithAttributes(
		trace.KeyRank.Int(rank), trace.KeyRound.Int(round), trace.KeyCold.Bool(round == 0), KeyNode.String(addr)))
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(sctx, carrier)
	p := &pending{rank: rank, round: round, node: i, reply: make(chan *actors.PassResult, 1), span: span}
	rt.mu.Lock()
	if i != rt.route(rank) {
		// Placed again meanwhile.
		i = rt.route(rank)
		ns, p.node = rt.nodes[i], i
	}
	if ns.lost != nil && !ns.moving {
		err := ns.lost.forPass(rank, round)
		rt.mu.Unlock()
		endSpan(span, err)
		return nil, err
	}
	rt.nextSeq++
	p.seq = rt.nextSeq
	rt.pending[p.seq] = p
	if ns.moving {
		// Its ranks are being placed again: replace sends it.
		rt.mu.Unlock()
		return &remoteTicket{rt: rt, p: p}, nil
	}
	rt.mu.Unlock()
	req := &wire.PassRequest{Run: rt.run, Seq: p.seq, Rank: int32(rank), Round: int32(round), Trace: carrier}
	rt.Wire.Sent.Add(1)
	rt.Wire.SentBytes.Add(int64(proto.Size(req)))
	rt.sys.Root.Send(ns.pid, req)
	return &remoteTicket{rt: rt, p: p}, nil
}

// remoteTicket is one pass sent to a node.
type remoteTicket struct {
	rt *Runtime
	p  *pending
}

func (t *remoteTicket) Reply() <-chan *actors.PassResult { return t.p.reply }

func (t *remoteTicket) Answered(res *actors.PassResult) { endSpan(t.p.span, res.Err) }

// GiveUp tells the node to end the pass; its answer, if it comes, is
// dropped (deliver), so nothing here says when the node let it go.
func (t *remoteTicket) GiveUp(err error) <-chan *actors.PassResult {
	rt, p := t.rt, t.p
	rt.mu.Lock()
	_, open := rt.pending[p.seq]
	delete(rt.pending, p.seq)
	pid := rt.nodes[p.node].pid
	rt.mu.Unlock()
	if open && pid != nil && !errors.Is(err, actors.ErrStopped) {
		rt.Wire.Cancels.Add(1)
		rt.sys.Root.Send(pid, &wire.CancelPass{Run: rt.run, Seq: p.seq, Reason: err.Error()})
	}
	endSpan(p.span, err)
	return nil
}

// endSpan ends a pass's span, failed with err if there is one.
func endSpan(span oteltrace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// deliver hands a node's answer to the pass waiting for it.
func (rt *Runtime) deliver(m *wire.PassResult) {
	rt.Wire.Received.Add(1)
	rt.Wire.ReceivedBytes.Add(int64(proto.Size(m)))
	rt.mu.Lock()
	p := rt.pending[m.GetSeq()]
	if p != nil && m.GetRun() == rt.run && subtle.ConstantTimeCompare(m.GetToken(), rt.nodes[p.node].token) != 1 {
		// Not from the node the pass was sent to (another node of the
		// run knows the run id and the seqs; only this one the token):
		// refused, and the pass waits for its node's answer.
		rt.mu.Unlock()
		rt.Wire.Forged.Add(1)
		return
	}
	if p != nil && m.GetRun() == rt.run {
		delete(rt.pending, m.GetSeq())
	} else {
		p = nil
	}
	rt.mu.Unlock()
	if p == nil {
		// A pass given up on, or not this run's.
		if m.GetRun() == rt.run {
			if m.GetFailure().GetKind() == wire.Failure_CANCELED {
				rt.Wire.Ended.Add(1)
			}
			if f := rt.cfg.dropped; f != nil {
				f(m)
			}
		}
		return
	}
	addr := rt.nodes[p.node].addr
	res, err := m.ToResult()
	switch {
	case err == nil && (res.Pass.Rank != p.rank || res.Pass.Round != p.round):
		err = fmt.Errorf("%w: the answer is rank %d round %d's", wire.ErrBadMessage, res.Pass.Rank, res.Pass.Round)
	case err == nil && errors.Is(res.Err, actors.ErrStopped):
		// The node is stopping (SIGTERM): lost to this run, as if it died.
		rt.nodeLost(p.node, fmt.Sprintf("it is stopping (%v)", res.Err))
		rt.mu.Lock()
		lost := rt.nodes[p.node].lost
		rt.mu.Unlock()
		if lost != nil {
			res.Err = lost.forPass(p.rank, p.round)
		} else {
			res.Err = fmt.Errorf("node %s: %w", addr, res.Err)
		}
	case err == nil && res.Err != nil:
		res.Err = fmt.Errorf("node %s: %w", addr, res.Err)
	}
	if err != nil {
		res = &actors.PassResult{Pass: trace.NewPass(p.rank, p.round),
			Err: fmt.Errorf("rank %d round %d: the result from node %s was refused: %w", p.rank, p.round, addr, err)}
	}
	p.reply <- res
}

// nodeLost fails every pass of node i's ranks now and later with a
// *NodeError naming the node, its ranks and cause.
func (rt *Runtime) nodeLost(i int, cause string) {
	select {
	case <-rt.stopped:
		return // released: its silence is expected
	default:
	}
	rt.mu.Lock()
	ns := rt.nodes[i]
	if ns.lost != nil {
		rt.mu.Unlock()
		return
	}
	ns.lost = &NodeError{Node: ns.addr, Ranks: ns.ranks, Rank: -1, Round: -1, Cause: cause}
	close(ns.gone)
	j := -1
	if rt.placed.Load() {
		j = rt.spareFor(i)
	}
	var ps []*pending
	for seq, p := range rt.pending {
		if p.node == i && j < 0 {
			ps = append(ps, p)
			delete(rt.pending, seq)
		}
	}
	lost := ns.lost
	rt.mu.Unlock()
	if f := rt.cfg.OnNodeLost; f != nil && rt.placed.Load() {
		f(lost)
	}
	if j >= 0 {
		// Its passes wait for the ranks' new node.
		go rt.replace(i, j)
		return
	}
	for _, p := range ps {
		p.reply <- &actors.PassResult{Pass: trace.NewPass(p.rank, p.round), Err: lost.forPass(p.rank, p.round)}
	}
}

// lostAddr loses the node at addr (as dialled, or as its PIDs name it);
// cause says why, for a node placed already or not.
func (rt *Runtime) lostAddr(addr string, cause func(placed bool) string) {
	for i, ns := range rt.nodes {
		rt.mu.Lock()
		match := ns.addr != "" && (ns.addr == addr || (ns.pid != nil && ns.pid.GetAddress() == addr))
		placed := ns.pid != nil
		rt.mu.Unlock()
		if match {
			rt.nodeLost(i, cause(placed))
		}
	}
}

// Run runs every rank concurrently, each its rounds in order with up to
// Config.Runtime.InFlight passes asked for, in the run window
// actors.Runtime.Run uses (actors.RunWindow): a rank that fails does not
// stop the others, and the error joins the failed ranks' errors.
func (rt *Runtime) Run(ctx context.Context, spec actors.RunSpec) ([]*actors.PassResult, error) {
	if spec.Rounds < 1 || spec.Ranks < 1 || spec.Ranks > rt.cfg.Ranks {
		return nil, fmt.Errorf("rounds %d and ranks %d: want at least 1 of each, and at most the %d ranks placed", spec.Rounds, spec.Ranks, rt.cfg.Ranks)
	}
	return actors.RunWindow(ctx, rt, rt.tracer, rt.cfg.Runtime.InFlight, spec)
}

// AskPass implements actors.PassAsker: the pass is sent to its rank's node
// at once, and waited for later (or dropped: its node is told to end it,
// and its answer, if it comes, is dropped).
func (rt *Runtime) AskPass(ctx context.Context, orch *actors.Orchestration, rank, round int) (actors.AskedPass, error) {
	return rt.caller.Ask(ctx, orch, rank, round)
}

// Stop fails every pass in flight with actors.ErrStopped, releases the
// run on every node (each stops its ranks and flushes their spans), and
// stops the driver's remote, waiting until ctx ends. Safe to call more
// than once.
func (rt *Runtime) Stop(ctx context.Context) error {
	first := false
	rt.stopOnce.Do(func() { close(rt.stopped); first = true })
	if !first {
		return nil
	}
	rt.mu.Lock()
	ps := rt.pending
	rt.pending = map[uint64]*pending{}
	rt.mu.Unlock()
	for _, p := range ps {
		p.reply <- &actors.PassResult{Pass: trace.NewPass(p.rank, p.round), Err: fmt.Errorf("rank %d round %d: %w", p.rank, p.round, actors.ErrStopped)}
	}
	rt.beats.Wait()
	var wg sync.WaitGroup
	for _, ns := range rt.nodes {
		rt.mu.Lock()
		pid, lost := ns.pid, ns.lost != nil
		rt.mu.Unlock()
		if pid == nil || lost {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := rt.sys.Root.RequestFuture(pid, &wire.Release{Run: rt.run}, releaseTimeout+time.Second).Result()
			rt.mu.Lock()
			defer rt.mu.Unlock()
			if err != nil {
				rt.warnings = append(rt.warnings, fmt.Sprintf("node %s: releasing the run: %v", ns.addr, err))
			} else if rel, ok := res.(*wire.Released); ok {
				rt.warnings = append(rt.warnings, rel.GetWarnings()...)
			}
		}()
	}
	released := make(chan struct{})
	go func() { wg.Wait(); close(released) }()
	var err error
	select {
	case <-released:
	case <-ctx.Done():
		err = fmt.Errorf("releasing the run on its nodes: %w", ctx.Err())
	}
	rt.mu.Lock()
	slices.Sort(rt.warnings)
	rt.mu.Unlock()
	rt.sys.EventStream.Unsubscribe(rt.sub)
	rt.sys.Root.Stop(rt.client)
	if rt.cluster != nil {
		// A client registered nothing: this ends its watch of etcd.
		err = errors.Join(err, rt.cluster.Config.ClusterProvider.Shutdown(false))
	}
	if rt.cfg.Remote != nil {
		return err
	}
	return errors.Join(err, shutdownRemote(ctx, rt.rem))
}
