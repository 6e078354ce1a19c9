package tests

import (
	"testing"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
)

// TestDeviceWallsMatchUpstream: with one set of device defaults
// (npu.DefaultConfig), both steps upstream measured on an a2a3 board
// simulate within 20% of the measurement: DSv4 flash decode's Graph form
// (35.47 ms device_wall; the full form here) and Qwen3-14B decode's Graph
// form (39.3 ms). The bandwidth was fitted to Qwen3 alone; DSv4 is the
// check (docs/benchmarks-history.md, "Cost model calibration").
//
// The eager forms count the TensorMap's whole edge set (the reference
// traces' 44412 and 23563) as fanin_edges, and ship fewer: the host's
// transitive reduction. With FullEdges every edge ships, and the digest
// and the wall's inputs stay the same.
func TestDeviceWallsMatchUpstream(t *testing.T) {
	for _, tc := range []struct {
		model, form string
		upstreamNs  float64
		eagerEdges  int
	}{
		{dsv4, "full", 35.47e6, 44412},
		{qwen3, "graph", 39.3e6, 23563},
	} {
		m, err := config.Load(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		rt := startRuntime(t, actors.Config{})
		res := runPasses(t, rt, orchestration(m, tc.form), 1)[0].Device
		if w := float64(res.SimNs); w < 0.8*tc.upstreamNs || w > 1.2*tc.upstreamNs {
			t.Errorf("%s %s: simulated device wall %.2f ms, want within 20%% of upstream's measured %.2f ms", m.Name, tc.form, w/1e6, tc.upstreamNs/1e6)
		}
		t.Logf("%s %s: wall %.3f ms (upstream %.2f ms), %d edges, %d shipped", m.Name, tc.form, float64(res.SimNs)/1e6, tc.upstreamNs/1e6, res.FaninEdges, res.ShippedEdges)

		eager := runPasses(t, rt, orchestration(m, "eager"), 1)[0].Device
		full := runPasses(t, startRuntime(t, actors.Config{FullEdges: true}), orchestration(m, "eager"), 1)[0].Device
		if eager.FaninEdges != tc.eagerEdges || full.FaninEdges != tc.eagerEdges || full.ShippedEdges != tc.eagerEdges {
			t.Errorf("%s eager: fanin_edges %d (every edge shipped: %d, of which %d shipped), want the TensorMap's %d", m.Name, eager.FaninEdges, full.FaninEdges, full.ShippedEdges, tc.eagerEdges)
		}
		if eager.ShippedEdges >= eager.FaninEdges || eager.Digest != full.Digest {
			t.Errorf("%s eager: %d of %d edges shipped, digest %#x (every edge shipped: %#x)", m.Name, eager.ShippedEdges, eager.FaninEdges, eager.Digest, full.Digest)
		}
	}
}
