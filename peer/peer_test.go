package peer

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/config/models"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// dsv4Keys is the Definitions DSv4's full form records.
const dsv4Keys = 8

var dsv4 = sync.OnceValues(func() (*actors.Orchestration, error) {
	m, err := config.Parse(models.DefaultName, models.Default)
	if err != nil {
		return nil, err
	}
	return m.Orchestration("full")
})

func orchestration(t testing.TB) *actors.Orchestration {
	t.Helper()
	o, err := dsv4()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// reference is DSv4 full's digest and images, from one runtime alone (no
// peers), its Definitions kept in a store on disk.
type reference struct {
	digest uint64
	images map[uint64][]byte // by full_key
}

var refOnce struct {
	sync.Once
	ref *reference
	err error
}

func dsv4Reference(t *testing.T) *reference {
	t.Helper()
	refOnce.Do(func() {
		o, err := dsv4()
		if err != nil {
			refOnce.err = err
			return
		}
		sys := actors.NewActorSystem(nil)
		defer sys.Shutdown()
		rt, err := actors.Start(sys, actors.Config{StoreDir: t.TempDir()})
		if err != nil {
			refOnce.err = err
			return
		}
		defer rt.Stop(context.Background())
		res, err := rt.Pass(context.Background(), o, 0, 0)
		if err != nil {
			refOnce.err = err
			return
		}
		if errs := rt.FlushStore(); len(errs) > 0 {
			refOnce.err = errs[0]
			return
		}
		ref := &reference{digest: res.Device.Digest, images: map[uint64][]byte{}}
		list, err := rt.Disk().List()
		if err != nil {
			refOnce.err = err
			return
		}
		for _, e := range list {
			var fk uint64
			fmt.Sscanf(e.FullKey, "%x", &fk)
			l, err := rt.Disk().Load(fk, "")
			if err != nil || l == nil {
				refOnce.err = fmt.Errorf("loading %s: %v", e.FullKey, err)
				return
			}
			rt.Disk().Unpin(fk)
			ref.images[fk] = l.Image
		}
		refOnce.ref = ref
	})
	if refOnce.err != nil {
		t.Fatal(refOnce.err)
	}
	if len(refOnce.ref.images) != dsv4Keys {
		t.Fatalf("reference run kept %d Definitions, want %d", len(refOnce.ref.images), dsv4Keys)
	}
	return refOnce.ref
}

// system is an actor system with protoactor remote on a free loopback port.
func system(t testing.TB) (*actor.ActorSystem, string) {
	t.Helper()
	sys := actors.NewActorSystem(nil)
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	t.Cleanup(func() { r.Shutdown(false); sys.Shutdown() })
	return sys, sys.Address()
}

// node is one node of a test cluster: a peer and a runtime using it.
type node struct {
	sys  *actor.ActorSystem
	addr string
	peer *Node
	rt   *actors.Runtime
}

// cluster starts n nodes that know each other; tune adjusts each node's
// peer and runtime configuration before it starts.
func cluster(t testing.TB, n int, tune func(i int, addrs []string, pc *Config, rc *actors.Config)) []*node {
	t.Helper()
	nodes := make([]*node, n)
	addrs := make([]string, n)
	for i := range nodes {
		sys, addr := system(t)
		nodes[i] = &node{sys: sys, addr: addr}
		addrs[i] = addr
	}
	for i, nd := range nodes {
		pc := Config{Self: nd.addr, Nodes: addrs}
		rc := actors.Config{}
		if tune != nil {
			tune(i, addrs, &pc, &rc)
		}
		p, err := Start(nd.sys, pc)
		if err != nil {
			t.Fatal(err)
		}
		nd.peer = p
		rc.Peers = p
		rt, err := actors.Start(nd.sys, rc)
		if err != nil {
			t.Fatal(err)
		}
		p.SetDisk(rt.Disk())
		nd.rt = rt
		t.Cleanup(func() { rt.Stop(context.Background()) })
	}
	return nodes
}

func pass(t testing.TB, nd *node, orch *actors.Orchestration, round int) *actors.PassResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := nd.rt.Pass(ctx, orch, 0, round)
	if err != nil {
		t.Fatalf("node %s round %d: %v", nd.addr, round, err)
	}
	return res
}

// checkWarm checks a warm pass: nothing recorded, fetched or asked.
func checkWarm(t *testing.T, nd *node, orch *actors.Orchestration) {
	t.Helper()
	res := pass(t, nd, orch, 1)
	p := res.Pass
	if p.BuiltDefinitions != 0 || p.FetchedDefinitions != 0 || p.Ops[trace.OpPeerFetch].Count != 0 {
		t.Fatalf("node %s warm pass: built %d, fetched %d, asked %d; want 0, 0, 0", nd.addr, p.BuiltDefinitions, p.FetchedDefinitions, p.Ops[trace.OpPeerFetch].Count)
	}
}

// TestRecordedOncePerCluster: two nodes run DSv4 full's first pass at the
// same moment: the cluster records each of its 8 Definitions once, and the
// node that did not record a Definition fetched it (recorded 8 + fetched 8
// across the two); both end with the single-process digest, and a second
// pass records and fetches nothing.
func TestRecordedOncePerCluster(t *testing.T) {
	ref := dsv4Reference(t)
	orch := orchestration(t)
	nodes := cluster(t, 2, nil)
	res := make([]*actors.PassResult, len(nodes))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, nd := range nodes {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := nd.rt.Pass(ctx, orch, 0, 0)
			if err != nil {
				t.Errorf("node %d: %v", i, err)
				return
			}
			res[i] = r
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	recorded, fetched := 0, 0
	for i, r := range res {
		p := r.Pass
		if p.BuiltDefinitions+p.FetchedDefinitions != dsv4Keys || p.FetchRejected != 0 {
			t.Errorf("node %d: built %d + fetched %d, rejected %d; want %d in all, 0 rejected (warnings %q)", i, p.BuiltDefinitions, p.FetchedDefinitions, p.FetchRejected, dsv4Keys, r.Warnings)
		}
		if p.FetchedDefinitions > 0 && p.FetchedBytes <= 0 {
			t.Errorf("node %d fetched %d Definitions of %d bytes", i, p.FetchedDefinitions, p.FetchedBytes)
		}
		if r.Device.Digest != ref.digest {
			t.Errorf("node %d digest %016x, single process %016x", i, r.Device.Digest, ref.digest)
		}
		recorded += p.BuiltDefinitions
		fetched += p.FetchedDefinitions
	}
	if recorded != dsv4Keys || fetched != dsv4Keys {
		t.Fatalf("cluster recorded %d and fetched %d Definitions, want %d and %d", recorded, fetched, dsv4Keys, dsv4Keys)
	}
	for _, nd := range nodes {
		checkWarm(t, nd, orch)
	}
}

// TestOneRecordsOtherFetches: one node runs first and records all 8; the
// second fetches all 8 (from whichever node owns each), keeps them in its
// store on disk, records nothing and ends with the same digest.
func TestOneRecordsOtherFetches(t *testing.T) {
	ref := dsv4Reference(t)
	orch := orchestration(t)
	dir := t.TempDir()
	nodes := cluster(t, 2, func(i int, _ []string, _ *Config, rc *actors.Config) {
		if i == 1 {
			rc.StoreDir = dir
		}
	})
	first := pass(t, nodes[0], orch, 0)
	if p := first.Pass; p.BuiltDefinitions != dsv4Keys || p.FetchedDefinitions != 0 || p.Ops[trace.OpPeerFetch].Count != dsv4Keys {
		t.Fatalf("first node: built %d, fetched %d, asked %d; want %d, 0, %d", p.BuiltDefinitions, p.FetchedDefinitions, p.Ops[trace.OpPeerFetch].Count, dsv4Keys, dsv4Keys)
	}
	second := pass(t, nodes[1], orch, 0)
	p := second.Pass
	if p.BuiltDefinitions != 0 || p.RecordedNodes != 0 || p.FetchedDefinitions != dsv4Keys || p.FetchRejected != 0 {
		t.Fatalf("second node: built %d (%d nodes), fetched %d, rejected %d; want 0, 0, %d, 0 (warnings %q)", p.BuiltDefinitions, p.RecordedNodes, p.FetchedDefinitions, p.FetchRejected, dsv4Keys, second.Warnings)
	}
	var bytes int64
	for _, img := range ref.images {
		bytes += int64(len(img))
	}
	if p.FetchedBytes != bytes {
		t.Fatalf("second node fetched %d bytes, the 8 images are %d", p.FetchedBytes, bytes)
	}
	for _, r := range []*actors.PassResult{first, second} {
		if r.Device.Digest != ref.digest {
			t.Fatalf("digest %016x, single process %016x", r.Device.Digest, ref.digest)
		}
	}
	if errs := nodes[1].rt.FlushStore(); len(errs) > 0 {
		t.Fatal(errs)
	}
	list, err := nodes[1].rt.Disk().List()
	if err != nil || len(list) != dsv4Keys {
		t.Fatalf("the fetching node's store on disk holds %d entries (%v), want %d", len(list), err, dsv4Keys)
	}
	checkWarm(t, nodes[1], orch)
}

// fake is a node whose peer actor answers every Ask with answer(ask).
func fake(t *testing.T, answer func(*Ask) *Answer) string {
	t.Helper()
	sys, addr := system(t)
	_, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if a, ok := ctx.Message().(*Ask); ok && ctx.Sender() != nil {
			ctx.Send(ctx.Sender(), answer(a))
		}
	}), ActorName)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func imageAnswer(a *Ask, img []byte, hash uint64) *Answer {
	return &Answer{Id: a.Id, FullKey: a.FullKey, Result: &Answer_Image{Image: &Image{Image: img, ContentHash: hash, FormatVersion: stages.DefinitionVersion}}}
}

// TestBadImageRejected: a peer that sends a bad image (its owner is made
// the owner of every key) has each one rejected, counted and warned
// about; the node records them itself and ends with the right digest.
func TestBadImageRejected(t *testing.T) {
	ref := dsv4Reference(t)
	orch := orchestration(t)
	var keys []uint64
	for fk := range ref.images {
		keys = append(keys, fk)
	}
	slices.Sort(keys)
	other := func(fk uint64) []byte { // another key's image
		i := slices.Index(keys, fk)
		return ref.images[keys[(i+1)%len(keys)]]
	}
	flip := func(b []byte) []byte {
		c := slices.Clone(b)
		c[len(c)/2] ^= 0x40
		return c
	}
	for _, tc := range []struct {
		name   string
		answer func(a *Ask) *Answer
	}{
		{"flipped byte", func(a *Ask) *Answer {
			img := ref.images[a.FullKey]
			return imageAnswer(a, flip(img), stages.DefinitionHash(img))
		}},
		{"flipped byte, hash of the bytes sent", func(a *Ask) *Answer {
			img := flip(ref.images[a.FullKey])
			return imageAnswer(a, img, stages.DefinitionHash(img))
		}},
		{"truncated", func(a *Ask) *Answer {
			img := ref.images[a.FullKey]
			img = img[:len(img)-9]
			return imageAnswer(a, img, stages.DefinitionHash(img))
		}},
		{"another key's image", func(a *Ask) *Answer {
			img := other(a.FullKey)
			return imageAnswer(a, img, stages.DefinitionHash(img))
		}},
		{"garbage", func(a *Ask) *Answer {
			img := []byte("not a Definition at all")
			return imageAnswer(a, img, stages.DefinitionHash(img))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := fake(t, tc.answer)
			nodes := cluster(t, 1, func(_ int, _ []string, pc *Config, _ *actors.Config) {
				pc.Nodes = append(pc.Nodes, bad)
				pc.owner = func(uint64) string { return bad }
			})
			res := pass(t, nodes[0], orch, 0)
			p := res.Pass
			if p.BuiltDefinitions != dsv4Keys || p.FetchedDefinitions != 0 || p.FetchRejected != dsv4Keys {
				t.Fatalf("built %d, fetched %d, rejected %d; want %d, 0, %d (warnings %q)", p.BuiltDefinitions, p.FetchedDefinitions, p.FetchRejected, dsv4Keys, dsv4Keys, res.Warnings)
			}
			if n := countContaining(res.Warnings, "rejected"); n != dsv4Keys {
				t.Fatalf("%d warnings name a rejected image, want %d: %q", n, dsv4Keys, res.Warnings)
			}
			if res.Device.Digest != ref.digest {
				t.Fatalf("digest %016x, single process %016x", res.Device.Digest, ref.digest)
			}
			if got := nodes[0].rt.Stats.FetchRejected.Load(); got != dsv4Keys {
				t.Fatalf("runtime counted %d rejected, want %d", got, dsv4Keys)
			}
		})
	}
}

func countContaining(ss []string, sub string) int {
	n := 0
	for _, s := range ss {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// deadAddress is a loopback address nothing listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestDeadOwner: a node whose keys' owner is unreachable does not hang:
// each ask gives up within the bound, and the node records the keys
// itself, saying so in the pass's warnings.
func TestDeadOwner(t *testing.T) {
	ref := dsv4Reference(t)
	orch := orchestration(t)
	dead := deadAddress(t)
	nodes := cluster(t, 1, func(_ int, _ []string, pc *Config, _ *actors.Config) {
		pc.Nodes = append(pc.Nodes, dead)
		pc.owner = func(uint64) string { return dead }
		pc.AskTimeout = time.Second
	})
	res := pass(t, nodes[0], orch, 0)
	p := res.Pass
	if p.BuiltDefinitions != dsv4Keys || p.FetchedDefinitions != 0 {
		t.Fatalf("built %d, fetched %d; want %d, 0", p.BuiltDefinitions, p.FetchedDefinitions, dsv4Keys)
	}
	if n := countContaining(res.Warnings, dead); n != dsv4Keys {
		t.Fatalf("%d warnings name the dead owner %s, want %d: %q", n, dead, dsv4Keys, res.Warnings)
	}
	if res.Device.Digest != ref.digest {
		t.Fatalf("digest %016x, single process %016x", res.Device.Digest, ref.digest)
	}
}

// claimed makes a fake node hold the claim of fullKey at owner (it asks,
// is granted the claim, and never publishes) and returns its system.
func claimed(t *testing.T, owner string, fullKey uint64) *actor.ActorSystem {
	t.Helper()
	sys := actors.NewActorSystem(nil)
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	t.Cleanup(func() { sys.Shutdown() })
	granted := make(chan *Answer, 1)
	holder, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *askFor:
			ctx.Request(actor.NewPID(owner, ActorName), &Ask{Id: 1, FullKey: m.fullKey, Key: "k"})
		case *Answer:
			granted <- m
		}
	}), ActorName)
	if err != nil {
		t.Fatal(err)
	}
	sys.Root.Send(holder, &askFor{fullKey: fullKey})
	select {
	case a := <-granted:
		if a.GetGrant() == nil {
			t.Fatalf("the first asker got %v, want the claim", a)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer from the owner")
	}
	t.Cleanup(func() { r.Shutdown(false) })
	return sys
}

type askFor struct{ fullKey uint64 }

// fetch asks a node for fullKey as its store would, and waits.
func fetch(t *testing.T, p *Node, fullKey uint64) actors.FetchResult {
	t.Helper()
	got := make(chan actors.FetchResult, 1)
	p.Fetch(actors.FetchRequest{FullKey: fullKey, Key: "k"}, func(r actors.FetchResult) { got <- r })
	select {
	case r := <-got:
		return r
	case <-time.After(time.Minute):
		t.Fatal("no answer to a fetch within a minute")
		return actors.FetchResult{}
	}
}

// waitQueued waits until n asks wait for fullKey's claim at owner.
func waitQueued(t *testing.T, owner *node, fullKey uint64, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		got, err := owner.sys.Root.RequestFuture(owner.peer.pid, &claimQuery{fullKey: fullKey}, time.Minute).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got.(int) == n {
			return
		}
	}
	t.Fatalf("%d asks never queued for the claim", n)
}

// TestClaimPassesOn: while a node holds a key's claim, another asker waits;
// when the holder dies, or holds the claim too long, the claim passes to
// the waiter, which records the key; a waiter whose own bound comes first
// records it with a warning.
func TestClaimPassesOn(t *testing.T) {
	const fk = 0x5eed
	for _, tc := range []struct {
		name         string
		claimTimeout time.Duration
		askTimeout   time.Duration
		kill         bool
		outcome      string
	}{
		{"holder dies", time.Hour, time.Hour, true, "record"},
		{"holder too slow", 200 * time.Millisecond, time.Hour, false, "record"},
		{"waiter gives up first", time.Hour, 300 * time.Millisecond, false, "fallback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cluster(t, 2, func(_ int, addrs []string, pc *Config, _ *actors.Config) {
				pc.ClaimTimeout, pc.AskTimeout = tc.claimTimeout, tc.askTimeout
				pc.owner = func(uint64) string { return addrs[0] }
			})
			owner, asker := nodes[0], nodes[1]
			holder := claimed(t, owner.addr, fk)
			got := make(chan actors.FetchResult, 1)
			asker.peer.Fetch(actors.FetchRequest{FullKey: fk, Key: "k"}, func(r actors.FetchResult) { got <- r })
			waitQueued(t, owner, fk, 1)
			if tc.kill {
				remote.GetRemote(holder).Shutdown(false)
			}
			select {
			case r := <-got:
				if r.Outcome != tc.outcome || r.Image != nil {
					t.Fatalf("outcome %q (image %d bytes, warning %q), want %q", r.Outcome, len(r.Image), r.Warning, tc.outcome)
				}
				if tc.outcome == "fallback" && !strings.Contains(r.Warning, owner.addr) {
					t.Fatalf("warning %q does not name the owner %s", r.Warning, owner.addr)
				}
			case <-time.After(time.Minute):
				t.Fatal("the waiting asker never got an answer")
			}
		})
	}
}

// TestOwner: every node computes the same owner whatever the order of its
// list, and keys spread over the nodes.
func TestOwner(t *testing.T) {
	nodes := []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}
	rev := slices.Clone(nodes)
	slices.Reverse(rev)
	per := map[string]int{}
	for fk := uint64(0); fk < 3000; fk++ {
		o := Owner(fk*0x9e3779b97f4a7c15, nodes)
		if o != Owner(fk*0x9e3779b97f4a7c15, rev) {
			t.Fatalf("key %d: owner depends on the list's order", fk)
		}
		per[o]++
	}
	for _, n := range nodes {
		if per[n] < 800 {
			t.Fatalf("node %s owns %d of 3000 keys: %v", n, per[n], per)
		}
	}
	// Removing a node moves only its keys.
	for fk := uint64(0); fk < 3000; fk++ {
		k := fk * 0x9e3779b97f4a7c15
		if o := Owner(k, nodes); o != nodes[2] && Owner(k, nodes[:2]) != o {
			t.Fatalf("key %d moved from %s when %s left", fk, o, nodes[2])
		}
	}
}
