package remote

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/trace"
	"github.com/hbg-dev/hbg/wire"
)

// A node of a cluster in etcd that is lost while the run runs has its
// ranks placed again on a node that joined the cluster and holds none of
// the run's: its passes in flight, and those asked meanwhile, wait for
// the new placement and go there (a rank's first pass there is its node's
// cold one). Without a node to take them, or a placement that fails,
// they fail with the lost node's error, as with a list of nodes.

// route is the node rank's passes go to (under mu).
func (rt *Runtime) route(rank int) int {
	if j, ok := rt.moved[rank]; ok {
		return j
	}
	return rank % rt.base
}

// spareFor picks a slot and a node that joined the cluster for lost
// node i's ranks, and marks i moving (under mu); -1: none.
func (rt *Runtime) spareFor(i int) int {
	if rt.cluster == nil || len(rt.nodes[i].ranks) == 0 {
		return -1
	}
	select {
	case <-rt.stopped:
		return -1
	default:
	}
	slot := slices.IndexFunc(rt.nodes[rt.base:], func(ns *nodeState) bool { return ns.addr == "" })
	if slot < 0 {
		return -1
	}
	for _, addr := range rt.joined {
		used := slices.ContainsFunc(rt.nodes, func(ns *nodeState) bool { return ns.addr == addr })
		if used || rt.left(addr) {
			continue
		}
		j := rt.base + slot
		rt.nodes[j].addr = addr
		rt.nodes[j].ranks = slices.Clone(rt.nodes[i].ranks)
		rt.nodes[i].moving = true
		return j
	}
	return -1
}

// replace places lost node i's ranks on slot j's node and sends it the
// passes that waited, or fails them.
func (rt *Runtime) replace(i, j int) {
	err := rt.place(j)
	rt.mu.Lock()
	from, to := rt.nodes[i], rt.nodes[j]
	from.moving = false
	if err == nil {
		if rt.moved == nil {
			rt.moved = map[int]int{}
		}
		for _, r := range to.ranks {
			rt.moved[r] = j
		}
	}
	var ps []*pending
	for seq, p := range rt.pending {
		if p.node != i {
			continue
		}
		if err == nil {
			p.node = j
		} else {
			delete(rt.pending, seq)
		}
		ps = append(ps, p)
	}
	lost, pid := from.lost, to.pid
	rt.mu.Unlock()
	if f := rt.cfg.OnRanksMoved; f != nil {
		f(from.addr, to.addr, to.ranks, err)
	}
	if err != nil {
		for _, p := range ps {
			p.reply <- &actors.PassResult{Pass: trace.NewPass(p.rank, p.round),
				Err: fmt.Errorf("%w (and placing its ranks again on %s failed: %v)", lost.forPass(p.rank, p.round), to.addr, err)}
		}
		return
	}
	select {
	case <-rt.stopped:
	default:
		rt.beats.Add(1)
		go rt.heartbeat(j)
	}
	for _, p := range ps {
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(oteltrace.ContextWithSpan(context.Background(), p.span), carrier)
		req := &wire.PassRequest{Run: rt.run, Seq: p.seq, Rank: int32(p.rank), Round: int32(p.round), Trace: carrier}
		rt.Wire.Sent.Add(1)
		rt.Wire.SentBytes.Add(int64(proto.Size(req)))
		rt.sys.Root.Send(pid, req)
	}
}
