// Package remote runs hbg's ranks on many machines: a node (StartNode,
// `hbgrun node`) hosts ranks in an actor system reached over protoactor
// remote, and a driver (Start, `hbgrun run --nodes`) places ranks on nodes,
// asks each rank for its passes and gathers the results. What crosses
// between them is package wire's protobuf messages: the model by content
// (its YAML and its hash), a pass as rank and round with the W3C trace
// context of the driver's span, a result as plain figures.
//
// Ranks are spawned by name at fixed addresses (remote.SpawnNamed of Kind
// on each node), not through protoactor's cluster layer: a rank lives on
// the node the driver placed it on for the whole run, so there is nothing
// for the cluster's membership, partitioning and virtual-actor activation
// to decide, and remote spawning by name is protoactor's mature part.
//
// A node is a network service, so it trusts no message for who sent it.
// Transport makes every connection mutual TLS (crypto/tls, client
// certificates required); package authn stamps each message a node receives
// with the connection it came over, and the node checks a placement against
// it (Node.authorize: its own name, the driver's host) and takes a run's
// passes only from its placing driver. Every limit a caller could abuse is
// a NodeConfig field with a default and its own error (ErrTooManyRanks,
// ErrTooManyPlacements, ErrTooManyDrivers, ErrModelTooLarge, all
// ErrLimit), answered to the driver at once.
package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/peer"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
	"github.com/hbg-dev/hbg/wire"
)

// Kind is the protoactor kind every node registers: the driver spawns one
// actor of it per run on each node it places ranks on, by name.
const Kind = "hbg.ranks"

// NodeConfig configures a node.
type NodeConfig struct {
	// Listen is the host:port the node serves on (port 0: any free port;
	// Node.Addr says which).
	Listen string
	// Advertise, if set, is the host:port other processes reach the node
	// at, when that is not Listen (a container's or a NAT's mapped
	// address): then Listen may be a wildcard.
	Advertise string
	// StoreDir and StoreMax are the node's Definition store on disk
	// (actors.Config.StoreDir, StoreMax): "" keeps Definitions in memory.
	StoreDir string
	StoreMax int64
	// MaxTasks bounds a pass of every model placed here, whatever the
	// model's max_tasks says (config.Model.LimitTasks: the node's
	// --max-tasks; 0: config.DefaultMaxTasks). A placement over it is
	// refused with ErrTooManyTasks.
	MaxTasks int64
	// MaxEdges bounds the dependency edges of a pass of every model placed
	// here (a run image, each Definition), as MaxTasks bounds its tasks
	// (config.Model.LimitEdges: the node's --max-edges; 0:
	// stages.DefaultMaxEdges). A pass past it fails with
	// stages.ErrTooManyEdges before its fanin outgrows the node's memory.
	MaxEdges int64
	// Tracer makes the node's spans (nil: none). They are children of the
	// driver's pass spans, whose context crosses with every pass.
	Tracer *trace.Tracer
	// Flush, if set, is called as each run is released, so that the run's
	// spans have left the node before the driver reports.
	Flush func(context.Context) error
	// RemoteOptions adds options to the node's protoactor remote (gRPC
	// options). protoactor's remote sets gRPC's process-wide logger as it
	// starts, so a process runs one: a node, or a driver.
	RemoteOptions []paremote.ConfigOption

	// Transport is mutual TLS for every connection (when its files are
	// set) and the largest model taken. Without TLS a node serves only
	// on loopback, unless Insecure.
	Transport Transport
	Insecure  bool
	// Rerecord checks even a well-signed image from a peer by recording
	// it here once (peer.Config.Rerecord). With TLS, the node signs what it
	// records when its certificate has the recorder role, and replays a
	// peer's image without recording it when its signature verifies
	// (package peer/defsig).
	Rerecord bool
	// Unsigned takes no Definition on a signature, with TLS too: the node
	// signs nothing and checks every fetched image by recording it, as
	// without TLS. For the local PKI (authn/pki.Local), whose certificate
	// every process of the user holds: it says which user's process a
	// connection is, not that a recorder made an image.
	Unsigned bool
	// RefuseUnsigned fails a pass whose fetched image's signature does
	// not verify instead of recording the Definition here
	// (peer.Config.RefuseUnsigned). It needs TLS.
	RefuseUnsigned bool
	// Revoked is node certificates (serial numbers, defsig.ParseSerial's
	// forms) whose Definition signatures this node refuses, besides those
	// of its cluster's deny list in etcd (Revoke), which it watches.
	// OnRevoked, if set, hears each deny list the node takes.
	Revoked   []string
	OnRevoked func(serials []string)
	// OnPeerRefused, if set, hears every peer message the node refused
	// (peer.Config.OnRefused).
	OnPeerRefused func(peer.Refused)
	// Limits, each refused with its own error (zero: the default).
	// MaxRanks bounds one placement's ranks (DefaultMaxRanks),
	// MaxPlacements the runs placed at once (DefaultMaxPlacements),
	// MaxDrivers the drivers they come from (DefaultMaxDrivers).
	MaxRanks, MaxPlacements, MaxDrivers int
	// MaxUnplaced bounds the run hosts spawned and not yet placed
	// (DefaultMaxUnplaced), a quarter of them (at least one) from one
	// connection: a spawn over it is refused (ErrTooManyUnplaced, said to
	// the driver as the activator's status), so spawning alone piles
	// nothing up on the node.
	MaxUnplaced int
	// Etcd, if set, makes the node a member of that cluster in etcd,
	// where drivers find it (Config.Etcd).
	Etcd Etcd
	// PlacementIdle releases a placed run whose driver has sent nothing
	// for that long (DefaultPlacementIdle): a driver's heartbeat comes
	// every quarter of its node timeout, at most maxBeat apart.
	PlacementIdle time.Duration
}

// Defaults of a node's limits.
const (
	DefaultMaxRanks      = 4096
	DefaultMaxPlacements = 16
	DefaultMaxDrivers    = 8
	DefaultMaxUnplaced   = 64
	DefaultPlacementIdle = 5 * time.Minute
)

// ErrTooManyUnplaced is a spawn refused over NodeConfig.MaxUnplaced.
var ErrTooManyUnplaced = errors.New("too many run hosts waiting for their placement")

// Node hosts ranks for drivers: it serves Kind over protoactor remote until
// Stop.
type Node struct {
	sys  *actor.ActorSystem
	rem  *paremote.Remote
	cfg  NodeConfig
	addr string

	mu      sync.Mutex
	hosts   map[*host]bool
	stopped bool
	// signer and verifier sign and check Definitions (nil without TLS,
	// and when Unsigned).
	signer   *defsig.Signer
	verifier *defsig.Verifier
	// placing is the placements taken or being built, by their driver's
	// address: the limits count them.
	placing map[*host]string
	// unplaced is the hosts spawned and not yet placed (by actor id), with
	// the identity of the connection that spawned each.
	unplaced map[string]string
	// cluster is the cluster in etcd the node is a member of (nil: none);
	// peers its keys' owners there (package peer's cluster owners), which
	// every placement's runtime asks.
	cluster *cluster.Cluster
	// revoked follows the cluster's deny list in etcd (nil: none).
	revoked *denyWatch
	peers   *peer.Node
}

// StartNode starts protoactor remote on sys, listening on cfg.Listen, and
// serves ranks there. sys must not run remote already.
func StartNode(sys *actor.ActorSystem, cfg NodeConfig) (*Node, error) {
	for _, l := range []struct {
		v *int
		d int
	}{{&cfg.MaxRanks, DefaultMaxRanks}, {&cfg.MaxPlacements, DefaultMaxPlacements}, {&cfg.MaxDrivers, DefaultMaxDrivers}, {&cfg.MaxUnplaced, DefaultMaxUnplaced}} {
		if *l.v < 0 {
			return nil, fmt.Errorf("node: limits %d ranks, %d placements, %d drivers: want positive numbers", cfg.MaxRanks, cfg.MaxPlacements, cfg.MaxDrivers)
		}
		if *l.v == 0 {
			*l.v = l.d
		}
	}
	if cfg.PlacementIdle <= 0 {
		cfg.PlacementIdle = DefaultPlacementIdle
	}
	if err := checkExposure(cfg.Listen, cfg.Advertise, cfg.Transport, cfg.Insecure); err != nil {
		return nil, err
	}
	if err := checkOwnName(cfg.Transport, cfg.Listen, cfg.Advertise); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n := &Node{sys: sys, cfg: cfg, hosts: map[*host]bool{}, placing: map[*host]string{}, unplaced: map[string]string{}}
	if f := cfg.Transport.TLS; f.On() && !cfg.Unsigned {
		var err error
		if n.signer, n.verifier, err = defsig.Load(f.CertFile, f.KeyFile, f.TrustedCAFile); err != nil {
			return nil, fmt.Errorf("node: signing Definitions: %w", err)
		}
		if err := n.watchRevoked(); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	} else if cfg.RefuseUnsigned || len(cfg.Revoked) > 0 {
		return nil, fmt.Errorf("node: refusing unsigned Definitions, or revoking certificates, needs TLS with a cluster CA, not the local PKI (the CA checks signatures)")
	}
	rem, err := startRemote(sys, cfg.Listen, cfg.Advertise, cfg.Transport, append(cfg.RemoteOptions, paremote.WithKinds(n.kinds()...)))
	if err != nil {
		n.stopRevoked()
		return nil, err
	}
	if cfg.Etcd.On() {
		start := func(c *cluster.Cluster) error {
			pc := n.peerConfig()
			pc.Cluster = c
			var err error
			n.peers, err = peer.Start(sys, pc)
			return err
		}
		if n.cluster, err = inCluster(sys, rem, cfg.Etcd, true, []string{peer.OwnerKind}, start); err != nil {
			if n.peers != nil {
				n.peers.Stop()
			}
			ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			defer cancel()
			_ = shutdownRemote(ctx, rem)
			n.stopRevoked()
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	n.rem, n.addr = rem, sys.Address()
	return n, nil
}

// kinds are the protoactor kinds the node registers: its ranks' host, and
// whatever else a node serves its peers.
func (n *Node) kinds() []*paremote.Kind {
	return []*paremote.Kind{
		paremote.NewKind(Kind, actor.PropsFromProducer(func() actor.Actor { return &host{n: n} }, actor.WithSpawnFunc(n.spawnHost))),
	}
}

// spawnHost spawns a run host for the activator, within MaxUnplaced: a
// remote spawn is the one thing anyone who connects may ask, and each
// host holds its actor until its placement or unplacedTimeout.
func (n *Node) spawnHost(sys *actor.ActorSystem, id string, props *actor.Props, parent actor.SpawnerContext) (*actor.PID, error) {
	who := ""
	if c, ok := parent.(actor.Context); ok {
		who = authn.Of(c).Identity()
	}
	per := max(n.cfg.MaxUnplaced/4, 1)
	n.mu.Lock()
	k := 0
	for _, w := range n.unplaced {
		if w == who {
			k++
		}
	}
	full := len(n.unplaced) >= n.cfg.MaxUnplaced || k >= per
	if !full {
		n.unplaced[id] = who
	}
	n.mu.Unlock()
	if full {
		// The activator answers the code and does not panic.
		return nil, &paremote.ActivatorError{Code: paremote.ResponseStatusCodeUNAVAILABLE.ToInt32(), DoNotPanic: true}
	}
	pid, err := actor.DefaultSpawner(sys, id, props, parent)
	if err != nil {
		n.settle(id)
	}
	return pid, err
}

// settle counts a host out of the unplaced: placed, or gone.
func (n *Node) settle(id string) {
	n.mu.Lock()
	delete(n.unplaced, id)
	n.mu.Unlock()
}

// nodeConfig is the runtime a placement's ranks run in on this node: the
// driver's options for a pass, the node's own store and tracer.
func nodeConfig(n *Node, p *wire.Place) actors.Config {
	o := p.GetOptions()
	cfg := actors.Config{
		Recorders:              int(o.GetRecorders()),
		NoRetain:               o.GetNoRetain(),
		SkipDevice:             o.GetSkipDevice(),
		FullEdges:              o.GetFullEdges(),
		KeepBytes:              o.GetKeepBytes(),
		KeepDefinitions:        int(o.GetKeepDefinitions()),
		OrdinaryWhileRecording: o.GetOrdinaryWhileRecording(),
		DefectsAsWarnings:      o.GetDefectsAsWarnings(),
		StrictRecording:        o.GetStrictRecording(),
		InFlight:               int(o.GetInFlight()),
		Golden:                 o.GetGolden(),
		PassTimeout:            time.Duration(o.GetPassTimeoutNs()),
		Device:                 npu.Config{NoRace: !o.GetRace()},
		Tracer:                 n.cfg.Tracer,
		StoreDir:               n.cfg.StoreDir,
		StoreMax:               n.cfg.StoreMax,
	}
	// A Definition is recorded once per cluster: the store asks the other
	// nodes before recording (package peer). The node's peer outlives the
	// placement's runtime; Place.Validate has checked the node index. Attach
	// fails only when the store on disk cannot be opened, which fails the
	// runtime's own start too, and says why.
	// In a cluster in etcd the owners are the cluster's, whatever the
	// placement's node list.
	if n.peers != nil {
		cfg.Peers = n.peers.Source()
	} else if nodes := p.GetNodes(); len(nodes) > 1 {
		if src, err := peer.Attach(n.sys, n.peerConfig(), n.addr, nodes); err == nil {
			cfg.Peers = src
		}
	}
	return cfg
}

// peerConfig is the node's peer (package peer), without its cluster.
func (n *Node) peerConfig() peer.Config {
	return peer.Config{StoreDir: n.cfg.StoreDir, StoreMax: n.cfg.StoreMax, Tracer: n.cfg.Tracer, Signer: n.signer, Verifier: n.verifier, Rerecord: n.cfg.Rerecord, RefuseUnsigned: n.cfg.RefuseUnsigned, OnRefused: n.cfg.OnPeerRefused}
}

// authorize checks a placement against the connection it came over: it
// must not make the node take another's name, dial a driver the
// connection does not speak for, or (without TLS, where no dial is
// verified) dial peers off this machine when the node serves only on it.
func (n *Node) authorize(c authn.Conn, sender *actor.PID, m *wire.Place) error {
	deny := func(format string, args ...any) error {
		return fmt.Errorf("node %s: run %s: %w: "+format, append([]any{n.addr, m.GetRun(), ErrUnauthorized}, args...)...)
	}
	if self := m.GetNodes()[m.GetNode()]; self != n.addr {
		return deny("the placement names this node %s, but it serves at %s (give --nodes the addresses the nodes print)", self, n.addr)
	}
	if !c.Remote() {
		return nil // from this process
	}
	drv := m.GetDriverAddress()
	if sender != nil && sender.GetAddress() != drv {
		return deny("sent from %s, for a driver at %s", sender.GetAddress(), drv)
	}
	h, _, err := net.SplitHostPort(drv)
	if err != nil {
		return deny("driver address %q: %v", drv, err)
	}
	if !c.Vouches(h) {
		if c.Authenticated() {
			return deny("the driver's certificate (%s) does not name its host %s", strings.Join(c.Names, ", "), h)
		}
		return deny("a driver at %s over a connection from %s", drv, c.Addr)
	}
	if !n.cfg.Transport.TLS.On() && !n.cfg.Insecure {
		for _, p := range m.GetNodes() {
			if ph, _, err := net.SplitHostPort(p); err != nil || !authn.Loopback(ph) {
				return deny("peer %s is off this machine, and without TLS this loopback node dials no other", p)
			}
		}
	}
	return nil
}

// maxTasks is the node's bound on a pass's device tasks.
func (n *Node) maxTasks() int64 {
	if n.cfg.MaxTasks > 0 {
		return n.cfg.MaxTasks
	}
	return config.DefaultMaxTasks
}

// maxEdges is the node's bound on a pass's dependency edges.
func (n *Node) maxEdges() int64 {
	if n.cfg.MaxEdges > 0 {
		return n.cfg.MaxEdges
	}
	return stages.DefaultMaxEdges
}

// Addr is the address the node serves on (host:port).
func (n *Node) Addr() string { return n.addr }

// Stop stops every run the node hosts (their passes in flight or queued
// fail with actors.ErrStopped, answered to their drivers), flushes their
// spans and stops serving, waiting until ctx ends.
func (n *Node) Stop(ctx context.Context) error {
	n.mu.Lock()
	n.stopped = true
	hosts := make([]*host, 0, len(n.hosts))
	for h := range n.hosts {
		hosts = append(hosts, h)
	}
	n.mu.Unlock()
	var errs []error
	for _, h := range hosts {
		errs = append(errs, h.shutdown(ctx))
	}
	if n.cfg.Flush != nil {
		errs = append(errs, n.cfg.Flush(ctx))
	}
	if n.peers != nil {
		n.peers.Stop()
	}
	if n.cluster != nil {
		// Out of etcd now, not at its lease's end: drivers hear it leave.
		errs = append(errs, n.cluster.Config.ClusterProvider.Shutdown(true))
	}
	errs = append(errs, shutdownRemote(ctx, n.rem))
	n.stopRevoked()
	return errors.Join(errs...)
}

func (n *Node) add(h *host) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return false
	}
	n.hosts[h] = true
	return true
}

func (n *Node) remove(h *host) {
	n.mu.Lock()
	delete(n.hosts, h)
	delete(n.placing, h)
	n.mu.Unlock()
}

// reserve counts a placement from driver against the node's limits
// before anything is built for it; unreserve gives it back.
func (n *Node) reserve(h *host, driver string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.placing) >= n.cfg.MaxPlacements {
		return fmt.Errorf("node %s: %w: %d runs placed already, the node's limit (--max-placements %d)", n.addr, ErrTooManyPlacements, len(n.placing), n.cfg.MaxPlacements)
	}
	drivers := map[string]bool{}
	for _, d := range n.placing {
		drivers[d] = true
	}
	if !drivers[driver] && len(drivers) >= n.cfg.MaxDrivers {
		return fmt.Errorf("node %s: %w: %d drivers have runs placed already, the node's limit (--max-drivers %d)", n.addr, ErrTooManyDrivers, len(drivers), n.cfg.MaxDrivers)
	}
	n.placing[h] = driver
	return nil
}

func (n *Node) unreserve(h *host) {
	n.mu.Lock()
	delete(n.placing, h)
	n.mu.Unlock()
}

// StartRemote starts protoactor remote on sys at listen (host:port; port
// 0: any free port), as a node and a driver do: for an embedder that runs
// one remote for several drivers (Config.Remote), or counts its traffic
// with gRPC options. A listen failure is an error, not protoactor's panic.
func StartRemote(sys *actor.ActorSystem, listen string, opts ...paremote.ConfigOption) (*paremote.Remote, error) {
	return startRemote(sys, listen, "", Transport{}, opts)
}

// StartRemoteTransport is StartRemote with a Transport: mutual TLS, the
// largest model. A driver's Config.Remote must be started with the
// driver's Transport.
func StartRemoteTransport(sys *actor.ActorSystem, listen string, t Transport, opts ...paremote.ConfigOption) (*paremote.Remote, error) {
	return startRemote(sys, listen, "", t, opts)
}

func startRemote(sys *actor.ActorSystem, listen, advertise string, t Transport, opts []paremote.ConfigOption) (rem *paremote.Remote, err error) {
	cfg, err := remoteConfig(listen, advertise, t, opts)
	if err != nil {
		return nil, err
	}
	rem = paremote.NewRemote(sys, cfg)
	// protoactor panics when it cannot listen; that is an error here.
	defer func() {
		if p := recover(); p != nil {
			rem, err = nil, fmt.Errorf("listen on %s: %v", listen, p)
		}
	}()
	rem.Start()
	return rem, nil
}

// remoteConfig is protoactor remote's configuration of a process that
// listens at listen (advertising advertise, if set) over t: what
// startRemote starts, and what a cluster member's remote starts with.
func remoteConfig(listen, advertise string, t Transport, opts []paremote.ConfigOption) (*paremote.Config, error) {
	h, port, err := splitHostPort("listen", listen, 0)
	if err != nil {
		return nil, err
	}
	topt, err := t.option()
	if err != nil {
		return nil, err
	}
	// Last: it appends to the gRPC options the others set.
	opts = append(slices.Clone(opts), topt)
	// Every PID carries the advertised address (else the listen address),
	// and peers answer there: it must be one they can reach.
	switch {
	case advertise != "":
		ah, _, err := splitHostPort("advertised", advertise, 1)
		if err != nil {
			return nil, err
		}
		if wildcard(ah) {
			return nil, fmt.Errorf("advertised address %q: want an address others can reach, not a wildcard", advertise)
		}
		opts = append(opts, paremote.WithAdvertisedHost(advertise))
	case wildcard(h):
		return nil, fmt.Errorf("listen address %q: name the address others reach this process at, not a wildcard (or advertise one)", listen)
	}
	cfg := paremote.Configure(h, port, opts...)
	// One attempt to connect, not protoactor's five two seconds apart: a
	// node that cannot be reached is reported within Config.NodeTimeout.
	cfg.MaxRetryCount = 1
	return cfg, nil
}

// splitHostPort splits a host:port whose port is at least low; what names
// the address in the error.
func splitHostPort(what, addr string, low int) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s address %q: %w (want HOST:PORT)", what, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < low || port > 65535 {
		return "", 0, fmt.Errorf("%s address %q: port %q: want %d to 65535", what, addr, p, low)
	}
	return h, port, nil
}

func wildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// shutdownRemote stops remote's server, giving up when ctx ends. Its
// peers learn it from their connections ending. Not protoactor's graceful
// shutdown: that races with its own connections' readers (a flag written
// and read without a lock) and waits up to 10 s for peers to hang up.
func shutdownRemote(ctx context.Context, rem *paremote.Remote) error {
	done := make(chan struct{})
	go func() {
		rem.Shutdown(false)
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping protoactor remote: %w", ctx.Err())
	}
}
