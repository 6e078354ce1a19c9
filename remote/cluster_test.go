package remote

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/internal/etcdtest"
)

// etcdEnv names, for a child node, the cluster in etcd it joins:
// ENDPOINT|CACERT|CERT|KEY|CLUSTER.
const etcdEnv = "HBG_REMOTE_TEST_ETCD"

func etcdFromEnv() Etcd {
	f := strings.Split(os.Getenv(etcdEnv), "|")
	if len(f) != 5 {
		return Etcd{}
	}
	return Etcd{Endpoints: []string{f[0]}, CACert: f[1], Cert: f[2], Key: f[3], Cluster: f[4]}
}

func testEtcd(t *testing.T, cluster string) (Etcd, string) {
	t.Helper()
	s := etcdtest.Start(t)
	e := Etcd{Endpoints: []string{s.Endpoint}, CACert: s.CACert, Cert: s.Cert, Key: s.Key, Cluster: cluster}
	return e, etcdEnv + "=" + strings.Join([]string{s.Endpoint, s.CACert, s.Cert, s.Key, cluster}, "|")
}

func waitAddr(t *testing.T, ch <-chan string, want string, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case a := <-ch:
			if a == want {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no event for %s within 30s", what, want)
		}
	}
}

// TestNodesThroughEtcd: nodes join a cluster in a real etcd (TLS, client
// certificates), a driver finds them there and runs on them; a node that
// joins later and one that is killed are the cluster's topology events
// at the driver (the killed one when its lease ends). A driver without a
// certificate etcd takes, or of an empty cluster, fails to start and says
// why.
func TestNodesThroughEtcd(t *testing.T) {
	e, env := testEtcd(t, "t-nodes")
	a, b := startNode(t, "127.0.0.1:0", env), startNode(t, "127.0.0.1:0", env)
	joined, left := make(chan string, 8), make(chan string, 8)
	rt := startDriver(t, Config{Etcd: e, Ranks: 2, Form: "pair", NodeTimeout: 3 * time.Second,
		OnNodeJoined: func(addr string) { joined <- addr }, OnNodeLeft: func(addr string) { left <- addr }})
	assert.ElementsMatch(t, []string{a.addr, b.addr}, []string{rt.Node(0), rt.Node(1)})
	want := inProcess(t)
	passes, err := rt.Run(context.Background(), actors.RunSpec{Orchestration: rt.Orchestration(), Rounds: 1, Ranks: 2})
	require.NoError(t, err)
	for _, p := range passes {
		assert.Equal(t, want.Device.Digest, p.Device.Digest, "rank %d", p.Pass.Rank)
	}

	c := startNode(t, "127.0.0.1:0", env)
	waitAddr(t, joined, c.addr, "join")
	assert.Equal(t, []string{c.addr}, rt.Joined())
	c.kill(t)
	waitAddr(t, left, c.addr, "leave")

	t.Run("no client certificate", func(t *testing.T) {
		bad := e
		bad.Cert, bad.Key, bad.DialTimeout = "", "", 2*time.Second
		sys, rem := sharedRemote(t)
		data, err := os.ReadFile(dsv4)
		require.NoError(t, err)
		_, err = Start(sys, Config{Etcd: bad, Ranks: 1, ModelName: dsv4, Model: data, Form: "pair", Remote: rem})
		require.ErrorIs(t, err, ErrEtcdUnreachable)
	})
	t.Run("empty cluster", func(t *testing.T) {
		empty := e
		empty.Cluster = "t-none"
		sys, rem := sharedRemote(t)
		data, err := os.ReadFile(dsv4)
		require.NoError(t, err)
		_, err = Start(sys, Config{Etcd: empty, Ranks: 1, ModelName: dsv4, Model: data, Form: "pair", Remote: rem})
		require.ErrorIs(t, err, ErrNoMembers)
	})
}

// TestRanksMovedToJoinedNode: a node of a cluster in etcd killed while
// the run runs has its rank placed again on a node that joined: the
// rank's next pass runs there, to the same digest, and no pass fails.
func TestRanksMovedToJoinedNode(t *testing.T) {
	e, env := testEtcd(t, "t-moved")
	a, b := startNode(t, "127.0.0.1:0", env), startNode(t, "127.0.0.1:0", env)
	joined := make(chan string, 8)
	type move struct {
		from, to string
		ranks    []int
		err      error
	}
	moved := make(chan move, 1)
	rt := startDriver(t, Config{Etcd: e, Ranks: 2, Form: "pair", NodeTimeout: 3 * time.Second,
		OnNodeJoined: func(addr string) { joined <- addr },
		OnRanksMoved: func(from, to string, ranks []int, err error) { moved <- move{from, to, ranks, err} }})
	want := inProcess(t)
	orch, ctx := rt.Orchestration(), context.Background()
	for rank := range 2 {
		_, err := rt.Pass(ctx, orch, rank, 0)
		require.NoError(t, err)
	}
	c := startNode(t, "127.0.0.1:0", env)
	waitAddr(t, joined, c.addr, "join")
	victim, rank := a, 0
	if rt.Node(rank) == b.addr {
		victim = b
	}
	victim.kill(t)
	res, err := rt.Pass(ctx, orch, rank, 1)
	require.NoError(t, err, "the pass waits for its rank's new node")
	assert.Equal(t, want.Device.Digest, res.Device.Digest)
	select {
	case m := <-moved:
		require.NoError(t, m.err)
		assert.Equal(t, victim.addr, m.from)
		assert.Equal(t, c.addr, m.to)
		assert.Equal(t, []int{rank}, m.ranks)
	case <-time.After(30 * time.Second):
		t.Fatal("no move within 30s")
	}
	assert.Equal(t, c.addr, rt.Node(rank))
	res, err = rt.Pass(ctx, orch, 1-rank, 1)
	require.NoError(t, err, "the other rank's node is alive")
	assert.Equal(t, want.Device.Digest, res.Device.Digest)
}

// TestClusterEtcdChurn: a run over three nodes found in etcd, with the
// golden check; after its first round a fourth node joins and one of the
// three is killed: its rank is placed again on the new node, every pass
// of every round ends with a golden match, and the cluster records each
// Definition at most once more for the owner lost (the new node records
// what it cannot fetch).
func TestClusterEtcdChurn(t *testing.T) {
	e, env := testEtcd(t, "t-churn")
	nodes := map[string]*testNode{}
	for range 3 {
		n := startNode(t, "127.0.0.1:0", env)
		nodes[n.addr] = n
	}
	joined := make(chan string, 8)
	rt := startDriver(t, Config{Etcd: e, Ranks: 3, Form: "pair", NodeTimeout: 3 * time.Second,
		Runtime:      actors.Config{Golden: true},
		OnNodeJoined: func(addr string) { joined <- addr }})
	orch, ctx := rt.Orchestration(), context.Background()
	keys := inProcess(t).Pass.BuiltDefinitions
	require.Positive(t, keys)
	built := 0
	round := func(r int) {
		t.Helper()
		for rank := range 3 {
			res, err := rt.Pass(ctx, orch, rank, r)
			require.NoError(t, err, "rank %d round %d", rank, r)
			require.NotNil(t, res.Golden, "rank %d round %d", rank, r)
			assert.True(t, res.Golden.Match, "rank %d round %d: golden %v", rank, r, res.Golden.Verdict)
			built += res.Pass.BuiltDefinitions
		}
	}
	round(0)
	assert.Equal(t, keys, built, "three nodes record each key once")
	d := startNode(t, "127.0.0.1:0", env)
	waitAddr(t, joined, d.addr, "join")
	victim := nodes[rt.Node(1)]
	require.NotNil(t, victim)
	victim.kill(t)
	round(1)
	round(2)
	assert.Equal(t, d.addr, rt.Node(1))
	t.Logf("keys %d, recorded across the cluster %d (the new node: %d)", keys, built, built-keys)
	assert.LessOrEqual(t, built, 2*keys, "at most once more per owner lost")
}

// TestEtcdOwnerOneRecorder: two nodes of a cluster in etcd pass the same
// model at once, so each misses every key at the same moment: each key's
// owner (a virtual actor of the cluster) grants one of them its claim, and
// the other is sent the image. Counted from the work done: the two passes
// record each Definition once between them and fetch the rest.
func TestEtcdOwnerOneRecorder(t *testing.T) {
	e, env := testEtcd(t, "t-owner")
	startNode(t, "127.0.0.1:0", env)
	startNode(t, "127.0.0.1:0", env)
	rt := startDriver(t, Config{Etcd: e, Ranks: 2, Form: "pair", NodeTimeout: 3 * time.Second})
	require.NotEqual(t, rt.Node(0), rt.Node(1))
	keys := inProcess(t).Pass.BuiltDefinitions
	require.Positive(t, keys)
	orch := rt.Orchestration()
	res := make([]*actors.PassResult, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[rank], errs[rank] = rt.Pass(context.Background(), orch, rank, 0)
		}()
	}
	close(start)
	wg.Wait()
	built, fetched := 0, 0
	for rank := range 2 {
		require.NoError(t, errs[rank], "rank %d", rank)
		built += res[rank].Pass.BuiltDefinitions
		fetched += res[rank].Pass.FetchedDefinitions
	}
	assert.Equal(t, keys, built, "each key recorded once by the two nodes")
	assert.Equal(t, keys, fetched, "and fetched by the other")
}
