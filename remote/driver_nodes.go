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
