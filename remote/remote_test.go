package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/etcdtest"
	"github.com/hbg-dev/hbg/wire"
)

const dsv4 = "../config/models/dsv4_flash_decode.yaml"

// The nodes of these tests are child processes (this test binary, run as
// a node by TestMain), reached over loopback gRPC as another machine would
// be; the drivers share this process's one protoactor remote
// (Config.Remote), since protoactor's remote sets gRPC's process-wide
// logger as it starts.

const nodeEnv = "HBG_REMOTE_TEST_NODE"

// nodeTLSEnv, if set, is the child node's certificate, key and CA files,
// comma-separated: it serves mutual TLS.
const nodeTLSEnv = "HBG_REMOTE_TEST_NODE_TLS"

func TestMain(m *testing.M) {
	etcdtest.Main()
	if listen := os.Getenv(nodeEnv); listen != "" {
		os.Exit(serveNode(listen))
	}
	os.Exit(m.Run())
}

// serveNode is a child process's node: it prints its address, serves
// until SIGTERM or until its stdin closes (the test is gone), then stops.
func serveNode(listen string) int {
	sys := actors.NewActorSystem(nil)
	cfg := NodeConfig{Listen: listen, Etcd: etcdFromEnv()}
	if f := strings.Split(os.Getenv(nodeTLSEnv), ","); len(f) == 3 {
		cfg.Transport.TLS = authn.Files{CertFile: f[0], KeyFile: f[1], TrustedCAFile: f[2]}
	}
	n, err := StartNode(sys, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("node %s\n", n.Addr())
	// Registered until the process exits: the test may close stdin and
	// send SIGTERM one after the other.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	select {
	case <-sig:
	case <-gone:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Stop(sctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A handler panic the guard recovered is a message the guard should
	// have refused: every test's node fails on one.
	if p := authn.GuardStats.Panics.Load(); p != 0 {
		fmt.Fprintf(os.Stderr, "node %s: %d handler panics recovered, want none reaching protoactor\n", n.Addr(), p)
		return 3
	}
	return 0
}

// testNode is a node in a child process.
type testNode struct {
	addr   string
	cmd    *exec.Cmd
	stdin  io.Closer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit, once done
	killed bool
}

// spawnNode starts a node process on listen ("127.0.0.1:0": any free
// port) and waits for its address.
func spawnNode(listen string, env ...string) (*testNode, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), nodeEnv+"="+listen), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &testNode{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		n.err = cmd.Wait()
		close(n.done)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			_ = n.stop()
			return nil, errors.New("the node exited before serving")
		}
		n.addr = strings.TrimPrefix(line, "node ")
		return n, nil
	case <-time.After(60 * time.Second):
		_ = n.stop()
		return nil, errors.New("no node address within 60s")
	}
}

// stop stops the node (SIGTERM, then SIGKILL after 20s), waits, and
// returns how it exited: under -race a node that raced exits non-zero.
func (n *testNode) stop() error {
	_ = n.stdin.Close()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(20 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	return n.err
}

func startNode(t testing.TB, listen string, env ...string) *testNode {
	t.Helper()
	n, err := spawnNode(listen, env...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := n.stop(); err != nil && !n.killed {
			t.Errorf("node %s exited with %v", n.addr, err)
		}
	})
	return n
}

func (n *testNode) kill(t testing.TB) {
	t.Helper()
	n.killed = true
	require.NoError(t, n.cmd.Process.Kill())
	<-n.done
}

var (
	driverOnce sync.Once
	driverSys  *actor.ActorSystem
	driverRem  *paremote.Remote
	driverErr  error
)

// sharedRemote is this process's actor system and remote, for drivers.
func sharedRemote(t testing.TB) (*actor.ActorSystem, *paremote.Remote) {
	t.Helper()
	sys, rem := exampleRemote()
	require.NoError(t, driverErr)
	return sys, rem
}

func exampleRemote() (*actor.ActorSystem, *paremote.Remote) {
	driverOnce.Do(func() {
		driverSys = actors.NewActorSystem(nil)
		driverRem, driverErr = startRemote(driverSys, "127.0.0.1:0", "", Transport{}, nil)
	})
	return driverSys, driverRem
}

// startDriver starts a driver on this process's remote.
func startDriver(t testing.TB, cfg Config) *Runtime {
	t.Helper()
	sharedRemote(t)
	if cfg.Model == nil {
		data, err := os.ReadFile(dsv4)
		require.NoError(t, err)
		cfg.ModelName, cfg.Model = dsv4, data
	}
	if cfg.Form == "" {
		cfg.Form = "full"
	}
	cfg.Remote = driverRem
	rt, err := Start(driverSys, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
	})
	return rt
}

// inProcess is the pass every remote pass must equal: the same model and
// form (pair) in this process. (tests/remote_test.go runs DSv4 full with
// the golden check, on hbgrun processes.)
func inProcess(t *testing.T) *actors.PassResult {
	t.Helper()
	m, err := config.Load(dsv4)
	require.NoError(t, err)
	orch, err := m.Orchestration("pair")
	require.NoError(t, err)
	sys := actors.NewActorSystem(nil)
	rt, err := actors.Start(sys, actors.Config{})
	require.NoError(t, err)
	defer func() { _ = rt.Stop(context.Background()); sys.Shutdown() }()
	res, err := rt.Pass(context.Background(), orch, 0, 0)
	require.NoError(t, err)
	return res
}

func TestRanksOnTwoNodes(t *testing.T) {
	a, b := startNode(t, "127.0.0.1:0"), startNode(t, "127.0.0.1:0")
	rt := startDriver(t, Config{Nodes: []string{a.addr, b.addr}, Ranks: 2, Form: "pair"})
	want := inProcess(t)
	assert.Equal(t, a.addr, rt.Node(0))
	assert.Equal(t, b.addr, rt.Node(1))

	passes, err := rt.Run(context.Background(), actors.RunSpec{Orchestration: rt.Orchestration(), Rounds: 2, Ranks: 2})
	require.NoError(t, err)
	require.Len(t, passes, 4)
	for _, p := range passes {
		require.NotNil(t, p)
		require.NotNil(t, p.Device, "rank %d round %d", p.Pass.Rank, p.Pass.Round)
		assert.Equal(t, want.Device.Digest, p.Device.Digest, "rank %d round %d", p.Pass.Rank, p.Pass.Round)
		assert.Equal(t, want.Device.Tasks, p.Device.Tasks)
		assert.Equal(t, want.Counts.HostSubmissions, p.Counts.HostSubmissions)
		assert.Nil(t, p.Golden, "no golden check asked for")
		assert.Equal(t, p.Pass.Round == 0, p.Pass.Cold)
	}
	// Every pass is one request out and one result back.
	assert.Equal(t, int64(4), rt.Wire.Sent.Load())
	assert.Equal(t, int64(4), rt.Wire.Received.Load())
	// Each node got the form's Definitions once, in its rank's cold pass:
	// recorded there, or fetched from the other node (package peer, whose
	// tests say the cluster records each once).
	built, fetched := 0, 0
	for _, p := range passes {
		built += p.Pass.BuiltDefinitions
		fetched += p.Pass.FetchedDefinitions
		if !p.Pass.Cold {
			assert.Zero(t, p.Pass.BuiltDefinitions+p.Pass.FetchedDefinitions, "a warm pass records and fetches nothing")
		}
	}
	assert.Equal(t, 2*want.Pass.BuiltDefinitions, built+fetched)
}

func TestPassRefused(t *testing.T) {
	a := startNode(t, "127.0.0.1:0")
	rt := startDriver(t, Config{Nodes: []string{a.addr}, Ranks: 1, Form: "pair"})
	other := *rt.Orchestration()
	other.Name = "something else"
	for _, tc := range []struct {
		name        string
		orch        *actors.Orchestration
		rank, round int
	}{
		{"nil orchestration", nil, 0, 0},
		{"another orchestration", &other, 0, 0},
		{"rank not placed", rt.Orchestration(), 1, 0},
		{"negative round", rt.Orchestration(), 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt.Pass(context.Background(), tc.orch, tc.rank, tc.round)
			assert.ErrorIs(t, err, actors.ErrInvalidPass)
		})
	}
}

func TestNodeUnreachable(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	data, err := os.ReadFile(dsv4)
	require.NoError(t, err)
	sys, rem := sharedRemote(t)
	t0 := time.Now()
	_, err = Start(sys, Config{Nodes: []string{addr}, Ranks: 2, ModelName: dsv4, Model: data, Form: "full", NodeTimeout: time.Second, Remote: rem})
	require.ErrorIs(t, err, ErrNodeLost)
	var ne *NodeError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, addr, ne.Node)
	assert.Equal(t, []int{0, 1}, ne.Ranks)
	assert.Contains(t, err.Error(), addr)
	assert.Less(t, time.Since(t0), 5*time.Second, "bounded by the node timeout")
}

// A node killed (SIGKILL) fails its ranks' passes at once (ErrNodeLost,
// naming it and its ranks); the other node's ranks go on, and a node
// restarted on the same address serves the next run.
func TestNodeKilled(t *testing.T) {
	a, b := startNode(t, "127.0.0.1:0"), startNode(t, "127.0.0.1:0")
	rt := startDriver(t, Config{Nodes: []string{a.addr, b.addr}, Ranks: 2, Form: "pair", NodeTimeout: 3 * time.Second, Runtime: actors.Config{SkipDevice: true}})
	orch := rt.Orchestration()
	ctx := context.Background()
	for rank := range 2 {
		_, err := rt.Pass(ctx, orch, rank, 0)
		require.NoError(t, err)
	}
	// protoactor keys its endpoints by address: the old connection's end,
	// if it came after the node was restarted on the same address, would
	// remove the new connection's endpoint with requests in flight. The
	// restart below waits for it.
	sys, _ := sharedRemote(t)
	ended := make(chan struct{})
	var once sync.Once
	sub := sys.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(*paremote.EndpointTerminatedEvent); ok && e.Address == b.addr {
			once.Do(func() { close(ended) })
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	b.kill(t)
	t0 := time.Now()
	_, err := rt.Pass(ctx, orch, 1, 1)
	require.ErrorIs(t, err, ErrNodeLost)
	assert.Less(t, time.Since(t0), 5*time.Second, "within the node timeout")
	var ne *NodeError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, b.addr, ne.Node)
	assert.Equal(t, []int{1}, ne.Ranks)
	assert.Equal(t, 1, ne.Rank)
	res, err := rt.Pass(ctx, orch, 0, 1)
	require.NoError(t, err, "rank 0's node is alive")
	assert.Equal(t, 1, res.Pass.Round)

	// The same address, a new process: the next run is served.
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the driver's connection to the killed node did not end")
	}
	b2 := startNode(t, b.addr)
	require.Equal(t, b.addr, b2.addr)
	next := startDriver(t, Config{Nodes: []string{a.addr, b2.addr}, Ranks: 2, Form: "pair", NodeTimeout: 3 * time.Second, Runtime: actors.Config{SkipDevice: true}})
	res, err = next.Pass(ctx, next.Orchestration(), 1, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Pass.Rank)
}

// A placement whose model does not hash to its hash is refused, not run.
func TestPlacementRefused(t *testing.T) {
	a := startNode(t, "127.0.0.1:0")
	sys, rem := sharedRemote(t)
	resp, err := rem.SpawnNamed(a.addr, "hbg-run-bad", Kind, 5*time.Second)
	require.NoError(t, err)
	yaml := []byte("name: x\n")
	place := &wire.Place{Run: "bad", ModelName: "x.yaml", ModelYaml: yaml, ModelSha256: wire.ModelHash([]byte("name: y\n")),
		Form: "full", Ranks: []int32{0}, Nodes: []string{a.addr}, DriverAddress: sys.Address(), DriverId: "nobody",
		Options: &wire.Options{Recorders: 1, InFlight: 1}}
	res, err := sys.Root.RequestFuture(resp.GetPid(), place, 10*time.Second).Result()
	require.NoError(t, err)
	placed, ok := res.(*wire.Placed)
	require.True(t, ok, "%T", res)
	require.NotNil(t, placed.GetFailure())
	assert.Equal(t, wire.Failure_BAD_MESSAGE, placed.GetFailure().GetKind())
	assert.ErrorIs(t, placed.GetFailure().Err(), wire.ErrBadMessage)
	assert.Contains(t, placed.GetFailure().GetText(), "do not hash")
}

// TestGivenUpPassEnds: a pass the driver gives up on (its context ended)
// is ended on its node too, not run to its end for nobody: the node
// answers it canceled.
func TestGivenUpPassEnds(t *testing.T) {
	a := startNode(t, "127.0.0.1:0")
	dropped := make(chan *wire.PassResult, 1)
	// The device simulated: a pass takes tens of milliseconds on the node,
	// the cancel a message behind its request.
	rt := startDriver(t, Config{Nodes: []string{a.addr}, Ranks: 1, dropped: func(m *wire.PassResult) { dropped <- m }})
	_, err := rt.Pass(context.Background(), rt.Orchestration(), 0, 0)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	p, err := rt.AskPass(ctx, rt.Orchestration(), 0, 1)
	require.NoError(t, err)
	const seq = uint64(2) // the run's second pass
	cancel()
	_, err = p.Wait(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), rt.Wire.Cancels.Load())
	select {
	case m := <-dropped:
		assert.Equal(t, seq, m.GetSeq())
		assert.Equal(t, wire.Failure_CANCELED, m.GetFailure().GetKind(), "the node ran the pass to its end: %v", m.GetFailure())
		assert.Equal(t, int64(1), rt.Wire.Ended.Load())
	case <-time.After(30 * time.Second):
		t.Fatal("no answer from the node to the pass given up on")
	}
	// The rank goes on.
	res, err := rt.Pass(context.Background(), rt.Orchestration(), 0, 2)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Pass.Round)
}
