package peer

import (
	"context"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/trace"
)

// BenchmarkColdPassPeer is DSv4 full's first pass in a fresh runtime (the
// device skipped), its 8 Definitions either recorded (no peers) or fetched
// from a peer in another process that holds them (the owner of every key).
// The runtime's start and stop are outside the timing. Metrics: the pass's
// control plane and, for fetch, the peer_fetch total (asking, the wire and
// the wait, per pass; it overlaps host_orch).
func BenchmarkColdPassPeer(b *testing.B) {
	orch := must(dsv4())(b)
	sys := must(host())(b)
	run := func(b *testing.B, cfg actors.Config, want func(trace.Pass) bool) {
		var control, fetchNs time.Duration
		for b.Loop() {
			b.StopTimer()
			rt := must(actors.Start(sys, cfg))(b)
			b.StartTimer()
			res, err := rt.Pass(context.Background(), orch, 0, 0)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if !want(res.Pass) {
				b.Fatalf("pass: built %d, fetched %d (warnings %q)", res.Pass.BuiltDefinitions, res.Pass.FetchedDefinitions, res.Warnings)
			}
			control += res.ControlPlane()
			fetchNs += time.Duration(res.Pass.Ops[trace.OpPeerFetch].TotalNs)
			_ = rt.Stop(context.Background())
			b.StartTimer()
		}
		b.ReportMetric(float64(control.Microseconds())/float64(b.N), "control-µs/op")
		if fetchNs > 0 {
			b.ReportMetric(float64(fetchNs.Microseconds())/float64(b.N), "peer_fetch-µs/op")
		}
	}
	b.Run("record", func(b *testing.B) {
		run(b, actors.Config{SkipDevice: true}, func(p trace.Pass) bool { return p.BuiltDefinitions == dsv4Keys })
	})
	b.Run("fetch", func(b *testing.B) {
		owner := startChild(b)
		owner.do(command{Op: "node", Spec: nodeSpec{Nodes: []string{owner.addr}, Owner: owner.addr}})
		if p := owner.do(command{Op: "pass"}).Pass; p.Built != dsv4Keys {
			b.Fatalf("the owner built %d Definitions, want %d", p.Built, dsv4Keys)
		}
		p := must(Start(sys, Config{owner: func(uint64) string { return owner.addr }}))(b)
		b.Cleanup(p.Stop)
		src := must(p.Cluster(sys.Address(), []string{sys.Address(), owner.addr}))(b)
		run(b, actors.Config{SkipDevice: true, Peers: src}, func(p trace.Pass) bool {
			return p.BuiltDefinitions == 0 && p.FetchedDefinitions == dsv4Keys
		})
	})
}
