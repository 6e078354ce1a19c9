package peer

import (
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
)

// members are the children as a cluster's members.
func members(cs ...*child) []member {
	out := make([]member, len(cs))
	for i, c := range cs {
		out[i] = member{ID: c.id, Addr: c.addr}
	}
	return out
}

// ownerAddr is where a cluster of ms places fullKey's owner.
func ownerAddr(t *testing.T, ms []member, fullKey uint64) string {
	t.Helper()
	cm := must(clusterMembers(ms))(t)
	rdv := cluster.NewRendezvous()
	rdv.UpdateMembers(cm)
	return rdv.GetByClusterIdentity(cluster.NewClusterIdentity(Identity(fullKey), OwnerKind))
}

// clusterOf starts n children as the members of one cluster.
func clusterOf(t *testing.T, n int) ([]*child, []member) {
	cs := make([]*child, n)
	for i := range cs {
		cs[i] = startChild(t)
	}
	ms := members(cs...)
	for _, c := range cs {
		// A loaded -race box takes seconds to answer a rebuild: bounds a
		// real cluster would not want, so that a timeout here is a lost
		// message, not a slow one.
		c.do(command{Op: "node", Spec: nodeSpec{Members: ms, AskTimeout: time.Minute, ClaimTimeout: time.Minute, RebuildTimeout: 20 * time.Second}})
	}
	return cs, ms
}

// firstRecords: of the asks open at once (children), exactly one is
// granted the claim; it records; every other gets its image.
func firstRecords(t *testing.T, fk uint64, askers ...*child) (recorder *child) {
	t.Helper()
	for _, c := range askers {
		c.do(command{Op: "ask", FullKey: fk})
	}
	deadline := time.Now().Add(time.Minute)
	for recorder == nil && time.Now().Before(deadline) {
		for _, c := range askers {
			r := c.do(command{Op: "result", FullKey: fk, Wait: 50 * time.Millisecond})
			switch r.Outcome {
			case "":
			case "record":
				if recorder != nil {
					t.Fatalf("%s and %s were both granted %016x", recorder.addr, c.addr, fk)
				}
				recorder = c
			default:
				t.Fatalf("%s: outcome %q before anyone recorded %016x", c.addr, r.Outcome, fk)
			}
		}
	}
	if recorder == nil {
		t.Fatalf("no asker of %016x was granted its claim", fk)
	}
	return recorder
}

// TestClusterOneRecorder: nodes of a cluster that miss the same key at
// once reach its one owner (a virtual actor, wherever the cluster placed
// it): one is granted the claim and records, every other is sent its
// image.
func TestClusterOneRecorder(t *testing.T) {
	ref := must(dsv4Reference())(t)
	cs, _ := clusterOf(t, 3)
	for fk := range ref.images {
		rec := firstRecords(t, fk, cs...)
		rec.do(command{Op: "recorded", FullKey: fk})
		for _, c := range cs {
			if c == rec {
				continue
			}
			r := c.do(command{Op: "result", FullKey: fk, Wait: time.Minute})
			if r.Outcome != "image" || r.Image != len(ref.images[fk]) {
				t.Fatalf("%016x at %s: outcome %q, %d bytes; want its image (%d bytes) from %s", fk, c.addr, r.Outcome, r.Image, len(ref.images[fk]), rec.addr)
			}
		}
	}
}

// TestClusterOwnerKilledMidClaim: a key's owner dies (SIGKILL) while one
// node holds the key's claim and another waits: the waiter's ask goes to
// the owner's new activation on a survivor, which rebuilds from the
// members (the holder says it holds the claim) and sends the waiter the
// holder's image: the key is recorded once.
func TestClusterOwnerKilledMidClaim(t *testing.T) {
	// The holder records after its new owner's rebuild found it holding
	// the claim (adopted: it publishes there), or before any new owner
	// (its Publish to the dead one is lost: the rebuild finds its image).
	t.Run("adopted", func(t *testing.T) { ownerKilledMidClaim(t, true) })
	t.Run("image kept", func(t *testing.T) { ownerKilledMidClaim(t, false) })
}

func ownerKilledMidClaim(t *testing.T, adopted bool) {
	ref := must(dsv4Reference())(t)
	keys := make([]uint64, 0, len(ref.images))
	for fk := range ref.images {
		keys = append(keys, fk)
	}
	slices.Sort(keys)
	fk := keys[0]
	cs, ms := clusterOf(t, 3)
	at := ownerAddr(t, ms, fk)
	i := slices.IndexFunc(cs, func(c *child) bool { return c.addr == at })
	if i < 0 {
		t.Fatalf("owner %s is no member", at)
	}
	owner := cs[i]
	survivors := slices.Delete(slices.Clone(cs), i, i+1)
	holder := firstRecords(t, fk, survivors[0])
	waiter := survivors[1]
	waiter.do(command{Op: "ask", FullKey: fk})
	if r := waiter.do(command{Op: "result", FullKey: fk, Wait: 200 * time.Millisecond}); r.Outcome != "" {
		t.Fatalf("the waiter's ask was answered %q while the claim is held", r.Outcome)
	}
	owner.kill()
	if !adopted {
		holder.do(command{Op: "recorded", FullKey: fk})
	}
	left := members(survivors...)
	for _, c := range survivors {
		c.do(command{Op: "members", Spec: nodeSpec{Members: left}})
	}
	if adopted {
		deadline := time.Now().Add(time.Minute)
		for holder.do(command{Op: "granted", FullKey: fk}).Addr == owner.addr {
			if time.Now().After(deadline) {
				t.Fatal("no new owner adopted the holder's claim")
			}
		}
		holder.do(command{Op: "recorded", FullKey: fk})
	}
	r := waiter.do(command{Op: "result", FullKey: fk, Wait: time.Minute})
	if r.Outcome != "image" || r.Image != len(ref.images[fk]) {
		t.Fatalf("the waiter: outcome %q, %d bytes; want the holder's image (%d bytes): recorded once", r.Outcome, r.Image, len(ref.images[fk]))
	}
}

// TestClusterOwnerRefusesStranger: a key's owner grants its claim only to
// a member of the cluster: this process, which any node could be asked
// by but is no member, is refused (a stranger's claim was the forged
// Publish's way in).
func TestClusterOwnerRefusesStranger(t *testing.T) {
	const fk = 0x5eed
	sys := must(host())(t)
	_, ms := clusterOf(t, 2)
	at := ownerAddr(t, ms, fk)
	ci := cluster.NewClusterIdentity(Identity(fk), OwnerKind)
	res := must(sys.Root.RequestFuture(actor.NewPID(at, ownersName), &cluster.ActivationRequest{ClusterIdentity: ci}, time.Minute).Result())(t)
	pid := res.(*cluster.ActivationResponse).GetPid()
	if pid == nil {
		t.Fatal("no owner activated")
	}
	got := make(chan *Answer, 1)
	sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Request(pid, &Ask{Id: 7, FullKey: fk, Key: "stranger"})
		case *Answer:
			got <- m
		}
	}))
	select {
	case a := <-got:
		if a.GetRefusal() == nil {
			t.Fatalf("a stranger was answered %v, want a refusal", a.Result)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer from the owner")
	}
}
