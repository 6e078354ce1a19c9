package peer

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/hbg-dev/hbg/authn"
)

// A node of a protoactor cluster (Config.Cluster: membership from etcd)
// finds a key's owner through the cluster, not the node list: the owner is
// a virtual actor of kind OwnerKind whose identity is the full_key
// (Identity). protoactor's rendezvous over the members that serve the kind
// (cluster.Rendezvous, the hash its disthash lookup uses) places it; the
// member it falls on activates it on first ask, and deactivates it when a
// topology change moves the key elsewhere. The owner keeps its key's claim,
// its waiters and the image, as the ring's owner does (server.serve,
// published, passClaim); what it knows dies with it, so a new activation
// first asks every member what it holds of the key (rebuild): an image
// (served from then on), or the key's claim, granted by an activation now
// gone (the holder is adopted, and publishes to the new one). A key is
// then recorded again only when its recorder dies too.
//
// Not protoactor's disthash lookup itself: its partition manager replaces
// its Rendezvous pointer on every topology change while asks read it, and
// its placement actor broadcasts to the member list without its lock, which
// -race reports; and it activates only the kinds Cluster.StartMember
// builds, which also starts the gossip. The lookup here is disthash's
// design with one Rendezvous under its own lock, and kinds of its own.

// OwnerKind is the cluster kind of a key's owner; every node of a cluster
// registers it (a member's kinds in etcd).
const OwnerKind = "hbg-owner"

// ownersName is the actor on every member that activates the owners
// placed there (disthash's "partition-activator").
const ownersName = "hbg-owners"

// DefaultMaxOwners bounds the owners one node keeps active: past it the
// oldest is deactivated (its key's next ask rebuilds it from the stores).
const DefaultMaxOwners = 1 << 14

// Identity is a full_key's identity as a cluster's virtual actor.
func Identity(fullKey uint64) string { return fmt.Sprintf("%016x", fullKey) }

// owners finds and activates the owners of a cluster's keys.
type owners struct {
	c   *cluster.Cluster
	rdv *cluster.Rendezvous
	sub *eventstream.Subscription
	pid *actor.PID
	// timeout bounds asking the placing member for an owner.
	timeout time.Duration

	mu      sync.Mutex
	members []string
}

// startOwners spawns the node's activator and follows the cluster's
// topology; props makes a key's owner.
func startOwners(c *cluster.Cluster, cfg Config, props func(fullKey uint64) *actor.Props) (*owners, error) {
	o := &owners{c: c, rdv: cluster.NewRendezvous(), timeout: min(cfg.AskTimeout/3, 5*time.Second)}
	sys := c.ActorSystem
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &activator{o: o, props: props, max: cfg.MaxOwners, byID: map[string]*actor.PID{}}
	}), ownersName)
	if err != nil {
		return nil, fmt.Errorf("peer: spawning %s: %w", ownersName, err)
	}
	o.pid = pid
	o.sub = sys.EventStream.Subscribe(func(ev any) {
		t, ok := ev.(*cluster.ClusterTopology)
		if !ok {
			return
		}
		o.rdv.UpdateMembers(t.Members)
		addrs := make([]string, 0, len(t.Members))
		for _, m := range t.Members {
			if m.HasKind(OwnerKind) {
				addrs = append(addrs, m.Address())
			}
		}
		o.mu.Lock()
		o.members = addrs
		o.mu.Unlock()
		sys.Root.Send(pid, t)
	})
	return o, nil
}

func (o *owners) stop() {
	o.c.ActorSystem.EventStream.Unsubscribe(o.sub)
	_ = o.c.ActorSystem.Root.StopFuture(o.pid).Wait()
}

// addrs are the members that serve OwnerKind.
func (o *owners) addrs() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.members
}

// get is fullKey's owner (nil: no member serves the kind, or the placing
// member did not answer). It blocks: the caller is not an actor.
func (o *owners) get(fullKey uint64) *actor.PID {
	id := Identity(fullKey)
	if pid, ok := o.c.PidCache.Get(id, OwnerKind); ok {
		return pid
	}
	ci := cluster.NewClusterIdentity(id, OwnerKind)
	addr := o.rdv.GetByClusterIdentity(ci)
	if addr == "" {
		return nil
	}
	res, err := o.c.ActorSystem.Root.RequestFuture(actor.NewPID(addr, ownersName), &cluster.ActivationRequest{ClusterIdentity: ci}, o.timeout).Result()
	if err != nil {
		return nil
	}
	r, ok := res.(*cluster.ActivationResponse)
	if !ok || r.Pid == nil {
		return nil
	}
	o.c.PidCache.Set(id, OwnerKind, r.Pid)
	return r.Pid
}

// forget drops a gone owner from the cache.
func (o *owners) forget(fullKey uint64, pid *actor.PID) {
	o.c.PidCache.RemoveByValue(Identity(fullKey), OwnerKind, pid)
}

// activator is a member's placement of owners: one activation per
// identity on this member, at most max of them.
type activator struct {
	o     *owners
	props func(uint64) *actor.Props
	max   int
	byID  map[string]*actor.PID
	order []string // activation order, oldest first
}

func (a *activator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *cluster.ActivationRequest:
		ctx.Respond(&cluster.ActivationResponse{Pid: a.activate(ctx, m.GetClusterIdentity())})
	case *actor.Terminated:
		for id, pid := range a.byID {
			if pid.Equal(m.Who) {
				delete(a.byID, id)
			}
		}
	case *cluster.ClusterTopology:
		// Owners the new topology places elsewhere stop: the member it
		// places them on activates them afresh.
		self := ctx.ActorSystem().Address()
		for id, pid := range a.byID {
			if a.o.rdv.GetByClusterIdentity(cluster.NewClusterIdentity(id, OwnerKind)) != self {
				delete(a.byID, id)
				ctx.Stop(pid)
			}
		}
	}
}

// activate is identity's owner here, activated if it is not (nil: not an
// owner's identity).
func (a *activator) activate(ctx actor.Context, ci *cluster.ClusterIdentity) *actor.PID {
	if ci.GetKind() != OwnerKind || len(ci.GetIdentity()) != 16 {
		return nil
	}
	fk, err := strconv.ParseUint(ci.GetIdentity(), 16, 64)
	if err != nil {
		return nil
	}
	id := Identity(fk)
	if pid := a.byID[id]; pid != nil {
		return pid
	}
	for len(a.byID) >= a.max && len(a.order) > 0 {
		old := a.order[0]
		a.order = a.order[1:]
		if pid := a.byID[old]; pid != nil {
			delete(a.byID, old)
			ctx.Stop(pid)
		}
	}
	pid, err := ctx.SpawnNamed(a.props(fk), id)
	if err != nil {
		// Its former activation is still stopping: the asker tries again.
		return nil
	}
	a.byID[id] = pid
	a.order = append(a.order, id)
	if len(a.order) > 2*a.max {
		a.order = compactOrder(a.order, a.byID)
	}
	return pid
}

func compactOrder(order []string, live map[string]*actor.PID) []string {
	out := order[:0]
	for _, id := range order {
		if live[id] != nil {
			out = append(out, id)
		}
	}
	return out
}

// Messages inside an owner.
type (
	rebuildDone struct{}
	// pendingAsk is an ask that came while the owner rebuilt.
	pendingAsk struct {
		w          waiter
		key, model string
	}
)

// owner is one key's owner in a cluster: the ring owner's claim logic
// (a server holding one key) behind a rebuild from the members' stores.
type owner struct {
	s       *server
	fk      uint64
	members func() []string
	// rebuilding: the members asked and not answered, by address; asks
	// wait in pending until every one answered or the bound passed.
	rebuilding bool
	askID      uint64
	asked      map[string]bool
	pending    []pendingAsk
	timer      *time.Timer
}

func newOwner(cfg Config, fullKey uint64, members func() []string) *owner {
	s := newServer(cfg)
	s.disk = nil // the members' stores answer for it, this node's too
	return &owner{s: s, fk: fullKey, members: members}
}

func (o *owner) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.rebuild(ctx)
	case *Ask:
		from := ctx.Sender()
		if from == nil || m.FullKey != o.fk {
			return
		}
		if !slices.Contains(o.members(), from.Address) || !vouches(authn.Of(ctx), from.Address) {
			// Only a member records for the cluster: anyone else could
			// take a key's claim and publish what it likes.
			o.s.refuse("Ask", o.fk, ctx, "not from a member of the cluster")
			ctx.Send(from, &Answer{Id: m.Id, FullKey: m.FullKey, Result: &Answer_Refusal{Refusal: &Refusal{Reason: "not a member of the cluster"}}})
			return
		}
		if o.rebuilding {
			o.pending = append(o.pending, pendingAsk{w: waiter{pid: from, id: m.Id, addr: from.Address, ident: authn.Of(ctx).Identity()}, key: m.Key, model: m.Model})
			return
		}
		o.s.remoteAsk(ctx, m)
	case *Answer:
		o.answered(ctx, m)
	case *rebuildDone:
		if o.rebuilding {
			o.finish(ctx)
		}
	default:
		o.s.Receive(ctx)
	}
}

// rebuild asks every member what it holds of the key.
func (o *owner) rebuild(ctx actor.Context) {
	ms := o.members()
	if len(ms) == 0 {
		return
	}
	o.rebuilding, o.askID, o.asked = true, o.s.newAskID(), map[string]bool{}
	for _, addr := range ms {
		o.asked[addr] = true
		ctx.Request(actor.NewPID(addr, ActorName), &Ask{Id: o.askID, FullKey: o.fk, Key: "rebuild"})
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	o.timer = time.AfterFunc(o.s.cfg.rebuildTimeout(), func() { root.Send(self, &rebuildDone{}) })
}

// answered is a member's answer to the rebuild: an image it holds, the
// claim it holds (it is recording the key: adopted as the holder), or
// nothing.
func (o *owner) answered(ctx actor.Context, m *Answer) {
	from := ctx.Sender()
	if !o.rebuilding || from == nil || m.Id != o.askID || !o.asked[from.Address] || !vouches(authn.Of(ctx), from.Address) {
		return
	}
	delete(o.asked, from.Address)
	switch r := m.Result.(type) {
	case *Answer_Image:
		if o.take(ctx, r.Image, from.Address) {
			o.finish(ctx)
			return
		}
	case *Answer_Grant:
		if o.s.claims[o.fk] == nil {
			c := &claim{key: "adopted"}
			o.s.claims[o.fk] = c
			o.s.hold(ctx, o.fk, c, waiter{pid: from, addr: from.Address, ident: authn.Of(ctx).Identity()})
		}
	}
	if len(o.asked) == 0 {
		o.finish(ctx)
	}
}

// take keeps a member's image when it passes what a published one must.
func (o *owner) take(ctx actor.Context, img *Image, addr string) bool {
	if err := checkImage(o.fk, img); err != nil {
		o.s.refuse("rebuild image", o.fk, ctx, err.Error())
		return false
	}
	h := held{image: img.Image, hash: img.ContentHash, from: addr, sig: sigOf(img)}
	if o.s.cfg.Verifier != nil {
		if err := o.s.cfg.verifySig(o.fk, img); err != nil {
			o.s.refuse("rebuild image", o.fk, ctx, "its signature is refused: "+err.Error())
			return false
		}
	} else {
		h.sig = sigOf(&Image{})
	}
	o.s.images.put(o.fk, h)
	if c := o.s.claims[o.fk]; c != nil {
		// An adopted claim: the image is here already.
		c.timer.Stop()
		delete(o.s.claims, o.fk)
	}
	return true
}

// finish ends the rebuild and serves the asks that waited for it.
func (o *owner) finish(ctx actor.Context) {
	o.rebuilding = false
	o.timer.Stop()
	for _, p := range o.pending {
		o.s.watch(ctx, p.w.pid)
		o.s.serve(ctx, p.w, o.fk, p.key, p.model)
	}
	o.pending = nil
}
