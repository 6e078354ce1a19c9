package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	paremote "github.com/asynkron/protoactor-go/remote"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Etcd names a cluster whose membership is kept in etcd, through
// protoactor's cluster and its etcd provider: a node is a cluster member
// (its address under a lease it keeps alive: a node that dies leaves when
// the lease ends), a driver a cluster client that reads the members and
// hears them join and leave (cluster.ClusterTopology). The TLS files are
// etcd's own (its client certificate and CA), not the nodes' transport.
type Etcd struct {
	// Endpoints are etcd's client URLs (https://HOST:PORT, or HOST:PORT).
	Endpoints []string
	// CACert verifies etcd's server certificate; Cert and Key are this
	// process's client certificate for etcd (etcd's --client-cert-auth).
	CACert, Cert, Key string
	// Cluster names the cluster (DefaultCluster): the members of one name
	// are one cluster, whatever else shares the etcd.
	Cluster string
	// DialTimeout bounds connecting to etcd (DefaultEtcdDialTimeout).
	DialTimeout time.Duration
	// LeaseTTL is a member's lease (DefaultLeaseTTL): a node that dies
	// leaves the cluster that long after its last keep-alive.
	LeaseTTL time.Duration
}

// DefaultLeaseTTL is a member's lease in etcd.
const DefaultLeaseTTL = 5 * time.Second

// DefaultCluster is a cluster's name when Etcd.Cluster is "".
const DefaultCluster = "hbg"

// DefaultEtcdDialTimeout bounds connecting to etcd.
const DefaultEtcdDialTimeout = 5 * time.Second

// etcdBaseKey is where in etcd hbg's clusters keep their members:
// etcdBaseKey/CLUSTER/MEMBER.
const etcdBaseKey = "/hbg"

// ErrEtcdUnreachable is a cluster whose etcd did not answer.
var ErrEtcdUnreachable = errors.New("etcd did not answer")

// ErrNoMembers is a driver's cluster that has no node in it.
var ErrNoMembers = errors.New("no node is a member of the cluster")

// On says whether a cluster in etcd is named.
func (e Etcd) On() bool { return len(e.Endpoints) > 0 }

func (e Etcd) name() string {
	if e.Cluster == "" {
		return DefaultCluster
	}
	return e.Cluster
}

// Check says what is wrong with e, for flags.
func (e Etcd) Check() error {
	if !e.On() {
		if e.CACert != "" || e.Cert != "" || e.Key != "" || e.Cluster != "" {
			return errors.New("etcd's TLS files and cluster name need etcd's endpoints")
		}
		return nil
	}
	if (e.Cert == "") != (e.Key == "") {
		return fmt.Errorf("etcd client certificate %q and key %q: want both or neither", e.Cert, e.Key)
	}
	for _, ep := range e.Endpoints {
		if _, err := endpointHost(ep); err != nil {
			return err
		}
	}
	_, err := e.tls()
	return err
}

// tls is the client TLS for etcd (nil: plain connections).
func (e Etcd) tls() (*tls.Config, error) {
	if e.CACert == "" && e.Cert == "" {
		return nil, nil
	}
	c, err := transport.TLSInfo{CertFile: e.Cert, KeyFile: e.Key, TrustedCAFile: e.CACert}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS (cert %q, key %q, CA %q): %w", e.Cert, e.Key, e.CACert, err)
	}
	return c, nil
}

// endpointHost is an endpoint's host, for the address this machine
// reaches the cluster from.
func endpointHost(ep string) (string, error) {
	hostport := ep
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		hostport = u.Host
	}
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("etcd endpoint %q: %w (want https://HOST:PORT or HOST:PORT)", ep, err)
	}
	return h, nil
}

// provider is hbg's etcd provider (etcdProvider) over a client of e,
// once etcd has answered.
func (e Etcd) provider(kinds []string) (*etcdProvider, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	ttl := e.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	p := newEtcdProvider(c, e.name(), ttl)
	p.kinds = kinds
	return p, nil
}

// dialTimeout is e's DialTimeout or its default.
func (e Etcd) dialTimeout() time.Duration {
	if e.DialTimeout <= 0 {
		return DefaultEtcdDialTimeout
	}
	return e.DialTimeout
}

// client is a client of e's etcd, once etcd has answered.
func (e Etcd) client() (*clientv3.Client, error) {
	tc, err := e.tls()
	if err != nil {
		return nil, err
	}
	d := e.dialTimeout()
	// etcd's client logs through zap: a line per connection state is
	// noise in a node's stderr; its errors come back as errors.
	cc := clientv3.Config{Endpoints: e.Endpoints, TLS: tc, DialTimeout: d, Logger: zap.NewNop()}
	c, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", e.Endpoints, err)
	}
	// etcd's requests retry a refused certificate for ever: a cluster that
	// cannot be reached is said now, with etcd's reason.
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if _, err := c.Get(ctx, etcdBaseKey, clientv3.WithCountOnly()); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("etcd %v: %w: %v (its endpoints, --etcd-cacert, --etcd-cert and --etcd-key)", e.Endpoints, ErrEtcdUnreachable, err)
	}
	return c, nil
}

// inCluster makes sys's running remote rem part of e's cluster through
// protoactor's cluster: the provider says who joined and left
// (cluster.ClusterTopology on sys's event stream) and ends the endpoint of
// a member that left. A member (a node) is registered in etcd; a client
// (a driver) only watches. Neither starts the cluster's gossip or its
// identity lookup (Cluster.StartMember, which also starts a remote of its
// own): protoactor's gossip reads the member list without its lock, which
// races with every topology change (go test -race); disthash's lookup
// does too (owner.go in package peer), and hbg places its ranks itself.
// A member serves kinds (peer.OwnerKind: its keys' owners, placed by
// package peer's lookup over the cluster's topology); ready, if set, runs
// before the provider starts (a node's peer, to hear the first topology).
func inCluster(sys *actor.ActorSystem, rem *paremote.Remote, e Etcd, member bool, kinds []string, ready func(*cluster.Cluster) error) (*cluster.Cluster, error) {
	prov, err := e.provider(kinds)
	if err != nil {
		return nil, err
	}
	// The configuration's remote is never started: rem runs already.
	c := cluster.New(sys, cluster.Configure(e.name(), prov, disthash.New(), paremote.Configure("nonhost", 0)))
	// The running remote, for whatever of the cluster reaches it.
	c.Remote = rem
	if ready != nil {
		if err := ready(c); err != nil {
			_ = prov.Shutdown(false)
			return nil, err
		}
	}
	start := prov.StartClient
	if member {
		start = prov.StartMember
	}
	if err := start(c); err != nil {
		_ = prov.Shutdown(false)
		return nil, fmt.Errorf("cluster %s in etcd %v: %w", e.name(), e.Endpoints, err)
	}
	return c, nil
}

// providerOf is c's provider (inCluster's).
func providerOf(c *cluster.Cluster) *etcdProvider {
	return c.Config.ClusterProvider.(*etcdProvider)
}

// memberAddrs are the cluster's members' addresses, sorted.
func memberAddrs(ms cluster.Members) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Address())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// driverRemote is the driver's remote: the embedder's (Config.Remote), or
// one started at cfg.Listen (default: the address this machine reaches
// the first node, or etcd, from).
func driverRemote(sys *actor.ActorSystem, cfg *Config) (*paremote.Remote, error) {
	if cfg.Remote != nil {
		return cfg.Remote, nil
	}
	if cfg.Listen == "" {
		toward := ""
		if len(cfg.Nodes) > 0 {
			toward = cfg.Nodes[0]
		} else if h, err := endpointHost(cfg.Etcd.Endpoints[0]); err == nil {
			toward = net.JoinHostPort(h, "2379")
		}
		cfg.Listen = net.JoinHostPort(localHostFor(toward), "0")
	}
	if err := checkOwnName(cfg.Transport, cfg.Listen, cfg.Advertise); err != nil {
		return nil, fmt.Errorf("remote: driver: %w", err)
	}
	rem, err := startRemote(sys, cfg.Listen, cfg.Advertise, cfg.Transport, cfg.RemoteOptions)
	if err != nil {
		return nil, fmt.Errorf("remote: driver: %w", err)
	}
	return rem, nil
}

// topology hears the cluster's members change: a node that joins is
// noted (Joined, OnNodeJoined); one that leaves is lost, through the
// endpoint the provider ends for it (left says why).
func (rt *Runtime) topology(t *cluster.ClusterTopology) {
	if rt.cluster == nil {
		return
	}
	for _, m := range t.GetJoined() {
		addr := m.Address()
		rt.mu.Lock()
		known := slices.Contains(rt.joined, addr) || slices.ContainsFunc(rt.nodes, func(ns *nodeState) bool { return ns.addr == addr })
		if !known {
			rt.joined = append(rt.joined, addr)
		}
		rt.mu.Unlock()
		if f := rt.cfg.OnNodeJoined; f != nil && !known {
			f(addr)
		}
	}
	for _, m := range t.GetLeft() {
		if f := rt.cfg.OnNodeLeft; f != nil {
			f(m.Address())
		}
	}
}

// left says whether the node at addr is no longer a member of the
// driver's cluster.
func (rt *Runtime) left(addr string) bool {
	if rt.cluster == nil {
		return false
	}
	return !slices.Contains(providerOf(rt.cluster).addrs(), addr)
}

// Joined are the nodes that joined the driver's cluster after Start found
// its members, in the order they joined.
func (rt *Runtime) Joined() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.joined)
}

// reach asks etcd for nothing within timeout: the provider's own requests
// have no deadline (a refused certificate retries for ever), so a cluster
// that cannot be reached is said here, with etcd's reason.
func reach(cc clientv3.Config, timeout time.Duration) error {
	c, err := clientv3.New(cc)
	if err != nil {
		return fmt.Errorf("etcd %v: %w", cc.Endpoints, err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := c.Get(ctx, etcdBaseKey, clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd %v: %w: %v (its endpoints, --etcd-cacert, --etcd-cert and --etcd-key)", cc.Endpoints, ErrEtcdUnreachable, err)
	}
	return nil
}
