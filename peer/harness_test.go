package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/config/models"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// One protoactor remote per process: remote.Start sets gRPC's global logger
// (grpclog.SetLoggerV2) while an earlier remote's server goroutines read it,
// which -race reports. So the test process runs one remote, shared by every
// test (each starts its own peer and runtime on it), and every other node
// is a child process: this test binary again, run as a node host (childEnv)
// driven by JSON lines on its stdin.
const childEnv = "HBG_PEER_TEST_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(nodeHost(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// dsv4Keys is the Definitions DSv4's full form records.
const dsv4Keys = 8

var dsv4 = sync.OnceValues(func() (*actors.Orchestration, error) {
	m, err := config.Parse(models.DefaultName, models.Default)
	if err != nil {
		return nil, err
	}
	return m.Orchestration("full")
})

// reference is DSv4 full's digest and images, from one runtime alone (no
// peers), its Definitions kept in a store on disk.
type reference struct {
	digest uint64
	images map[uint64][]byte // by full_key
}

var dsv4Reference = sync.OnceValues(func() (*reference, error) {
	o, err := dsv4()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hbg-peer-ref")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sys := actors.NewActorSystem(nil)
	defer sys.Shutdown()
	rt, err := actors.Start(sys, actors.Config{StoreDir: dir})
	if err != nil {
		return nil, err
	}
	defer rt.Stop(context.Background())
	res, err := rt.Pass(context.Background(), o, 0, 0)
	if err != nil {
		return nil, err
	}
	if errs := rt.FlushStore(); len(errs) > 0 {
		return nil, errs[0]
	}
	ref := &reference{digest: res.Device.Digest, images: map[uint64][]byte{}}
	list, err := rt.Disk().List()
	if err != nil {
		return nil, err
	}
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
		ref.images[fk] = l.Image
	}
	if len(ref.images) != dsv4Keys {
		return nil, fmt.Errorf("reference run kept %d Definitions, want %d", len(ref.images), dsv4Keys)
	}
	return ref, nil
})

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// host is this process's one actor system with protoactor remote.
var host = sync.OnceValues(func() (*actor.ActorSystem, error) {
	sys := actors.NewActorSystem(nil)
	remote.NewRemote(sys, stamped()).Start()
	return sys, nil
})

// stamped is a remote's configuration as a node's: every message it
// receives stamped with its connection (package authn).
func stamped() *remote.Config {
	server, dial, err := authn.Options(authn.Files{}, 16<<20, authn.Conns{}, authn.Guard{})
	if err != nil {
		panic(err)
	}
	c := remote.Configure("127.0.0.1", 0, remote.WithServerOptions(server...))
	c.DialOptions = append(c.DialOptions, dial...)
	return c
}

// node is a peer and a runtime using it, on an actor system with remote.
type node struct {
	sys  *actor.ActorSystem
	addr string
	peer *Node
	rt   *actors.Runtime
	// cl and asks: a cluster member's cluster and open asks (clusterNode).
	cl   *cluster.Cluster
	asks map[uint64]chan actors.FetchResult
}

// nodeSpec is how to start a node: the cluster, and what tests change.
type nodeSpec struct {
	Nodes []string `json:"nodes"`
	// Owner, when set, owns every key.
	Owner          string        `json:"owner,omitempty"`
	AskTimeout     time.Duration `json:"ask_timeout,omitempty"`
	ClaimTimeout   time.Duration `json:"claim_timeout,omitempty"`
	RebuildTimeout time.Duration `json:"rebuild_timeout,omitempty"`
	StoreDir       string        `json:"store_dir,omitempty"`
	// TrustCA (DER), when set, makes the node verify signatures against
	// that CA, refusing those of the Denied serials (a child's verifier).
	TrustCA []byte   `json:"trust_ca,omitempty"`
	Denied  []string `json:"denied,omitempty"`
	// SignCert and SignKey (DER: certificate, PKCS#8 key), when set, make
	// the node sign what it records.
	SignCert []byte `json:"sign_cert,omitempty"`
	SignKey  []byte `json:"sign_key,omitempty"`
	// Members, when set, makes the node a member of a protoactor cluster
	// with these members (clusterNode).
	Members []member `json:"members,omitempty"`
	// onRefused hears a local node's refusals; verifier checks a local
	// node's fetched images' signatures; refuseUnsigned is
	// Config.RefuseUnsigned.
	onRefused      func(Refused)
	verifier       *defsig.Verifier
	refuseUnsigned bool
}

func startNode(sys *actor.ActorSystem, spec nodeSpec) (*node, error) {
	nd := &node{sys: sys, addr: sys.Address()}
	pc := Config{AskTimeout: spec.AskTimeout, ClaimTimeout: spec.ClaimTimeout, RebuildTimeout: spec.RebuildTimeout, OnRefused: spec.onRefused, Verifier: spec.verifier, RefuseUnsigned: spec.refuseUnsigned}
	if spec.TrustCA != nil {
		ca, err := x509.ParseCertificate(spec.TrustCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		pc.Verifier = defsig.NewVerifier(pool)
		pc.Verifier.SetDenied(spec.Denied)
	}
	if spec.SignCert != nil {
		k, err := x509.ParsePKCS8PrivateKey(spec.SignKey)
		if err == nil {
			pc.Signer, err = defsig.NewSigner(tls.Certificate{Certificate: [][]byte{spec.SignCert}, PrivateKey: k})
		}
		if err != nil {
			return nil, err
		}
	}
	if o := spec.Owner; o != "" {
		pc.owner = func(uint64) string { return o }
	}
	if spec.Members != nil {
		return clusterNode(sys, nd, pc, spec)
	}
	p, err := Start(sys, pc)
	if err != nil {
		return nil, err
	}
	src, err := p.Cluster(nd.addr, spec.Nodes)
	if err != nil {
		p.Stop()
		return nil, err
	}
	rt, err := actors.Start(sys, actors.Config{Peers: src, StoreDir: spec.StoreDir})
	if err != nil {
		p.Stop()
		return nil, err
	}
	p.SetDisk(rt.Disk())
	nd.peer, nd.rt = p, rt
	return nd, nil
}

func (nd *node) stop() {
	nd.rt.Stop(context.Background())
	nd.peer.Stop()
}

// local starts a node in this process; spec.Nodes gets its address first.
func local(t testing.TB, spec nodeSpec, others ...string) *node {
	t.Helper()
	sys := must(host())(t)
	spec.Nodes = append([]string{sys.Address()}, others...)
	nd := must(startNode(sys, spec))(t)
	t.Cleanup(nd.stop)
	return nd
}

// passResult is what the tests read of a pass, from this process or a
// child.
type passResult struct {
	Built        int      `json:"built"`
	Recorded     int      `json:"recorded_nodes"`
	Fetched      int      `json:"fetched"`
	FetchedBytes int64    `json:"fetched_bytes"`
	Rejected     int      `json:"rejected"`
	Asked        int64    `json:"asked"`
	Digest       uint64   `json:"digest"`
	Warnings     []string `json:"warnings"`
	Err          string   `json:"err,omitempty"`
}

func (nd *node) pass(round int) passResult {
	o, err := dsv4()
	if err != nil {
		return passResult{Err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := nd.rt.Pass(ctx, o, 0, round)
	if err != nil {
		return passResult{Err: err.Error()}
	}
	p := res.Pass
	return passResult{Built: p.BuiltDefinitions, Recorded: p.RecordedNodes, Fetched: p.FetchedDefinitions, FetchedBytes: p.FetchedBytes,
		Rejected: p.FetchRejected, Asked: p.Ops[trace.OpPeerFetch].Count, Digest: res.Device.Digest, Warnings: res.Warnings}
}

// command is one line to a child node host.
type command struct {
	Op    string   `json:"op"`
	Spec  nodeSpec `json:"spec"`
	Round int      `json:"round"`
	// Mode is how a bad peer spoils its images (badImage).
	Mode string `json:"mode"`
	// SignCert and SignKey (DER: certificate, PKCS#8 key), when set, make
	// a bad peer sign what it sends (signedAnswer).
	SignCert []byte `json:"sign_cert,omitempty"`
	SignKey  []byte `json:"sign_key,omitempty"`
	// Owner and FullKey: hold asks Owner for FullKey and keeps the claim.
	Owner   string `json:"owner"`
	FullKey uint64 `json:"full_key"`
	// Wait bounds waiting for an ask's result ("result").
	Wait time.Duration `json:"wait,omitempty"`
}

type reply struct {
	Addr  string      `json:"addr,omitempty"`
	Pass  *passResult `json:"pass,omitempty"`
	Grant bool        `json:"grant,omitempty"`
	Err   string      `json:"err,omitempty"`
	// ID is the child's actor system id (a cluster member's).
	ID string `json:"id,omitempty"`
	// Outcome and Image are an ask's result ("result"; "" not yet).
	Outcome string `json:"outcome,omitempty"`
	Image   int    `json:"image,omitempty"`
	// Wall and Median time a "claims" (ns).
	Wall   int64 `json:"wall,omitempty"`
	Median int64 `json:"median,omitempty"`
}

// nodeHost is a child process: one actor system with remote, serving the
// commands on in, one reply line each on out.
func nodeHost(in io.Reader, out io.Writer) int {
	sys := actors.NewActorSystem(nil)
	remote.NewRemote(sys, stamped()).Start()
	enc := json.NewEncoder(out)
	if enc.Encode(reply{Addr: sys.Address(), ID: sys.ID}) != nil {
		return 1
	}
	var nd *node
	var mode struct {
		sync.Mutex
		name   string
		signer *defsig.Signer
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var c command
		var r reply
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			r.Err = err.Error()
		}
		switch c.Op {
		case "node":
			var err error
			if nd, err = startNode(sys, c.Spec); err != nil {
				r.Err = err.Error()
			}
		case "pass":
			p := nd.pass(c.Round)
			r.Pass = &p
		case "bad":
			mode.Lock()
			first := mode.name == ""
			mode.name, mode.signer = c.Mode, nil
			if c.SignCert != nil {
				k, err := x509.ParsePKCS8PrivateKey(c.SignKey)
				if err == nil {
					mode.signer, err = defsig.NewSigner(tls.Certificate{Certificate: [][]byte{c.SignCert}, PrivateKey: k})
				}
				if err != nil {
					r.Err = err.Error()
				}
			}
			mode.Unlock()
			if first {
				ref, err := dsv4Reference()
				if err != nil {
					r.Err = err.Error()
					break
				}
				_, err = sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
					if a, ok := ctx.Message().(*Ask); ok && ctx.Sender() != nil {
						mode.Lock()
						m, sg := mode.name, mode.signer
						mode.Unlock()
						ctx.Send(ctx.Sender(), signedAnswer(ref, m, sg, a))
					}
				}), ActorName)
				if err != nil {
					r.Err = err.Error()
				}
			}
		case "hold":
			r.Grant, r.Err = hold(sys, c.Owner, c.FullKey)
		case "members", "ask", "result", "recorded", "claims", "granted":
			r = clusterCommand(nd, c)
		case "publish":
			ref, err := dsv4Reference()
			if err != nil {
				r.Err = err.Error()
				break
			}
			img := chain(ref.images[c.FullKey])
			pub := &Publish{FullKey: c.FullKey, Image: &Image{Image: img, ContentHash: stages.DefinitionHash(img), FormatVersion: stages.DefinitionVersion}}
			// From an actor, as a node's Publish is (Request: the owner
			// sees a sender).
			pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
				if _, ok := ctx.Message().(*actor.Started); ok {
					ctx.Request(actor.NewPID(c.Owner, ActorName), pub)
				}
			}))
			_ = pid
		}
		if enc.Encode(r) != nil {
			return 1
		}
	}
	if nd != nil {
		nd.stop()
	}
	return 0
}

// badImage answers an Ask with an image spoiled as mode says.
func badImage(ref *reference, mode string, a *Ask) *Answer {
	img := ref.images[a.FullKey]
	hash := stages.DefinitionHash(img)
	flip := func(b []byte) []byte {
		c := slices.Clone(b)
		c[len(c)/2] ^= 0x40
		return c
	}
	switch mode {
	case "flip": // the hash the image should have
		img = flip(img)
	case "flip-rehash": // the hash of the bytes sent
		img = flip(img)
		hash = stages.DefinitionHash(img)
	case "truncate":
		img = img[:len(img)-9]
		hash = stages.DefinitionHash(img)
	case "other-key":
		keys := make([]uint64, 0, len(ref.images))
		for fk := range ref.images {
			keys = append(keys, fk)
		}
		slices.Sort(keys)
		img = ref.images[keys[(slices.Index(keys, a.FullKey)+1)%len(keys)]]
		hash = stages.DefinitionHash(img)
	case "garbage":
		img = []byte("not a Definition at all")
		hash = stages.DefinitionHash(img)
	case "chain": // a valid Definition, more edges, its own hash: the digest holds
		img = chain(img)
		hash = stages.DefinitionHash(img)
	}
	return &Answer{Id: a.Id, FullKey: a.FullKey, Result: &Answer_Image{Image: &Image{Image: img, ContentHash: hash, FormatVersion: stages.DefinitionVersion}}}
}

// signedAnswer is badImage's answer signed by sg (when set): mode
// "other-bytes" sends the chain forgery with a signature over the true
// image's content hash; any other mode signs what it sends.
func signedAnswer(ref *reference, mode string, sg *defsig.Signer, a *Ask) *Answer {
	if mode == "other-bytes" {
		mode = "chain"
	}
	ans := badImage(ref, mode, a)
	if sg == nil {
		return ans
	}
	img := ans.GetImage()
	hash := img.ContentHash
	if mode == "chain" {
		hash = stages.DefinitionHash(ref.images[a.FullKey])
	}
	sig, err := sg.Sign(a.FullKey, hash, stages.DefinitionVersion)
	if err != nil {
		panic(err) // the test's own key
	}
	img.Signature, img.SignerCert = sig.Sig, sig.Cert
	return ans
}

// chain is a forgery of img: every node also waits for the one before it
// (extra fanin edges, the image re-encoded with its own content hash). It
// decodes, replays to the same digest, and runs slower.
func chain(img []byte) []byte {
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

// hold asks owner for fullKey as a node would and keeps the claim it is
// granted, never publishing: a recorder that stalls, or dies.
func hold(sys *actor.ActorSystem, owner string, fullKey uint64) (bool, string) {
	got := make(chan *Answer, 1)
	_, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Request(actor.NewPID(owner, ActorName), &Ask{Id: 1, FullKey: fullKey, Key: "held"})
		case *Answer:
			got <- m
		}
	}), ActorName)
	if err != nil {
		return false, err.Error()
	}
	select {
	case a := <-got:
		return a.GetGrant() != nil, ""
	case <-time.After(time.Minute):
		return false, "no answer from the owner within a minute"
	}
}

// child is a node host process.
type child struct {
	t    testing.TB
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *json.Decoder
	addr string
	id   string
	err  strings.Builder
}

func startChild(t testing.TB) *child {
	t.Helper()
	c := &child{t: t, cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), childEnv+"=1")
	c.cmd.Stderr = &c.err
	c.in = must(c.cmd.StdinPipe())(t)
	c.out = json.NewDecoder(must(c.cmd.StdoutPipe())(t))
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	var r reply
	if err := c.out.Decode(&r); err != nil {
		t.Fatalf("node host: %v (stderr %s)", err, c.err.String())
	}
	c.addr, c.id = r.Addr, r.ID
	return c
}

func (c *child) do(cmd command) reply {
	c.t.Helper()
	data, _ := json.Marshal(cmd)
	if _, err := c.in.Write(append(data, '\n')); err != nil {
		c.t.Fatalf("node host %s: %v", c.addr, err)
	}
	var r reply
	if err := c.out.Decode(&r); err != nil {
		c.t.Fatalf("node host %s, %s: %v (stderr %s)", c.addr, cmd.Op, err, c.err.String())
	}
	if r.Err != "" {
		c.t.Fatalf("node host %s, %s: %s", c.addr, cmd.Op, r.Err)
	}
	return r
}

// kill ends the child at once (SIGKILL).
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	c.cmd = nil
}

// close ends the child's commands; it must then exit 0 (a data race in it
// exits 66).
func (c *child) close() {
	if c.cmd == nil {
		return
	}
	c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		c.t.Errorf("node host %s: %v (stderr %s)", c.addr, err, c.err.String())
	}
}
