package peer

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/actors"
)

// patient is a node that waits long for a claim: on a loaded machine (and
// under -race) a recording may outlast the default claim timeout, and the
// tests below count recordings, which a claim passed on would double.
var patient = nodeSpec{AskTimeout: 4 * time.Minute, ClaimTimeout: 2 * time.Minute}

// checkPass checks a first pass: it ended with the single-process digest,
// without error.
func checkPass(t *testing.T, who string, p passResult, digest uint64) {
	t.Helper()
	if p.Err != "" {
		t.Fatalf("%s: %s", who, p.Err)
	}
	if p.Digest != digest {
		t.Fatalf("%s: digest %016x, single process %016x", who, p.Digest, digest)
	}
}

// checkWarm checks a warm pass: nothing recorded, fetched or asked.
func checkWarm(t *testing.T, who string, p passResult, digest uint64) {
	t.Helper()
	checkPass(t, who, p, digest)
	if p.Built != 0 || p.Fetched != 0 || p.Asked != 0 {
		t.Fatalf("%s warm pass: built %d, fetched %d, asked %d; want 0, 0, 0", who, p.Built, p.Fetched, p.Asked)
	}
}

// TestRecordedOncePerCluster: two nodes (this process and a child) run
// DSv4 full's first pass at the same moment: the cluster records each of
// its 8 Definitions once, and the node that did not record a Definition
// fetched it (recorded 8 + fetched 8 across the two); both end with the
// single-process digest, and a second pass records and fetches nothing.
func TestRecordedOncePerCluster(t *testing.T) {
	ref := must(dsv4Reference())(t)
	c := startChild(t)
	nd := local(t, patient, c.addr)
	c.do(command{Op: "node", Spec: nodeSpec{Nodes: []string{c.addr, nd.addr}, AskTimeout: patient.AskTimeout, ClaimTimeout: patient.ClaimTimeout}})

	var res [2]passResult
	var wg sync.WaitGroup
	wg.Go(func() { res[1] = *c.do(command{Op: "pass", Round: 0}).Pass })
	res[0] = nd.pass(0)
	wg.Wait()
	recorded, fetched := 0, 0
	for i, p := range res {
		who := []string{"this node", "the child node"}[i]
		checkPass(t, who, p, ref.digest)
		if p.Built+p.Fetched != dsv4Keys || p.Rejected != 0 || p.Asked != dsv4Keys {
			t.Errorf("%s: built %d + fetched %d, rejected %d, asked %d; want %d in all, 0 rejected, %d asked (warnings %q)",
				who, p.Built, p.Fetched, p.Rejected, p.Asked, dsv4Keys, dsv4Keys, p.Warnings)
		}
		if p.Fetched > 0 && p.FetchedBytes <= 0 {
			t.Errorf("%s fetched %d Definitions of %d bytes", who, p.Fetched, p.FetchedBytes)
		}
		recorded += p.Built
		fetched += p.Fetched
	}
	if recorded != dsv4Keys || fetched != dsv4Keys {
		t.Fatalf("the cluster recorded %d and fetched %d Definitions, want %d and %d", recorded, fetched, dsv4Keys, dsv4Keys)
	}
	checkWarm(t, "this node", nd.pass(1), ref.digest)
	checkWarm(t, "the child node", *c.do(command{Op: "pass", Round: 1}).Pass, ref.digest)
}

// TestOneRecordsOtherFetches: one node runs first and records all 8; the
// other then fetches all 8 (from whichever node owns each), keeps them in
// its store on disk, records nothing and ends with the same digest.
func TestOneRecordsOtherFetches(t *testing.T) {
	ref := must(dsv4Reference())(t)
	c := startChild(t)
	nd := local(t, nodeSpec{StoreDir: t.TempDir(), AskTimeout: patient.AskTimeout, ClaimTimeout: patient.ClaimTimeout}, c.addr)
	c.do(command{Op: "node", Spec: nodeSpec{Nodes: []string{c.addr, nd.addr}, AskTimeout: patient.AskTimeout, ClaimTimeout: patient.ClaimTimeout}})

	first := *c.do(command{Op: "pass", Round: 0}).Pass
	checkPass(t, "the first node", first, ref.digest)
	if first.Built != dsv4Keys || first.Fetched != 0 || first.Asked != dsv4Keys {
		t.Fatalf("the first node: built %d, fetched %d, asked %d; want %d, 0, %d", first.Built, first.Fetched, first.Asked, dsv4Keys, dsv4Keys)
	}
	p := nd.pass(0)
	checkPass(t, "the second node", p, ref.digest)
	if p.Built != 0 || p.Recorded != 0 || p.Fetched != dsv4Keys || p.Rejected != 0 {
		t.Fatalf("the second node: built %d (%d nodes), fetched %d, rejected %d; want 0, 0, %d, 0 (warnings %q)", p.Built, p.Recorded, p.Fetched, p.Rejected, dsv4Keys, p.Warnings)
	}
	var bytes int64
	for _, img := range ref.images {
		bytes += int64(len(img))
	}
	if p.FetchedBytes != bytes {
		t.Fatalf("the second node fetched %d bytes, the 8 images are %d", p.FetchedBytes, bytes)
	}
	if errs := nd.rt.FlushStore(); len(errs) > 0 {
		t.Fatal(errs)
	}
	list, err := nd.rt.Disk().List()
	if err != nil || len(list) != dsv4Keys {
		t.Fatalf("the fetching node's store on disk holds %d entries (%v), want %d", len(list), err, dsv4Keys)
	}
	checkWarm(t, "the second node", nd.pass(1), ref.digest)
}

// TestBadImageRejected: a peer (a child process made the owner of every
// key) that sends bad images has each one rejected, counted and warned
// about; the node records them itself and ends with the right digest.
// "chain" is an image that checks as an image (a valid Definition with
// extra edges, its own hash): only recording it here finds it wrong.
func TestBadImageRejected(t *testing.T) {
	ref := must(dsv4Reference())(t)
	bad := startChild(t)
	for _, mode := range []string{"flip", "flip-rehash", "truncate", "other-key", "garbage", "chain"} {
		t.Run(mode, func(t *testing.T) {
			bad.do(command{Op: "bad", Mode: mode})
			nd := local(t, nodeSpec{Owner: bad.addr}, bad.addr)
			p := nd.pass(0)
			checkPass(t, "the node", p, ref.digest)
			if p.Built != dsv4Keys || p.Fetched != 0 || p.Rejected != dsv4Keys {
				t.Fatalf("built %d, fetched %d, rejected %d; want %d, 0, %d (warnings %q)", p.Built, p.Fetched, p.Rejected, dsv4Keys, dsv4Keys, p.Warnings)
			}
			if n := countContaining(p.Warnings, "rejected"); n != dsv4Keys {
				t.Fatalf("%d warnings name a rejected image, want %d: %q", n, dsv4Keys, p.Warnings)
			}
			if got := nd.rt.Stats.FetchRejected.Load(); got != dsv4Keys {
				t.Fatalf("the runtime counted %d rejected, want %d", got, dsv4Keys)
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
	ref := must(dsv4Reference())(t)
	dead := deadAddress(t)
	nd := local(t, nodeSpec{Owner: dead, AskTimeout: time.Second}, dead)
	p := nd.pass(0)
	checkPass(t, "the node", p, ref.digest)
	if p.Built != dsv4Keys || p.Fetched != 0 {
		t.Fatalf("built %d, fetched %d; want %d, 0", p.Built, p.Fetched, dsv4Keys)
	}
	if n := countContaining(p.Warnings, dead); n != dsv4Keys {
		t.Fatalf("%d warnings name the dead owner %s, want %d: %q", n, dead, dsv4Keys, p.Warnings)
	}
}

// fetch asks a node for fullKey as its store would; the answer arrives on
// the channel.
func fetch(t *testing.T, nd *node, fullKey uint64) <-chan actors.FetchResult {
	got := make(chan actors.FetchResult, 1)
	src := must(nd.peer.Cluster(nd.addr, []string{nd.addr}))(t)
	src.Fetch(actors.FetchRequest{FullKey: fullKey, Key: "k"}, func(r actors.FetchResult) { got <- r })
	return got
}

// waitQueued waits until n asks wait for fullKey's claim at nd, the owner.
func waitQueued(t *testing.T, nd *node, fullKey uint64, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		got := must(nd.sys.Root.RequestFuture(nd.peer.pid, &claimQuery{fullKey: fullKey}, time.Minute).Result())(t)
		if got.(int) == n {
			return
		}
	}
	t.Fatalf("%d asks never queued for the claim", n)
}

// TestClaimPassesOn: while another node (a child process) holds a key's
// claim, an ask for the key waits at its owner; when the holder dies
// (SIGKILL) or holds the claim too long, the claim passes to the waiter,
// which records the key; a waiter whose own bound comes first records it
// with a warning naming the owner.
func TestClaimPassesOn(t *testing.T) {
	const fk = 0x5eed
	for _, tc := range []struct {
		name         string
		claimTimeout time.Duration
		askTimeout   time.Duration
		kill         bool
		// expire fires the claim's timer (the holder held it longer than
		// ClaimTimeout) once the ask waits, not before.
		expire  bool
		outcome string
	}{
		{"holder dies", time.Hour, time.Hour, true, false, "record"},
		{"holder too slow", time.Hour, time.Hour, false, true, "record"},
		{"waiter gives up first", time.Hour, 300 * time.Millisecond, false, false, "fallback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holder := startChild(t)
			owner := local(t, nodeSpec{Owner: must(host())(t).Address(), ClaimTimeout: tc.claimTimeout, AskTimeout: tc.askTimeout}, holder.addr)
			if !holder.do(command{Op: "hold", Owner: owner.addr, FullKey: fk}).Grant {
				t.Fatal("the first asker was not granted the claim")
			}
			got := fetch(t, owner, fk)
			waitQueued(t, owner, fk, 1)
			if tc.kill {
				holder.kill()
			}
			if tc.expire {
				owner.sys.Root.Send(owner.peer.pid, &claimTimeout{fullKey: fk, gen: 1})
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
				t.Fatal("the waiting ask never got an answer")
			}
		})
	}
}

// TestOwner: every node computes the same owner whatever the order of its
// list, keys spread over the nodes, and a node leaving moves only its keys.
func TestOwner(t *testing.T) {
	nodes := []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}
	rev := slices.Clone(nodes)
	slices.Reverse(rev)
	per := map[string]int{}
	for i := uint64(0); i < 3000; i++ {
		k := i * 0x9e3779b97f4a7c15
		o := Owner(k, nodes)
		if o != Owner(k, rev) {
			t.Fatalf("key %016x: the owner depends on the list's order", k)
		}
		if o != nodes[2] && Owner(k, nodes[:2]) != o {
			t.Fatalf("key %016x moved from %s when %s left", k, o, nodes[2])
		}
		per[o]++
	}
	for _, n := range nodes {
		if per[n] < 800 {
			t.Fatalf("node %s owns %d of 3000 keys: %v", n, per[n], per)
		}
	}
}

// TestPublishOnlyFromHolder: a Publish from a node that does not hold the
// key's claim (a child process; a forged image, valid and rehashed) is
// refused and counted, whether no claim is held or another node holds it,
// and the owner never serves it: the next ask is granted the claim.
func TestPublishOnlyFromHolder(t *testing.T) {
	ref := must(dsv4Reference())(t)
	var fk uint64
	for k := range ref.images {
		fk = max(fk, k)
	}
	for _, held := range []bool{false, true} {
		t.Run(fmt.Sprintf("claim held %v", held), func(t *testing.T) {
			forger := startChild(t)
			refused := make(chan Refused, 4)
			owner := local(t, nodeSpec{Owner: must(host())(t).Address(), ClaimTimeout: time.Hour, AskTimeout: time.Hour,
				onRefused: func(r Refused) { refused <- r }}, forger.addr)
			if held {
				holder := startChild(t)
				if !holder.do(command{Op: "hold", Owner: owner.addr, FullKey: fk}).Grant {
					t.Fatal("the holder was not granted the claim")
				}
			}
			forger.do(command{Op: "publish", Owner: owner.addr, FullKey: fk})
			select {
			case r := <-refused:
				if r.What != "Publish" || r.FullKey != fk || r.Count != 1 {
					t.Fatalf("refused %+v, want the Publish of %016x, counted 1", r, fk)
				}
			case <-time.After(time.Minute):
				t.Fatal("the forged Publish was not refused")
			}
			if held {
				return // the claim is the holder's: an ask would wait
			}
			select {
			case r := <-fetch(t, owner, fk):
				if r.Image != nil || r.Outcome != "record" {
					t.Fatalf("the owner answered %q with %d bytes after a forged Publish, want the claim", r.Outcome, len(r.Image))
				}
			case <-time.After(time.Minute):
				t.Fatal("no answer from the owner")
			}
		})
	}
}
