package remote

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/wire"
)

// The driver's side of its nodes: probing them before placing, beating
// their hearts while placed, and its actor that hears them.

// probeAll checks TLS with every node at once (probe), within NodeTimeout.
func probeAll(cfg Config) error {
	var client *tls.Config
	if cfg.Transport.TLS.On() {
		_, c, err := cfg.Transport.TLS.Configs()
		if err != nil {
			return fmt.Errorf("remote: %w", err)
		}
		client = c
	}
	errs := make([]error, len(cfg.Nodes))
	var wg sync.WaitGroup
	for i, a := range cfg.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = probe(a, client, cfg.NodeTimeout)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// maxBeat bounds the heartbeat's interval, well inside a node's
// DefaultPlacementIdle.
const maxBeat = 30 * time.Second

// heartbeat pings node i's host every quarter of NodeTimeout; a ping not
// answered within three quarters of it loses the node, so a node that
// stops answering fails its passes about NodeTimeout after its last word.
func (rt *Runtime) heartbeat(i int) {
	defer rt.beats.Done()
	ns := rt.nodes[i]
	// At most maxBeat apart: a node releases a placement whose driver is
	// silent for its --placement-idle.
	t := time.NewTicker(min(rt.cfg.NodeTimeout/4, maxBeat))
	defer t.Stop()
	wait := rt.cfg.NodeTimeout * 3 / 4
	for seq := uint64(1); ; seq++ {
		select {
		case <-rt.stopped:
			return
		case <-t.C:
		}
		rt.mu.Lock()
		lost := ns.lost != nil
		rt.mu.Unlock()
		if lost {
			return
		}
		res, err := rt.sys.Root.RequestFuture(ns.pid, &wire.Ping{Seq: seq}, wait).Result()
		if err != nil {
			rt.nodeLost(i, fmt.Sprintf("no answer to a ping within %v: %v", wait, err))
			return
		}
		if pong, ok := res.(*wire.Pong); !ok || subtle.ConstantTimeCompare(pong.GetToken(), ns.token) != 1 {
			// Not the node's: its answer, if it comes, has nowhere to go.
			rt.nodeLost(i, fmt.Sprintf("a ping answered without its placement's token (%T)", res))
			return
		}
	}
}

// client is the driver's actor: nodes send it their passes' results, and
// it watches their hosts.
type client struct{ rt *Runtime }

type watchHost struct{ pid *actor.PID }

func (c *client) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.PassResult:
		c.rt.deliver(m)
	case *watchHost:
		ctx.Watch(m.pid)
	case *actor.Terminated:
		why := fmt.Sprintf("its rank host ended (%s)", m.GetWhy())
		c.rt.lostAddr(m.GetWho().GetAddress(), func(bool) string { return why })
	}
}

// localHostFor is the address this machine reaches node from (no packet
// is sent: a UDP socket only picks its route), else loopback.
func localHostFor(node string) string {
	c, err := net.Dial("udp", node)
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok {
		return a.IP.String()
	}
	return "127.0.0.1"
}

// newRunID is 128 random bits: a run's host on a node is named by it.
func newRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newToken() []byte {
	b := make([]byte, wire.TokenSize)
	_, _ = rand.Read(b)
	return b
}

// event takes the actor system's events the driver acts on: the cluster's
// topology, and an endpoint that ended (a node lost, and why).
func (rt *Runtime) event(ev any) {
	if t, ok := ev.(*cluster.ClusterTopology); ok {
		rt.topology(t)
		return
	}
	e, ok := ev.(*paremote.EndpointTerminatedEvent)
	if !ok {
		return
	}
	rt.lostAddr(e.Address, func(placed bool) string {
		if rt.left(e.Address) {
			// protoactor's member list ends a member's endpoint as it
			// leaves.
			return fmt.Sprintf("it left cluster %s in etcd (it stopped, or died and its lease ended)", rt.cfg.Etcd.name())
		}
		// The node's guard says why it ended the stream (a message over
		// its limit, a refused batch); its connection limits, on a new
		// connection.
		if r := authn.LastRefusal(e.Address); r != "" {
			return "it refused this driver: " + r
		}
		if r := authn.Refusal(e.Address, time.Second); r != "" {
			return "it refused this driver's connection: " + r
		}
		if !placed {
			// It never answered its placement: nothing listens there, or
			// it went before it answered.
			return causeNoConnection
		}
		return "its connection ended"
	})
}

// place spawns the run's host on node i and places its ranks there, once
// more if the first try met a connection that ended before the node
// answered anything: protoactor keys its endpoints by address, so a
// connection another run of this process opened to the address (to a
// process that died there, before a new one listened) can end under this
// placement and take its messages with it.
func (rt *Runtime) place(i int) error {
	for try := 1; ; try++ {
		err := rt.placeOnce(i, try)
		if err == nil || try == placeTries || !rt.retryable(i) {
			return err
		}
	}
}

// placeTries bounds place's tries.
const placeTries = 2

// retryable says whether node i was lost only to an ended connection,
// before any answer, and if so makes it unlost for another try.
func (rt *Runtime) retryable(i int) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	ns := rt.nodes[i]
	if ns.lost == nil || ns.lost.Cause != causeNoConnection {
		return false
	}
	ns.lost, ns.gone = nil, make(chan struct{})
	return true
}

// causeNoConnection is a node's loss before it answered a placement.
const causeNoConnection = "no connection to it (is a node listening there?)"

// placeOnce is place's try'th try: each spawns its own host, since the one
// an earlier try's lost request may have spawned ends on its own
// (unplacedTimeout).
func (rt *Runtime) placeOnce(i, try int) error {
	ns := rt.nodes[i]
	lost := func(cause string) error {
		// The endpoint's end (a refused or dropped connection) is what
		// failed the request, and says more than its timeout or dead letter.
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if ns.lost != nil {
			return ns.lost
		}
		return &NodeError{Node: ns.addr, Ranks: ns.ranks, Rank: -1, Round: -1, Cause: cause}
	}
	name := "hbg-run-" + rt.run
	if try > 1 {
		name += fmt.Sprintf("-%d", try)
	}
	resp, err := rt.rem.SpawnNamed(ns.addr, name, Kind, rt.cfg.NodeTimeout)
	if err != nil {
		// Answers come back to the driver's own address: a node that is
		// up but cannot reach it looks the same from here.
		return lost(fmt.Sprintf("no answer within %v (--node-timeout) to spawning the run's ranks, at this driver's %s: %v",
			rt.cfg.NodeTimeout, rt.sys.Address(), err))
	}
	if resp.GetStatusCode() == paremote.ResponseStatusCodeUNAVAILABLE.ToInt32() {
		return fmt.Errorf("node %s: spawning the run's ranks: %w: the node holds its limit of them (--max-unplaced), or this driver's share of it", ns.addr, ErrTooManyUnplaced)
	}
	if resp.GetStatusCode() != 0 || resp.GetPid() == nil {
		return fmt.Errorf("node %s: spawning the run's ranks (kind %s): status %d", ns.addr, Kind, resp.GetStatusCode())
	}
	pid := resp.GetPid()
	ranks := make([]int32, len(ns.ranks))
	for k, r := range ns.ranks {
		ranks[k] = int32(r)
	}
	// The run's cluster is the nodes that host its ranks: a node given
	// none has no runtime for this run, so nothing to ask it for.
	var cluster []string
	self := 0
	rt.mu.Lock()
	for k, other := range rt.nodes {
		if k == i {
			self = len(cluster)
		}
		if len(other.ranks) > 0 && other.lost == nil && other.addr != "" {
			cluster = append(cluster, other.addr)
		}
	}
	rt.mu.Unlock()
	o := &rt.cfg.Runtime
	place := &wire.Place{
		Run: rt.run, ModelName: rt.cfg.ModelName, ModelYaml: rt.cfg.Model, ModelSha256: wire.ModelHash(rt.cfg.Model),
		Form: rt.cfg.Form, Ranks: ranks, Nodes: cluster, Node: int32(self),
		DriverAddress: rt.client.GetAddress(), DriverId: rt.client.GetId(), Token: ns.token,
		Options: &wire.Options{
			Recorders: int32(o.Recorders), NoRetain: o.NoRetain, SkipDevice: o.SkipDevice,
			DefectsAsWarnings: o.DefectsAsWarnings, StrictRecording: o.StrictRecording,
			InFlight: int32(o.InFlight), Race: !o.Device.NoRace, Golden: o.Golden,
			PassTimeoutNs: int64(o.PassTimeout), FullEdges: o.FullEdges,
			KeepBytes: o.KeepBytes, KeepDefinitions: int32(o.KeepDefinitions), OrdinaryWhileRecording: o.OrdinaryWhileRecording,
		},
	}
	res, err := rt.awaitPlaced(ns, rt.sys.Root.RequestFuture(pid, place, placeTimeout))
	if err != nil {
		return lost(fmt.Sprintf("no answer to the placement of its ranks: %v", err))
	}
	placed, ok := res.(*wire.Placed)
	if !ok {
		return fmt.Errorf("node %s: placement answered with %T", ns.addr, res)
	}
	if f := placed.GetFailure(); f != nil {
		return fmt.Errorf("node %s: placing ranks %v: %w", ns.addr, ns.ranks, f.Err())
	}
	rt.mu.Lock()
	ns.pid = pid
	rt.mu.Unlock()
	rt.sys.Root.Send(rt.client, &watchHost{pid: pid})
	return nil
}

// awaitPlaced is a placement's answer, or the node's loss if it comes
// first (a connection refused or ended: gRPC refusing a message over its
// limit ends it), not placeTimeout later.
func (rt *Runtime) awaitPlaced(ns *nodeState, f *actor.Future) (any, error) {
	type answer struct {
		res any
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		res, err := f.Result()
		ch <- answer{res, err}
	}()
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ns.gone:
		return nil, errors.New("the node was lost")
	}
}
