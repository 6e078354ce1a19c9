package peer

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/hbg-dev/hbg/actors"
)

// member is a cluster member as the tests name it.
type member struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

func clusterMembers(ms []member) (cluster.Members, error) {
	out := make(cluster.Members, 0, len(ms))
	for _, m := range ms {
		var host string
		var port int32
		for i := len(m.Addr) - 1; i >= 0; i-- {
			if m.Addr[i] == ':' {
				host = m.Addr[:i]
				if _, err := fmt.Sscanf(m.Addr[i+1:], "%d", &port); err != nil {
					return nil, err
				}
				break
			}
		}
		out = append(out, &cluster.Member{Id: m.ID, Host: host, Port: port, Kinds: []string{OwnerKind}})
	}
	return out, nil
}

// clusterNode starts a node as a member of a protoactor cluster whose
// membership the test hands it (the "members" command stands for the
// provider: etcd in package remote).
func clusterNode(sys *actor.ActorSystem, nd *node, pc Config, spec nodeSpec) (*node, error) {
	c := cluster.New(sys, cluster.Configure("t", nil, nil, remote.Configure("nonhost", 0)))
	c.Remote = remote.GetRemote(sys)
	pc.Cluster = c
	p, err := Start(sys, pc)
	if err != nil {
		return nil, err
	}
	ms, err := clusterMembers(spec.Members)
	if err != nil {
		p.Stop()
		return nil, err
	}
	c.MemberList.UpdateClusterTopology(ms)
	rt, err := actors.Start(sys, actors.Config{Peers: p.Source(), StoreDir: spec.StoreDir})
	if err != nil {
		p.Stop()
		return nil, err
	}
	p.SetDisk(rt.Disk())
	nd.peer, nd.rt, nd.cl, nd.asks = p, rt, c, map[uint64]chan actors.FetchResult{}
	return nd, nil
}

// clusterCommand runs a cluster member's commands: members (the
// cluster's new membership), ask (a fetch of FullKey, answered later),
// result (the ask's answer, within Wait; none yet: no outcome), recorded
// (the node's recording of FullKey: the reference image).
func clusterCommand(nd *node, c command) reply {
	if nd == nil || nd.cl == nil {
		return reply{Err: "not a cluster member"}
	}
	src := nd.peer.Source()
	req := actors.FetchRequest{FullKey: c.FullKey, Key: "k"}
	switch c.Op {
	case "members":
		ms, err := clusterMembers(c.Spec.Members)
		if err != nil {
			return reply{Err: err.Error()}
		}
		nd.cl.MemberList.UpdateClusterTopology(ms)
	case "ask":
		got := make(chan actors.FetchResult, 1)
		nd.asks[c.FullKey] = got
		src.Fetch(req, func(r actors.FetchResult) { got <- r })
	case "result":
		select {
		case r := <-nd.asks[c.FullKey]:
			return reply{Outcome: r.Outcome, Image: len(r.Image), Err: warnErr(r)}
		case <-time.After(c.Wait):
		}
	case "granted":
		to, err := nd.sys.Root.RequestFuture(nd.peer.pid, &grantQuery{fullKey: c.FullKey}, time.Minute).Result()
		if err != nil {
			return reply{Err: err.Error()}
		}
		return reply{Addr: to.(string)}
	case "claims":
		return claims(src, c.FullKey, c.Round)
	case "recorded":
		ref, err := dsv4Reference()
		if err != nil {
			return reply{Err: err.Error()}
		}
		src.Recorded(req, ref.images[c.FullKey])
	}
	return reply{}
}

// warnErr is a fallback's warning as the reply's error (the test fails
// with it).
func warnErr(r actors.FetchResult) string {
	if r.Outcome == "fallback" {
		return r.Warning
	}
	return ""
}

// claims asks for n keys nobody holds (base on) at once, as a pass's
// misses are asked, and abandons each claim as it is granted: the reply's
// Wall is the whole (ns), Median one key's ask to its grant.
func claims(src actors.DefinitionSource, base uint64, n int) reply {
	lat := make([]time.Duration, n)
	bad := make(chan string, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Add(1)
		req := actors.FetchRequest{FullKey: base + uint64(i)*0x9e3779b97f4a7c15, Key: "bench"}
		t := time.Now()
		src.Fetch(req, func(r actors.FetchResult) {
			lat[i] = time.Since(t)
			if r.Outcome != "record" {
				bad <- fmt.Sprintf("key %016x: outcome %q (%s)", req.FullKey, r.Outcome, r.Warning)
			}
			src.Recorded(req, nil)
			wg.Done()
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	close(bad)
	if msg, ok := <-bad; ok {
		return reply{Err: msg}
	}
	slices.Sort(lat)
	return reply{Wall: int64(wall), Median: int64(lat[n/2])}
}
