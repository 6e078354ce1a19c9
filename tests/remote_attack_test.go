package tests

// The cluster tried as an attacker would, after issue 27's TLS and limits:
// `hbgrun node` processes on 127.0.0.1 and attackers built on the
// repository's own wire package and protoactor remote (this test binary
// run again, as in remote_sec_test.go).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/remote"
	"github.com/hbg-dev/hbg/trace"
	"github.com/hbg-dev/hbg/wire"
)

// TestNodeTaskBomb: a valid model whose pass is 10^9 device tasks, with a
// max_tasks: of its own that allows it, is refused at placement by the
// node's bound (--max-tasks, default config.DefaultMaxTasks), named, before
// any pass: the model's own word had lifted the node's bound, and the first
// pass took the node's memory (and every run on it) with it.
func TestNodeTaskBomb(t *testing.T) {
	n := startNodeProc(t, "127.0.0.1:0")
	res := attack(t, attackSpec{Op: "place", Local: true, Nodes: []string{n.addr}, Model: "testdata/attack/task_bomb.yaml", Form: "eager"})
	assert.Zero(t, res.Placed, res.Answered)
	assert.Equal(t, "LIMIT_TASKS", res.Kind, res.Failure)
	assert.Contains(t, res.Failure, "more than 4194304 tasks per pass, the node's limit (--max-tasks)")
	assert.ErrorIs(t, (&wire.Failure{Kind: wire.Failure_LIMIT_TASKS}).Err(), remote.ErrTooManyTasks)
	assert.ErrorIs(t, (&wire.Failure{Kind: wire.Failure_LIMIT_TASKS}).Err(), remote.ErrLimit)

	// The node's own --max-tasks is the bound, above or below the default.
	m := startNodeProc(t, "127.0.0.1:0", "--max-tasks", "1000")
	res = attack(t, attackSpec{Op: "place", Local: true, Nodes: []string{m.addr}})
	assert.Equal(t, "LIMIT_TASKS", res.Kind, res.Failure)
	assert.Contains(t, res.Failure, "more than 1000 tasks per pass")
}

// TestNodeEdgeBomb: a model of a few lines whose pass resolves 256M
// dependency edges is refused at placement by the node's bound on edges,
// named, before any runtime is built for it; the node then serves an
// honest run. On the code before, the node built the edges until it ran
// out of memory (under a 6 GB limit it died, and the run beside it).
func TestNodeEdgeBomb(t *testing.T) {
	n := startNodeProc(t, "127.0.0.1:0")
	res := attack(t, attackSpec{Op: "place", Local: true, Nodes: []string{n.addr}, Model: "testdata/attack/edge_bomb.yaml", Form: "eager"})
	assert.Zero(t, res.Placed, res.Answered)
	assert.Contains(t, res.Failure, "too many dependency edges")
	assert.Contains(t, res.Failure, "the node's limit: --max-edges")
	assert.Equal(t, "LIMIT_EDGES", res.Kind, res.Failure)
	assert.ErrorIs(t, (&wire.Failure{Kind: wire.Failure_LIMIT_EDGES}).Err(), remote.ErrTooManyEdges)
	_, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "2", "--store", "off", "--nodes", n.addr)
	assert.Zero(t, code, stderr)
}

// TestRemoteRogueNode: one node of a run is an attacker's (it is placed
// like any node, so it knows the run id, the driver's actor and the seqs
// it is sent); it serves at and dials from 127.0.0.2, as another machine
// would. It sends the other node's run a Release, a cancel of every seq,
// and a Terminated naming the driver and one naming itself, over a
// connection of its own, and sends the driver a result for every seq it
// was not sent, each claiming rank 0. (Before the stamp's check, a
// Terminated from any connection reached the run host as protoactor's
// own, and one naming the driver ended the run.)
// The real node takes none of them (only the connection it was placed
// over speaks for the driver), the driver none (only the node a pass went
// to has its placement's token), and rank 0 ends every round with the
// in-process digest.
func TestRemoteRogueNode(t *testing.T) {
	want := localDigest(t)
	// Without TLS (the rogue's connections speak for its IP address, as
	// another machine's would): with the local PKI it would hold the
	// driver's names, being this user's.
	a := startNodeProc(t, "127.0.0.1:0", "--insecure-loopback")
	rogue := startRogue(t)
	_, stderr, _ := runCLI(t, "run", dsv4, "--form", "full", "--ranks", "2", "--rounds", "3", "-v", "--store", "off",
		"--insecure-loopback", "--nodes", a.addr+","+rogue.addr)
	r := rogue.stop(t)
	require.NotZero(t, r.Forged, "the rogue node forged nothing: %+v", r)
	require.NotZero(t, r.Terminated, "the rogue node sent no Terminated: %+v", r)
	assert.Zero(t, r.Released, "the real node released its run for another process")
	digests := passDigests(stderr)
	for round := range 3 {
		assert.Equal(t, want, digests[0][round], "rank 0 round %d: %s", round, stderr)
	}
	assert.NotContains(t, stderr, "rank host ended")
	assert.NotContains(t, stderr, "from node "+a.addr+" was refused")
}

// rogueEnv makes this test binary a rogue node: it serves remote.Kind on
// 127.0.0.1, prints its address, attacks the runs placed on it until its
// stdin closes, then prints a rogueResult.
const rogueEnv = "HBG_TEST_ROGUE_NODE"

func init() {
	if os.Getenv(rogueEnv) != "" {
		r := rogueNode(os.Stdin, os.Stdout)
		_ = json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	}
}

type rogueResult struct {
	// Forged counts the rounds of results sent the driver for seqs the
	// rogue node was not sent; Released, the real node's answers to the
	// Release it sent (a cancel it took shows as a rank 0 pass failed).
	Forged, Released int
	// Terminated counts the Terminated messages sent the other nodes'
	// run hosts, for the driver and for the rogue itself.
	Terminated int
}

// rogueIP is the rogue node's loopback address.
const rogueIP = "127.0.0.2"

type rogueProc struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startRogue(t *testing.T) *rogueProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), rogueEnv+"=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &rogueProc{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	p.out.Buffer(nil, 1<<20)
	require.True(t, p.out.Scan(), "the rogue node printed no address")
	p.addr = strings.TrimSpace(p.out.Text())
	return p
}

func (p *rogueProc) stop(t *testing.T) rogueResult {
	t.Helper()
	require.NoError(t, p.stdin.Close())
	require.True(t, p.out.Scan(), "the rogue node printed no result")
	var r rogueResult
	require.NoError(t, json.Unmarshal(p.out.Bytes(), &r), p.out.Text())
	return r
}

// rogueNode is a node that answers its placement and pings as a node does
// (with its token), fails its own passes, and attacks the run's other
// nodes and its driver.
func rogueNode(stdin io.Reader, stdout io.Writer) rogueResult {
	sys := actors.NewActorSystem(nil)
	var (
		mu  sync.Mutex
		res rogueResult
	)
	kind := paremote.NewKind(remote.Kind, actor.PropsFromFunc((&rogueHost{res: &res, mu: &mu}).Receive))
	// Another loopback address than the node's and the driver's, served
	// and dialled from: its connections speak for 127.0.0.2 only, as
	// another machine's would for its own.
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(rogueIP)}}
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return from.DialContext(ctx, "tcp", addr) })
	rem := paremote.NewRemote(sys, paremote.Configure(rogueIP, 0, paremote.WithKinds(kind), paremote.WithDialOptions(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))))
	rem.Start()
	fmt.Fprintln(stdout, sys.Address())
	_, _ = io.Copy(io.Discard, stdin)
	rem.Shutdown(false)
	mu.Lock()
	defer mu.Unlock()
	return res
}

type rogueHost struct {
	mu    *sync.Mutex
	res   *rogueResult
	place *wire.Place
	own   map[uint64]bool
}

func (h *rogueHost) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.Place:
		h.place, h.own = m, map[uint64]bool{}
		ctx.Respond(&wire.Placed{Run: m.GetRun(), Node: ctx.Self().GetAddress(), Ranks: m.GetRanks()})
	case *wire.Ping:
		ctx.Respond(&wire.Pong{Seq: m.GetSeq(), Node: ctx.Self().GetAddress(), Token: h.place.GetToken()})
	case *wire.Release:
		ctx.Respond(&wire.Released{Run: m.GetRun()})
	case *wire.PassRequest:
		h.own[m.GetSeq()] = true
		drv := actor.NewPID(h.place.GetDriverAddress(), h.place.GetDriverId())
		if len(h.own) == 1 {
			h.attackOthers(ctx, drv)
		}
		ctx.Send(drv, &wire.PassResult{Run: m.GetRun(), Seq: m.GetSeq(), Rank: m.GetRank(), Round: m.GetRound(),
			Node: ctx.Self().GetAddress(), Token: h.place.GetToken(),
			Failure: &wire.Failure{Kind: wire.Failure_OTHER, Text: "a rogue node runs no pass"}})
	}
}

// attackOthers, at the rogue node's first pass (every node is placed by
// then), releases and cancels the run on the other nodes, and forges a
// result of rank 0 for every seq not its own, until the driver has had
// them all.
func (h *rogueHost) attackOthers(ctx actor.Context, drv *actor.PID) {
	run := h.place.GetRun()
	var others []*actor.PID
	for i, n := range h.place.GetNodes() {
		if i != int(h.place.GetNode()) {
			// protoactor names an actor spawned by name activator/Remote$NAME.
			others = append(others, actor.NewPID(n, "activator/Remote$hbg-run-"+run))
		}
	}
	root := ctx.ActorSystem().Root
	for _, o := range others {
		// The driver's end and the rogue's own, each a Terminated the
		// other node's run host would take for its driver's.
		root.Send(o, &actor.Terminated{Who: drv})
		root.Send(o, &actor.Terminated{Who: ctx.Self()})
		h.mu.Lock()
		h.res.Terminated += 2
		h.mu.Unlock()
		for seq := uint64(1); seq <= 16; seq++ {
			root.Send(o, &wire.CancelPass{Run: run, Seq: seq, Reason: "rogue"})
		}
		go func() {
			res, err := root.RequestFuture(o, &wire.Release{Run: run}, 5*time.Second).Result()
			if _, ok := res.(*wire.Released); ok && err == nil {
				h.mu.Lock()
				h.res.Released++
				h.mu.Unlock()
			}
		}()
	}
	own := map[uint64]bool{}
	for s := range h.own {
		own[s] = true
	}
	// The forgeries go on while the real node's passes run (each a few
	// milliseconds or more): whichever pass of rank 0 is waiting then
	// gets one, if the driver takes it.
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for range 500 {
			<-t.C
			for seq := uint64(1); seq <= 16; seq++ {
				if own[seq] {
					continue
				}
				for round := range int32(3) {
					root.Send(drv, &wire.PassResult{Run: run, Seq: seq, Rank: 0, Round: round, Node: h.place.GetNodes()[0],
						Device: &wire.Device{Digest: 0xbad}})
				}
				h.mu.Lock()
				h.res.Forged++
				h.mu.Unlock()
			}
		}
	}()
}

// TestNodeConnLimit: connections that send nothing are bounded, in number
// (--max-conns: one over it is closed at once, said on the node's stderr)
// and in time (closed by the node after its handshake timeout, 10 s, not
// gRPC's 120 s): 19,500 of them had held 420 MB of a node's memory and all
// but 500 of its file descriptors. Once they are gone, a driver runs.
func TestNodeConnLimit(t *testing.T) {
	n := startNodeProc(t, "127.0.0.1:0", "--max-conns", "4")
	var conns []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", n.addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, c)
	}
	waitLines(t, "hbgrun node: closed a connection from 127.0.0.1:", 1, 30*time.Second, n)
	assert.Contains(t, n.log.String(), "too many connections: 4 open, the limit (--max-conns 4)")
	for i, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(3*remote.HandshakeTimeout)))
		// The node speaks first (its HTTP/2 settings); then it hangs up.
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "connection %d: still open after %v", i, 3*remote.HandshakeTimeout)
	}
	_, stderr, code := runCLI(t, "run", dsv4, "--ranks", "1", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", n.addr)
	assert.Equal(t, 0, code, stderr)
}

// TestRemoteStopFromWire: protoactor remote delivers its own messages from
// the wire to any actor they name: a Stop or a PoisonPill sent to a node's
// peer actor (hbg-peer, a fixed name) stopped it, and every later run on
// the node recorded what it could have fetched, each ask waiting out its
// timeout. A node now drops both from any remote; the next run fetches
// every Definition it lacks, as before the attack.
func TestRemoteStopFromWire(t *testing.T) {
	a, b := startNodeProc(t, "127.0.0.1:0"), startNodeProc(t, "127.0.0.1:0")
	// A run of another form starts the nodes' peers.
	_, stderr, code := runCLI(t, "run", dsv4, "--form", "blocks", "--ranks", "2", "--rounds", "1", "--store", "off", "--nodes", a.addr+","+b.addr)
	require.Equal(t, 0, code, stderr)
	res := attack(t, attackSpec{Op: "kill", Local: true, Nodes: []string{a.addr, b.addr}})
	require.Equal(t, 2, res.Published)

	out, stderr, code := runDSv4(t, []*nodeProc{a, b})
	require.Equal(t, 0, code, stderr)
	var rep trace.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, int64(8), rep.Counts.FetchedDefinitions, "%v", rep.Warnings)
	assert.Empty(t, rep.Warnings)
}
