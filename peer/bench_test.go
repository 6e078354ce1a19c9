package peer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/trace"
)

// BenchmarkColdPassPeer is DSv4 full's first pass in a fresh runtime (the
// device skipped), its 8 Definitions recorded (no peers) or fetched from a
// peer in another process that holds them (the owner of every key). Each
// iteration runs one of each, alternately, so both see the same load; the
// metrics are each one's median: its wall (the pass, Pass to result), its
// control plane, and for fetch the summed peer_fetch time of its 8
// requests (they overlap each other and host_orch). ns/op is the pair. The
// runtime's start and stop are outside the timing.
func BenchmarkColdPassPeer(b *testing.B) {
	orch := must(dsv4())(b)
	sys := must(host())(b)
	owner := startChild(b)
	owner.do(command{Op: "node", Spec: nodeSpec{Nodes: []string{owner.addr}, Owner: owner.addr}})
	if p := owner.do(command{Op: "pass"}).Pass; p.Built != dsv4Keys {
		b.Fatalf("the owner built %d Definitions, want %d", p.Built, dsv4Keys)
	}
	p := must(Start(sys, Config{owner: func(uint64) string { return owner.addr }}))(b)
	b.Cleanup(p.Stop)
	src := must(p.Cluster(sys.Address(), []string{sys.Address(), owner.addr}))(b)

	type sample struct{ wall, control, fetch time.Duration }
	var rec, fet []sample
	pass := func(cfg actors.Config, fetched int) sample {
		b.StopTimer()
		rt := must(actors.Start(sys, cfg))(b)
		b.StartTimer()
		t0 := time.Now()
		res, err := rt.Pass(context.Background(), orch, 0, 0)
		wall := time.Since(t0)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if res.Pass.FetchedDefinitions != fetched || res.Pass.BuiltDefinitions != dsv4Keys-fetched {
			b.Fatalf("pass: built %d, fetched %d, want %d fetched (warnings %q)", res.Pass.BuiltDefinitions, res.Pass.FetchedDefinitions, fetched, res.Warnings)
		}
		_ = rt.Stop(context.Background())
		b.StartTimer()
		return sample{wall, res.ControlPlane(), time.Duration(res.Pass.Ops[trace.OpPeerFetch].TotalNs)}
	}
	for b.Loop() {
		rec = append(rec, pass(actors.Config{SkipDevice: true}, 0))
		fet = append(fet, pass(actors.Config{SkipDevice: true, Peers: src}, dsv4Keys))
	}
	median := func(s []sample, f func(sample) time.Duration) float64 {
		d := make([]time.Duration, len(s))
		for i := range s {
			d[i] = f(s[i])
		}
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e3
	}
	wall := func(s sample) time.Duration { return s.wall }
	control := func(s sample) time.Duration { return s.control }
	b.ReportMetric(median(rec, wall), "record-µs")
	b.ReportMetric(median(fet, wall), "fetch-µs")
	b.ReportMetric(median(rec, control), "record-control-µs")
	b.ReportMetric(median(fet, control), "fetch-control-µs")
	b.ReportMetric(median(fet, func(s sample) time.Duration { return s.fetch }), "peer_fetch-sum-µs")
}

// BenchmarkClusterClaim is the cost of one key's claim in a cluster of
// three members (child processes): one member misses n keys nobody holds
// at once, each key's owner (a virtual actor, activated on the member the
// cluster places it on: two thirds of them another process) grants it the
// claim, and it abandons each as granted. Every iteration asks n fresh
// keys, so each ask activates its owner (the activation and its rebuild
// are in the cost). per-key-µs is the iteration's wall over n, its
// median over the iterations; claim-µs the median key's ask to grant.
func BenchmarkClusterClaim(b *testing.B) {
	cs := make([]*child, 3)
	for i := range cs {
		cs[i] = startChild(b)
	}
	ms := members(cs...)
	for _, c := range cs {
		c.do(command{Op: "node", Spec: nodeSpec{Members: ms}})
	}
	base := uint64(1)
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			var per, claim []time.Duration
			for b.Loop() {
				base += uint64(n) + 1
				r := cs[0].do(command{Op: "claims", FullKey: base << 20, Round: n})
				per = append(per, time.Duration(r.Wall)/time.Duration(n))
				claim = append(claim, time.Duration(r.Median))
			}
			med := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2]) / 1e3
			}
			b.ReportMetric(med(per), "per-key-µs")
			b.ReportMetric(med(claim), "claim-µs")
		})
	}
}
