package tests

// A cluster that lets no one in (issue 27): mutual TLS between drivers,
// nodes and peers, Definitions only from who may give them, the limits a
// node enforces. `hbgrun node` processes on 127.0.0.1, a throwaway CA made
// here with crypto/x509, and an attacker: this test binary run again
// (attackerEnv), a process built on the repository's own peer and wire
// packages.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/authn/pki"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/peer"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/remote"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
	"github.com/hbg-dev/hbg/wire"
)

// nodeLog is a node process's stderr, line by line, for a test to wait on.
type nodeLog struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func (l *nodeLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// count is how many lines hold sub, and a channel closed at the next line.
func (l *nodeLog) count(sub string) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			n++
		}
	}
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return n, l.changed
}

func (l *nodeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitLines waits until the nodes' stderr holds n lines with sub in all.
func waitLines(t *testing.T, sub string, n int, within time.Duration, nodes ...*nodeProc) {
	t.Helper()
	deadline := time.After(within)
	for {
		got := 0
		var changed []<-chan struct{}
		for _, nd := range nodes {
			k, c := nd.log.count(sub)
			got += k
			changed = append(changed, c)
		}
		if got >= n {
			return
		}
		any := make(chan struct{})
		var once sync.Once
		for _, c := range changed {
			go func() {
				select {
				case <-c:
					once.Do(func() { close(any) })
				case <-deadline:
				}
			}()
		}
		select {
		case <-any:
		case <-deadline:
			var logs []string
			for _, nd := range nodes {
				logs = append(logs, nd.log.String())
			}
			t.Fatalf("%d of %d lines %q within %v; the nodes said:\n%s", got, n, sub, within, strings.Join(logs, "\n--\n"))
		}
	}
}

// testPKI is a throwaway certificate authority (authn/pki, as the local
// PKI is made) and the files of the certificates it issued.
type testPKI struct {
	dir string
	ca  *pki.CA
	n   int
}

// testValidity is how long a test's certificates are good for.
const testValidity = 24 * time.Hour

func newPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	ca, err := pki.NewCA(name, testValidity)
	require.NoError(t, err)
	p := &testPKI{dir: t.TempDir(), ca: ca}
	_, err = ca.WriteCA(p.dir)
	require.NoError(t, err)
	return p
}

func (p *testPKI) caFile() string { return filepath.Join(p.dir, "ca.crt") }

// issue makes a certificate for 127.0.0.1 named cn, good for serving and
// for dialling, and returns the three flags that use it.
func (p *testPKI) issue(t *testing.T, cn string) []string {
	t.Helper()
	return p.issueURIs(t, cn)
}

// issueRecorder is issue with the recorder role (defsig.RecorderURI): the
// node signs the Definitions it records.
func (p *testPKI) issueRecorder(t *testing.T, cn string) []string {
	t.Helper()
	return p.issueURIs(t, cn, defsig.RecorderSAN())
}

func (p *testPKI) issueURIs(t *testing.T, cn string, uris ...*url.URL) []string {
	t.Helper()
	return p.write(t, cn, pki.Names{IPs: []net.IP{net.ParseIP("127.0.0.1")}, DNS: []string{"localhost"}, URIs: uris})
}

// issueNamed is issue with the given IP SANs only (none: a certificate
// whose subject CN alone names a host).
func (p *testPKI) issueNamed(t *testing.T, cn string, ips ...string) []string {
	t.Helper()
	var n pki.Names
	for _, ip := range ips {
		n.IPs = append(n.IPs, net.ParseIP(ip))
	}
	return p.write(t, cn, n)
}

// write issues a leaf named cn and returns its flags (its files named
// apart from every other's of p).
func (p *testPKI) write(t *testing.T, cn string, n pki.Names) []string {
	t.Helper()
	p.n++
	f, err := p.ca.WriteLeaf(p.dir, fmt.Sprintf("%s-%d", cn, p.n), cn, n, testValidity)
	require.NoError(t, err)
	return f.Flags()
}

func (p *testPKI) pool() *x509.CertPool { return p.ca.Pool() }

// runDSv4 runs DSv4 full on the nodes, 4 ranks and 2 rounds, with extra
// flags.
func runDSv4(t *testing.T, nodes []*nodeProc, flags ...string) (string, string, int) {
	t.Helper()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr)
	}
	args := append([]string{"run", dsv4, "--form", "full", "--ranks", "4", "--rounds", "2", "--json", "-v", "--store", "off",
		"--nodes", strings.Join(addrs, ",")}, flags...)
	return runCLI(t, args...)
}

// TestRemoteTLS: with mutual TLS, a driver and two nodes run DSv4 full on
// 4 ranks to the in-process digest (the peers fetch from one another over
// TLS); a driver with no certificate, and one whose certificate another CA
// signed, are refused: exit 1 naming the TLS failure, no pass run; and a
// process without a certificate can neither place, pass, publish nor fetch.
func TestRemoteTLS(t *testing.T) {
	want := localDigest(t)
	ca := newPKI(t, "hbg test CA")
	// Recorder certificates: the nodes sign what they record, and replay
	// each other's (unsigned, a fetched image is recorded here instead).
	a := startNodeProc(t, "127.0.0.1:0", ca.issueRecorder(t, "node-a")...)
	b := startNodeProc(t, "127.0.0.1:0", ca.issueRecorder(t, "node-b")...)
	nodes := []*nodeProc{a, b}
	assert.NotContains(t, a.log.String(), "no TLS")

	out, stderr, code := runDSv4(t, nodes, ca.issue(t, "driver")...)
	require.Equal(t, 0, code, stderr)
	digests := passDigests(stderr)
	require.Len(t, digests, 4, stderr)
	for rank := range 4 {
		for round := range 2 {
			assert.Equal(t, want, digests[rank][round], "rank %d round %d", rank, round)
		}
	}
	var rep trace.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, int64(8), rep.Counts.FetchedDefinitions, "the peers fetch over TLS")
	assert.Zero(t, rep.Counts.FetchRejected, rep.Warnings)

	other := newPKI(t, "another CA")
	for _, c := range []struct {
		name  string
		flags []string
		says  string
	}{
		{"no certificate", []string{"--insecure-loopback"}, "this driver has no certificate"},
		{"another CA's certificate, trusting it", other.issue(t, "mallory"), "certificate signed by unknown authority"},
		{"another CA's certificate, trusting ours", append(other.issue(t, "mallory2")[:4], "--trusted-ca-file", ca.caFile()), "tls: certificate required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runDSv4(t, nodes, c.flags...)
			assert.Equal(t, 1, code, stderr)
			assert.Contains(t, stderr, "TLS", stderr)
			assert.Contains(t, stderr, c.says, stderr)
			assert.Empty(t, passDigests(stderr), "no pass ran")
		})
	}

	// The attacker skips the driver's checks: its gRPC connections meet
	// the nodes' TLS, and nothing it sends gets an answer or takes effect.
	res := attack(t, attackSpec{Op: "all", Nodes: []string{a.addr, b.addr}})
	assert.Empty(t, res.Answered, "a process without a certificate got answers")
	assert.Zero(t, res.Placed)
	_, stderr, code = runDSv4(t, nodes, ca.issue(t, "driver2")...)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, want, passDigests(stderr)[0][0])
}

// TestNodeInsecureRefused: a node without TLS on an address other machines
// reach refuses to start unless --insecure; on loopback it serves the local
// PKI's mutual TLS, and with --insecure-loopback none, with a one-line
// warning.
func TestNodeInsecureRefused(t *testing.T) {
	stderr, code := runBounded(t, 30*time.Second, "node", "--listen", "0.0.0.0:0", "--advertise", "127.0.0.1:1")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "no TLS on a non-loopback address")
	assert.Contains(t, stderr, "--insecure")
	n := startNodeProc(t, "127.0.0.1:0")
	assert.NotContains(t, n.log.String(), "no TLS")
	assert.Contains(t, n.log.String(), "mutual TLS with the local PKI")
	p := startNodeProc(t, "127.0.0.1:0", "--insecure-loopback")
	assert.Equal(t, 1, strings.Count(p.log.String(), "warning: no TLS"), p.log.String())
}

// TestRemoteForgedPublish: on loopback, a process of the same user (it
// holds the local PKI's certificate, as the nodes do) that holds no claim
// publishes a forged image of every DSv4 Definition (extra fanin
// edges, its hash recomputed) to each key's owner: every Publish is
// refused and counted, and the next honest run ends with the in-process
// digest and the in-process run's device wall (a forged Definition
// replayed is slower, and its digest the same).
func TestRemoteForgedPublish(t *testing.T) {
	localOut, lerr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "1", "--ranks", "1", "--json", "--store", "off")
	require.Equal(t, 0, code, lerr)
	var local trace.Report
	require.NoError(t, json.Unmarshal([]byte(localOut), &local))
	require.NotNil(t, local.Sim)

	a, b := startNodeProc(t, "127.0.0.1:0"), startNodeProc(t, "127.0.0.1:0")
	// A run of another form starts the nodes' peers (a node serves its
	// peers from its first placement on) and leaves full's keys unheld.
	_, stderr, code := runCLI(t, "run", dsv4, "--form", "blocks", "--ranks", "2", "--rounds", "1", "--store", "off", "--nodes", a.addr+","+b.addr)
	require.Equal(t, 0, code, stderr)
	res := attack(t, attackSpec{Op: "publish", Local: true, Nodes: []string{a.addr, b.addr}})
	require.Equal(t, 8, res.Published)
	waitLines(t, "refused a Publish", 8, time.Minute, a, b)

	out, stderr, code := runDSv4(t, []*nodeProc{a, b})
	require.Equal(t, 0, code, stderr)
	var rep trace.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotNil(t, rep.Sim)
	assert.Equal(t, fmt.Sprintf("%016x", uint64(local.Golden.Digest)), fmt.Sprintf("%016x", uint64(rep.Golden.Digest)))
	assert.Equal(t, local.Sim.WallNs, rep.Sim.WallNs, "device wall of the honest run")
	assert.Zero(t, rep.Counts.FetchRejected, rep.Warnings)
}

// attackerEnv makes this test binary the attacker: it reads an attackSpec
// from the variable, prints an attackResult and exits.
const attackerEnv = "HBG_TEST_ATTACKER"

func init() {
	if spec := os.Getenv(attackerEnv); spec != "" {
		var s attackSpec
		if err := json.Unmarshal([]byte(spec), &s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		r, err := attacker(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	}
}

type attackSpec struct {
	// Op is "publish" (a forged image of every DSv4 Definition to its
	// owner), "all" (place, pass, publish and fetch, each waiting for an
	// answer), "place" (Ranks ranks), or "spawn" (Ranks run hosts, none
	// placed; Placed counts those spawned).
	Op    string   `json:"op"`
	Nodes []string `json:"nodes"`
	Ranks int      `json:"ranks,omitempty"`
	// Model and Form are what "place" places (default DSv4 full).
	Model string `json:"model,omitempty"`
	Form  string `json:"form,omitempty"`
	// TLS, if set, is the attacker's certificate, key and CA files (the
	// flags pki.issue returns), taken as they are: no check of its names.
	TLS []string `json:"tls,omitempty"`
	// Serve, with TLS, is the certificate the attacker serves with (the
	// flags pki.issue returns), so that a node's answers reach it.
	Serve []string `json:"serve,omitempty"`
	// Local, without TLS, makes the attacker a process of this user's:
	// it dials and serves with the local PKI's certificate, as the
	// default nodes do.
	Local bool `json:"local,omitempty"`
}

type attackResult struct {
	Published int      `json:"published"`
	Placed    int      `json:"placed"`
	Answered  []string `json:"answered"`
	// Failure is a placement's refusal, its kind and text.
	Failure string `json:"failure"`
	Kind    string `json:"kind"`
}

func attack(t *testing.T, s attackSpec) attackResult {
	t.Helper()
	spec, err := json.Marshal(s)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), attackerEnv+"="+string(spec))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var r attackResult
	require.NoError(t, json.Unmarshal(out, &r), string(out))
	return r
}

// attacker is a process that reaches the nodes' ports with protoactor
// remote and the repository's own messages, and no certificate unless the
// spec gives one (TLS, or Local: the local PKI's).
func attacker(s attackSpec) (*attackResult, error) {
	sys := actors.NewActorSystem(nil)
	var rem *paremote.Remote
	if s.Local {
		f, err := pki.Local(os.Getenv(pki.DirEnv))
		if err != nil {
			return nil, err
		}
		s.TLS, s.Serve = f.Flags(), f.Flags()
	}
	if len(s.TLS) == 6 && len(s.Serve) == 6 {
		opts, err := attackerTLS(s.TLS, s.Serve)
		if err != nil {
			return nil, err
		}
		rem = paremote.NewRemote(sys, paremote.Configure("127.0.0.1", 0, opts...))
		rem.Start()
	} else {
		rem = paremote.NewRemote(sys, paremote.Configure("127.0.0.1", 0))
		rem.Start()
	}
	defer rem.Shutdown(false)
	r := &attackResult{Answered: []string{}}
	switch s.Op {
	case "publish":
		images, err := trueImages()
		if err != nil {
			return nil, err
		}
		// From an actor of this process's, as a node's peer actor sends.
		self := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		for fk, img := range images {
			forged := chainImage(img)
			owner := peer.Owner(fk, s.Nodes)
			pub := &peer.Publish{FullKey: fk, Image: &peer.Image{Image: forged, ContentHash: stages.DefinitionHash(forged), FormatVersion: stages.DefinitionVersion}}
			sys.Root.RequestWithCustomSender(actor.NewPID(owner, peer.ActorName), pub, self)
			r.Published++
		}
		// Each node's messages arrive in order: once a request after
		// them is answered (a dead letter), they are there.
		for _, n := range s.Nodes {
			_ = sys.Root.RequestFuture(actor.NewPID(n, "nobody"), &wire.Ping{}, 10*time.Second).Wait()
		}
	case "kill":
		// protoactor's own messages, to the node's peer actor (its name
		// is fixed): a Stop, a PoisonPill, and a Terminated saying a
		// node died.
		for _, n := range s.Nodes {
			pid := actor.NewPID(n, peer.ActorName)
			sys.Root.Send(pid, &actor.Stop{})
			sys.Root.Send(pid, &actor.PoisonPill{})
			for _, other := range s.Nodes {
				sys.Root.Send(pid, &actor.Terminated{Who: actor.NewPID(other, peer.ActorName)})
			}
			r.Published++
		}
		for _, n := range s.Nodes {
			_ = sys.Root.RequestFuture(actor.NewPID(n, "nobody"), &wire.Ping{}, 10*time.Second).Wait()
		}
	case "spawn":
		// Ranks run hosts spawned on each node, none placed.
		for _, n := range s.Nodes {
			for i := range s.Ranks {
				resp, err := rem.SpawnNamed(n, fmt.Sprintf("hbg-run-flood-%d", i), remote.Kind, 3*time.Second)
				if err == nil && resp.GetPid() != nil {
					r.Placed++
				} else if err != nil {
					r.Failure = err.Error()
				}
			}
		}
	case "all", "place":
		for _, n := range s.Nodes {
			placed, failure, kind := placeOn(sys, rem, n, s.Nodes, max(s.Ranks, 1), s.Model, s.Form)
			if placed {
				r.Placed++
				r.Answered = append(r.Answered, n+": placed")
			}
			if failure != "" {
				r.Answered = append(r.Answered, n+": "+failure)
				r.Failure, r.Kind = failure, kind
			}
			if s.Op == "place" {
				continue
			}
			to := time.Second
			for what, m := range map[string]any{
				"pass":    &wire.PassRequest{Run: "guess", Seq: 1, Rank: 0, Round: 0},
				"ping":    &wire.Ping{Seq: 1},
				"fetch":   &peer.Ask{Id: 7, FullKey: 1, Key: "k"},
				"publish": &peer.Publish{FullKey: 1, Image: &peer.Image{Image: []byte("x")}},
			} {
				target := actor.NewPID(n, peer.ActorName)
				if what == "pass" || what == "ping" {
					target = actor.NewPID(n, "hbg-run-guess")
				}
				if res, err := sys.Root.RequestFuture(target, m, to).Result(); err == nil {
					r.Answered = append(r.Answered, fmt.Sprintf("%s %s: %T", n, what, res))
				}
			}
		}
	}
	return r, nil
}

// attackerTLS dials with the certificate of dial and serves with that of
// serve (each the three flags pki.issue returns): hbg's own transport
// would check the names of both.
func attackerTLS(dial, serve []string) ([]paremote.ConfigOption, error) {
	ca, err := os.ReadFile(dial[5])
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	dc, err := tls.LoadX509KeyPair(dial[1], dial[3])
	if err != nil {
		return nil, err
	}
	sc, err := tls.LoadX509KeyPair(serve[1], serve[3])
	if err != nil {
		return nil, err
	}
	server := &tls.Config{Certificates: []tls.Certificate{sc}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	client := &tls.Config{Certificates: []tls.Certificate{dc}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return []paremote.ConfigOption{
		paremote.WithServerOptions(grpc.Creds(credentials.NewTLS(server))),
		paremote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(client))),
	}, nil
}

// placeOn spawns a run's host on node and places ranks there, as a driver
// would, from this process.
func placeOn(sys *actor.ActorSystem, rem *paremote.Remote, node string, nodes []string, ranks int, model, form string) (bool, string, string) {
	resp, err := rem.SpawnNamed(node, "hbg-run-attack", remote.Kind, 3*time.Second)
	if err != nil || resp.GetPid() == nil {
		return false, "", ""
	}
	if model == "" {
		model, form = dsv4, "full"
	}
	data, err := os.ReadFile(model)
	if err != nil {
		return false, err.Error(), ""
	}
	rs := make([]int32, ranks)
	for i := range rs {
		rs[i] = int32(i)
	}
	drv := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	p := &wire.Place{Run: "attack", ModelName: model, ModelYaml: data, ModelSha256: wire.ModelHash(data), Form: form,
		Ranks: rs, Nodes: nodes, Node: int32(slices.Index(nodes, node)), DriverAddress: drv.GetAddress(), DriverId: drv.GetId(),
		Token: make([]byte, wire.TokenSize), Options: &wire.Options{Recorders: 1, InFlight: 1}}
	res, err := sys.Root.RequestFuture(resp.GetPid(), p, 30*time.Second).Result()
	if err != nil {
		return false, "", ""
	}
	pl, ok := res.(*wire.Placed)
	if !ok {
		return false, fmt.Sprintf("answered %T", res), ""
	}
	if f := pl.GetFailure(); f != nil {
		return false, f.GetText(), f.GetKind().String()
	}
	return true, "", ""
}

// trueImages records DSv4 full's Definitions in this process: full_key to
// image.
func trueImages() (map[uint64][]byte, error) {
	data, err := os.ReadFile(dsv4)
	if err != nil {
		return nil, err
	}
	m, err := config.Parse(dsv4, data)
	if err != nil {
		return nil, err
	}
	o, err := m.Orchestration("full")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hbg-attacker")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sys := actors.NewActorSystem(nil)
	rt, err := actors.Start(sys, actors.Config{StoreDir: dir})
	if err != nil {
		return nil, err
	}
	defer rt.Stop(context.Background())
	if _, err := rt.Pass(context.Background(), o, 0, 0); err != nil {
		return nil, err
	}
	if errs := rt.FlushStore(); len(errs) > 0 {
		return nil, errs[0]
	}
	list, err := rt.Disk().List()
	if err != nil {
		return nil, err
	}
	out := map[uint64][]byte{}
	for _, e := range list {
		var fk uint64
		if _, err := fmt.Sscanf(e.FullKey, "%x", &fk); err != nil {
			return nil, err
		}
		l, err := rt.Disk().Load(fk, "")
		if err != nil || l == nil {
			return nil, fmt.Errorf("loading %s: %v", e.FullKey, err)
		}
		rt.Disk().Unpin(fk)
		out[fk] = l.Image
	}
	return out, nil
}

// chainImage forges img: every node also waits for the one before it
// (extra fanin edges; re-encoded, so its own content hash checks). It
// replays to the same digest, slower.
func chainImage(img []byte) []byte {
	d, err := stages.DecodeDefinition(img)
	if err != nil {
		panic(err)
	}
	var fanin []uint32
	for i := range d.Nodes {
		n := &d.Nodes[i]
		old := d.Fanin[n.Fanin.Off : n.Fanin.Off+n.Fanin.N]
		off := uint32(len(fanin))
		fanin = append(fanin, old...)
		if i > 0 && !slices.Contains(old, uint32(i-1)) {
			fanin = append(fanin, uint32(i-1))
			slices.Sort(fanin[off:])
		}
		n.Fanin = stages.Span{Off: off, N: uint32(len(fanin)) - off}
	}
	d.Fanin = fanin
	return stages.EncodeDefinition(d)
}
