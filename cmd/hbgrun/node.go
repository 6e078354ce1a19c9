package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/attribute"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/authn/pki"
	"github.com/hbg-dev/hbg/config/models"
	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/peer"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/remote"
	"github.com/hbg-dev/hbg/trace"
)

// nodeStopTimeout bounds a node's stop: its runs' passes fail and are
// answered, their spans flushed.
const nodeStopTimeout = 15 * time.Second

type nodeFlags struct {
	listen                                        string
	advertise                                     string
	otlp                                          string
	store                                         storeFlags
	tls                                           tlsFlags
	insecure                                      bool
	rerecord, refuseUnsigned                      bool
	revoked                                       string
	maxRanks, maxPlacements, maxDrivers, maxConns int
	maxConnsPerPeer, maxUnplaced                  int
	idleTimeout, placementIdle                    time.Duration
	maxModel                                      string
	etcd                                          etcdFlags
}

// tlsFlags are mutual TLS's files, with etcd's flag names, and the local
// PKI that stands in for them on loopback.
type tlsFlags struct {
	files            authn.Files
	pkiDir           string
	insecureLoopback bool
	// local is the local PKI's directory, when files are its (resolve).
	local string
}

// register adds the flags; pre says when they apply ("" or "with --nodes: ").
func (f *tlsFlags) register(fl *pflag.FlagSet, pre, who string) {
	fl.StringVar(&f.files.CertFile, "cert-file", "", pre+"mutual TLS: "+who+" certificate (PEM); with --key-file and --trusted-ca-file, every connection is TLS and needs a certificate the CA signed")
	fl.StringVar(&f.files.KeyFile, "key-file", "", pre+"mutual TLS: the key of --cert-file (PEM)")
	fl.StringVar(&f.files.TrustedCAFile, "trusted-ca-file", "", pre+"mutual TLS: the certificate authority (PEM) that signs every driver's and node's certificate")
	fl.StringVar(&f.pkiDir, "pki-dir", "", pre+"the local PKI's directory (default $"+pki.DirEnv+", else hbg/pki in the user's configuration directory): without --cert-file, on loopback, mutual TLS with its certificates, made there on first use")
	fl.BoolVar(&f.insecureLoopback, "insecure-loopback", false, pre+"on loopback without --cert-file, no TLS instead of the local PKI's: every process of the machine that reaches the port is served")
}

func (f *tlsFlags) check() error {
	if err := f.files.Check(); err != nil {
		return usageError{err}
	}
	if f.files.On() {
		if f.insecureLoopback || f.pkiDir != "" {
			return usageError{fmt.Errorf("--cert-file with --insecure-loopback or --pki-dir: want one (the files given, the local PKI, or no TLS on loopback)")}
		}
		if _, _, err := f.files.Configs(); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// resolve gives the local PKI's files when no TLS files are given, TLS is
// not declined (--insecure-loopback), and every address of addrs (HOST:PORT,
// "" skipped) is loopback: there every process of this user's holds them
// and no other user's can (the PKI is private to the user), so TLS keeps
// other users' processes and readers of loopback traffic out. Elsewhere
// nothing changes: a node without TLS beyond loopback is refused.
func (f *tlsFlags) resolve(addrs ...string) error {
	if f.files.On() || f.insecureLoopback {
		return nil
	}
	var hosts []string
	for _, a := range addrs {
		if a == "" {
			continue
		}
		h, _, err := net.SplitHostPort(a)
		if err != nil || !authn.Loopback(h) {
			return nil
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil
	}
	for _, h := range hosts {
		if !pki.LoopbackNames().Has(h) {
			// Every peer verifies the host it dials by the certificate.
			return usageError{fmt.Errorf("%s: the local PKI's certificate names 127.0.0.1, ::1 and localhost only: use one of them (or --cert-file with a certificate naming %s, or --insecure-loopback: no TLS)", h, h)}
		}
	}
	dir := f.pkiDir
	if dir == "" {
		var err error
		if dir, err = pki.DefaultDir(); err != nil {
			return usageError{err}
		}
	}
	p, err := pki.Local(dir)
	if err != nil {
		return usageError{fmt.Errorf("%w (or --insecure-loopback: no TLS)", err)}
	}
	f.files = authn.Files{CertFile: p.CertFile, KeyFile: p.KeyFile, TrustedCAFile: p.CAFile}
	f.local = dir
	return nil
}

func init() {
	var f nodeFlags
	c := &cobra.Command{
		Use:   "node --listen HOST:PORT",
		Short: "Host ranks for drivers (hbgrun run --nodes) over protoactor remote, until stopped",
		Long: `Serve ranks at HOST:PORT: a driver (hbgrun run MODEL --nodes HOST:PORT,...)
places some of its ranks here, and each rank's actors (submission, replay,
uploader, device) run in this process beside its Definition store (--store,
as for run) and recorder pool. The node prints "hbgrun node: listening on
HOST:PORT" on stderr once it serves, and runs until SIGINT or SIGTERM: then
its passes in flight fail (their drivers are told), its spans are flushed,
and it exits 0.

With --cert-file, --key-file and --trusted-ca-file every connection (from
drivers, to and from the other nodes) is mutual TLS, and only a process with
a certificate the CA signed is served. Without them, on loopback, it is
mutual TLS with the user's local PKI (--pki-dir, made on first use, private
to the user: a driver of the same user, on loopback too, uses it by itself),
so no other user's process is served; --insecure-loopback serves there
without TLS, with a warning. Beyond loopback a node without TLS refuses to
start (--insecure: serve so anyway). Each --max-*
limit is refused to the driver at once, by name. A placed model's own
max_tasks never lifts the node's --max-tasks (4194304 when not given).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return nodeCmd(c.Context(), c.ErrOrStderr(), &f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.listen, "listen", "", "the address to serve ranks on, HOST:PORT (the address drivers and other nodes reach this one at, unless --advertise)")
	fl.StringVar(&f.advertise, "advertise", "", "the address drivers and other nodes reach this one at, HOST:PORT, when it is not --listen's (a container's or NAT's mapped address); --listen may then be a wildcard")
	fl.StringVar(&f.otlp, "otlp", "", "export spans over OTLP to ENDPOINT (grpc://host:4317 or http://host:4318); default: the OTEL_EXPORTER_OTLP_* variables, else nowhere")
	f.store.register(fl)
	f.tls.register(fl, "", "this node's")
	fl.BoolVar(&f.insecure, "insecure", false, "serve without TLS on an address other machines reach (anyone who reaches it can place runs and write Definitions)")
	fl.BoolVar(&f.rerecord, "rerecord-signed", false, "record here once, to check it, even a Definition another node sent signed by a recorder of the cluster's CA (without TLS, and with the local PKI on loopback, every fetched Definition is checked so)")
	fl.BoolVar(&f.refuseUnsigned, "refuse-unsigned", false, "fail a pass whose Definition another node sent without a signature this node verifies (a stranger's, a revoked or expired certificate's, none), instead of recording it here; needs TLS")
	fl.StringVar(&f.revoked, "revoked", "", "refuse the Definition signatures of the node certificates whose serials this file lists, one a line (read at start; with --etcd-endpoints the cluster's deny list, hbgrun cluster revoke, is followed as well)")
	fl.IntVar(&f.maxRanks, "max-ranks", remote.DefaultMaxRanks, "refuse a placement of more ranks than this")
	fl.IntVar(&f.maxPlacements, "max-placements", remote.DefaultMaxPlacements, "refuse a placement while this many runs are placed here")
	fl.IntVar(&f.maxDrivers, "max-drivers", remote.DefaultMaxDrivers, "refuse a placement from a new driver while this many drivers have runs placed here")
	fl.StringVar(&f.maxModel, "max-model", "64MiB", "refuse a placement whose model is larger than this")
	fl.IntVar(&f.maxConns, "max-conns", remote.DefaultMaxConns, "close a connection at once while this many are open (drivers and peers hold one each; one that sends nothing is closed after 10s)")
	fl.IntVar(&f.maxConnsPerPeer, "max-conns-per-peer", remote.DefaultMaxConnsPerPeer, "close a connection at once while this many are open from its IP address")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", remote.DefaultIdleTimeout, "close a connection that holds no message stream for this long")
	fl.IntVar(&f.maxUnplaced, "max-unplaced", remote.DefaultMaxUnplaced, "refuse to spawn a run host while this many wait for their placement (a quarter of them from one connection)")
	fl.DurationVar(&f.placementIdle, "placement-idle", remote.DefaultPlacementIdle, "release a placed run whose driver has sent nothing (not even its heartbeat) for this long")
	f.etcd.register(fl, "join the cluster whose membership is")
	addMaxTasks(c)
	commands = append(commands, c)
}

func nodeCmd(ctx context.Context, stderr io.Writer, f *nodeFlags) error {
	if f.listen == "" {
		return usageError{fmt.Errorf("node: --listen HOST:PORT is required")}
	}
	if err := checkListen("--listen", f.listen, "--advertise", f.advertise); err != nil {
		return err
	}
	if err := f.store.resolve(); err != nil {
		return err
	}
	if err := f.tls.check(); err != nil {
		return err
	}
	if err := f.tls.resolve(f.listen, f.advertise); err != nil {
		return err
	}
	if err := f.etcd.check(); err != nil {
		return err
	}
	var revoked []string
	if f.revoked != "" || f.refuseUnsigned {
		if !f.tls.files.On() {
			return usageError{fmt.Errorf("--revoked and --refuse-unsigned: need --cert-file, --key-file and --trusted-ca-file (signatures are checked against the cluster's CA)")}
		}
	}
	if f.revoked != "" {
		var err error
		if revoked, err = defsig.ReadDenyList(f.revoked); err != nil {
			return usageError{fmt.Errorf("--revoked: %w", err)}
		}
	}
	maxModel, err := diskstore.ParseSize(f.maxModel)
	if err != nil || maxModel > 1<<30 {
		return usageError{fmt.Errorf("--max-model %q: want a size up to 1GiB", f.maxModel)}
	}
	for _, l := range []struct {
		flag string
		v    int
	}{{"--max-ranks", f.maxRanks}, {"--max-placements", f.maxPlacements}, {"--max-drivers", f.maxDrivers}, {"--max-conns", f.maxConns}, {"--max-conns-per-peer", f.maxConnsPerPeer}, {"--max-unplaced", f.maxUnplaced}} {
		if l.v < 1 {
			return usageError{fmt.Errorf("%s %d: want at least 1", l.flag, l.v)}
		}
	}
	if f.idleTimeout <= 0 || f.placementIdle <= 0 {
		return usageError{fmt.Errorf("--idle-timeout %v, --placement-idle %v: want positive durations", f.idleTimeout, f.placementIdle)}
	}
	p, shutdown, err := trace.Setup(ctx, trace.Config{Endpoint: f.otlp, ServiceVersion: version(), Attributes: instance("hbgrun-node")})
	if err != nil {
		return usageError{fmt.Errorf("tracing: %w", err)}
	}
	sys := actors.NewActorSystem(nil)
	defer sys.Shutdown()
	n, err := remote.StartNode(sys, remote.NodeConfig{
		Listen: f.listen, Advertise: f.advertise, StoreDir: f.store.dir, StoreMax: f.store.max, MaxTasks: maxTasksFlag, MaxEdges: maxEdgesFlag,
		Tracer: p.Tracer(), Flush: flusher(p),
		Transport: remote.Transport{TLS: f.tls.files, MaxModel: int(maxModel), MaxConns: f.maxConns, MaxConnsPerPeer: f.maxConnsPerPeer,
			IdleTimeout: f.idleTimeout, OnConnRefused: connRefused(stderr), OnGuard: guarded(stderr)}, Insecure: f.insecure, Rerecord: f.rerecord,
		Unsigned:       f.tls.local != "",
		RefuseUnsigned: f.refuseUnsigned, Revoked: revoked,
		OnRevoked: func(s []string) {
			if len(s) > 0 {
				fmt.Fprintf(stderr, "hbgrun node: refusing the Definition signatures of %s: %v\n", trace.Plural(int64(len(s)), "revoked certificate"), s)
			}
		},
		MaxRanks: f.maxRanks, MaxPlacements: f.maxPlacements, MaxDrivers: f.maxDrivers, MaxUnplaced: f.maxUnplaced, PlacementIdle: f.placementIdle,
		Etcd:          f.etcd.e,
		OnPeerRefused: func(r peer.Refused) { fmt.Fprintf(stderr, "hbgrun node: peer: %v\n", r) },
	})
	if err != nil {
		return usageError{fmt.Errorf("node: %w", err)}
	}
	switch {
	case f.tls.local != "":
		fmt.Fprintf(stderr, "hbgrun node: mutual TLS with the local PKI in %s: only this user's processes are served\n", f.tls.local)
	case !f.tls.files.On():
		fmt.Fprintf(stderr, "hbgrun node: warning: no TLS: any process that reaches %s can place runs here and send it Definitions (give --cert-file, --key-file and --trusted-ca-file)\n", n.Addr())
	}
	if f.etcd.e.On() {
		fmt.Fprintf(stderr, "hbgrun node: a member of cluster %s in etcd %v\n", f.etcd.name(), f.etcd.e.Endpoints)
	}
	fmt.Fprintf(stderr, "hbgrun node: listening on %s\n", n.Addr())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), nodeStopTimeout)
	defer cancel()
	err = n.Stop(sctx)
	if ferr := shutdown(sctx); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("node %s: stopping: %w", n.Addr(), err)
	}
	fmt.Fprintf(stderr, "hbgrun node: %s stopped\n", n.Addr())
	return nil
}

// connRefused says on stderr that a connection was closed over
// --max-conns or --max-conns-per-peer: the first, then every thousandth
// (an attacker's flood is one line a thousand, not a line each).
func connRefused(stderr io.Writer) func(string, int, error) {
	var n atomic.Int64
	return func(addr string, open int, why error) {
		if k := n.Add(1); k == 1 || k%1000 == 0 {
			fmt.Fprintf(stderr, "hbgrun node: closed a connection from %s: %v (%d open; %d closed so far)\n", addr, why, open, k)
		}
	}
}

// guarded says on stderr what the wire guard refused or recovered: the
// first, then every hundredth, each panic with its stack.
func guarded(stderr io.Writer) func(authn.Event) {
	var n atomic.Int64
	return func(e authn.Event) {
		k := n.Add(1)
		switch {
		case e.Panic:
			fmt.Fprintf(stderr, "hbgrun node: guard: recovered a panic serving %s (%s), the call failed: %v\n", e.Peer, e.Method, e.Err)
		case k == 1 || k%100 == 0:
			fmt.Fprintf(stderr, "hbgrun node: guard: refused %s from %s: %v (%d refused so far)\n", e.Method, e.Peer, e.Err, k)
		}
	}
}

// flusher pushes the spans ended so far out of the process (a run's spans
// reach the collector before its driver reports). Spans the exporter lost
// meanwhile are an error, which the driver reports as the node's warning:
// the SDK hands an export's failure to its log, not to ForceFlush.
func flusher(p *trace.Provider) func(context.Context) error {
	fl, ok := p.TracerProvider.(interface{ ForceFlush(context.Context) error })
	if !ok {
		return nil
	}
	return func(ctx context.Context) error {
		before := p.Exported().Failed
		err := fl.ForceFlush(ctx)
		if st := p.Exported(); st.Failed > before {
			if st.Err != nil {
				err = st.Err
			}
			return fmt.Errorf("%d spans could not be exported to %s: %w", st.Failed-before, p.Destination(), err)
		}
		return err
	}
}

// instance names this process among the run's processes, as the resource's
// service.instance.id: every span of a node or a driver says which it was.
func instance(role string) []attribute.KeyValue {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return []attribute.KeyValue{attribute.String("service.instance.id", fmt.Sprintf("%s@%s/%d", role, host, os.Getpid()))}
}

// remoteFlags are run's flags that place its ranks on nodes.
type remoteFlags struct {
	nodes       []string
	nodeTimeout time.Duration
	listen      string
	advertise   string
	tls         tlsFlags
	etcd        etcdFlags
}

// far says the ranks run on nodes: listed, or a cluster's in etcd.
func (f *remoteFlags) far() bool { return len(f.nodes) > 0 || f.etcd.e.On() }

// etcdHosts are the etcd endpoints' HOST:PORT (one that is not a URL, as
// an address that is not loopback): a cluster whose etcd is on loopback
// is one machine's, and its nodes take the local PKI too.
func (f *remoteFlags) etcdHosts() []string {
	var out []string
	for _, e := range f.etcd.e.Endpoints {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" {
			out = append(out, "unknown:0")
			continue
		}
		out = append(out, net.JoinHostPort(u.Hostname(), "0"))
	}
	return out
}

func (f *remoteFlags) register(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.nodes, "nodes", nil, "run the ranks on these nodes (hbgrun node), HOST:PORT,...: rank r on the (r mod N)th")
	fl.DurationVar(&f.nodeTimeout, "node-timeout", remote.DefaultNodeTimeout, "with --nodes: a node unreachable or silent this long fails its ranks' passes")
	fl.StringVar(&f.listen, "driver-listen", "", "with --nodes: the address nodes answer this driver at, HOST:PORT (default: the address this machine reaches the first node from, any port)")
	fl.StringVar(&f.advertise, "driver-advertise", "", "with --nodes: the address nodes reach this driver at, HOST:PORT, when it is not --driver-listen's; --driver-listen may then be a wildcard")
	f.tls.register(fl, "with --nodes: ", "this driver's")
	f.etcd.register(fl, "run the ranks on the nodes (hbgrun node --etcd-endpoints) of the cluster whose membership is")
}

func (f *remoteFlags) check() error {
	for i, n := range f.nodes {
		if err := checkHostPort("--nodes", n, 1, true); err != nil {
			return err
		}
		// A node serves one run's ranks at a time: named twice, its second
		// placement was refused with protoactor's bare "status 3".
		if slices.Contains(f.nodes[:i], n) {
			return usageError{fmt.Errorf("--nodes: %s is named twice (a node serves a run's ranks once; --ranks spreads them over the nodes)", n)}
		}
	}
	if err := f.etcd.check(); err != nil {
		return err
	}
	if len(f.nodes) > 0 && f.etcd.e.On() {
		return usageError{fmt.Errorf("--nodes and --etcd-endpoints: want one (a list of nodes, or the cluster in etcd that has them)")}
	}
	if f.nodeTimeout < 0 || (f.far() && f.nodeTimeout == 0) {
		return usageError{fmt.Errorf("--node-timeout %v: want a positive duration", f.nodeTimeout)}
	}
	if err := f.tls.check(); err != nil {
		return err
	}
	if f.advertise != "" && f.listen == "" {
		return usageError{fmt.Errorf("--driver-advertise %q: needs --driver-listen (the address to listen on)", f.advertise)}
	}
	if f.listen != "" {
		if err := checkListen("--driver-listen", f.listen, "--driver-advertise", f.advertise); err != nil {
			return err
		}
	}
	if !f.far() {
		return nil
	}
	return f.tls.resolve(append(f.etcdHosts(), append([]string{f.listen, f.advertise}, f.nodes...)...)...)
}

// checkListen checks a listen address (port 0: any free one) and the
// address advertised for it. A listen address is also the address peers
// answer at (every PID carries it), so it must be one they can reach,
// unless another is advertised.
func checkListen(listenFlag, listen, advertiseFlag, advertise string) error {
	if advertise != "" {
		if err := checkHostPort(advertiseFlag, advertise, 1, false); err != nil {
			return err
		}
	}
	err := checkHostPort(listenFlag, listen, 0, advertise != "")
	if err != nil && checkHostPort(listenFlag, listen, 0, true) == nil {
		// Only the wildcard is wrong: say how to listen on one.
		return usageError{fmt.Errorf("%w (to listen on every interface, give the address peers reach with %s)", err, advertiseFlag)}
	}
	return err
}

// checkHostPort checks the HOST:PORT of a flag: a port from lowPort, and a
// host that names one machine unless wildcardOK.
func checkHostPort(flag, addr string, lowPort int, wildcardOK bool) error {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{fmt.Errorf("%s %q: want HOST:PORT", flag, addr)}
	}
	if n, err := strconv.Atoi(p); err != nil || n < lowPort || n > 65535 {
		return usageError{fmt.Errorf("%s %q: port %q: want %d to 65535", flag, addr, p, lowPort)}
	}
	if ip := net.ParseIP(h); !wildcardOK && (h == "" || ip != nil && ip.IsUnspecified()) {
		return usageError{fmt.Errorf("%s %q: want the address others reach this process at, not a wildcard", flag, addr)}
	}
	return nil
}

// startRanks starts the run's ranks: in this process, or on the nodes of
// --nodes (then far is set), sent the model's bytes.
func startRanks(s *session, f *runFlags, orch *actors.Orchestration) (local *actors.Runtime, far *remote.Runtime, err error) {
	cfg := f.config(s.tracer, f.skipDevice)
	if !f.remote.far() {
		local, err = actors.Start(s.sys, cfg)
		return local, nil, err
	}
	name, data := models.DefaultName, models.Default
	if f.model != "" {
		if data, err = readInput(f.model, "a model", maxModelBytes); err != nil {
			return nil, nil, usageError{fmt.Errorf("config: %w", err)}
		}
		name = f.model
	}
	far, err = remote.Start(s.sys, remote.Config{
		Nodes: f.remote.nodes, Etcd: f.remote.etcd.e, Ranks: f.ranks, ModelName: name, Model: data, Form: f.form, MaxTasks: maxTasksFlag, MaxEdges: maxEdgesFlag,
		Runtime: cfg, TracerProvider: s.provider.TracerProvider, NodeTimeout: f.remote.nodeTimeout, Listen: f.remote.listen, Advertise: f.remote.advertise,
		Transport: remote.Transport{TLS: f.remote.tls.files},
		// Said at once: the run goes on with the other nodes' ranks.
		OnNodeLost:   func(e *remote.NodeError) { fmt.Fprintf(s.stderr, "hbgrun: %v\n", e) },
		OnNodeJoined: func(addr string) { fmt.Fprintf(s.stderr, "hbgrun: node %s joined the cluster\n", addr) },
		OnNodeLeft:   func(addr string) { fmt.Fprintf(s.stderr, "hbgrun: node %s left the cluster\n", addr) },
		OnRanksMoved: func(from, to string, ranks []int, err error) {
			if err != nil {
				fmt.Fprintf(s.stderr, "hbgrun: ranks %v of node %s: placing them on %s failed: %v\n", ranks, from, to, err)
				return
			}
			fmt.Fprintf(s.stderr, "hbgrun: ranks %v of node %s placed again on %s\n", ranks, from, to)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	if far.Orchestration().Name != orch.Name {
		// The file changed between the two reads: the nodes run what they
		// were sent, which is not what was checked.
		_ = far.Stop(context.Background())
		return nil, nil, fmt.Errorf("%s changed while it was read", name)
	}
	return nil, far, nil
}
