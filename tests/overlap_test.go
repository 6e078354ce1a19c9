package tests

import (
	"context"
	"slices"
	"testing"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/trace"
)

// TestDeviceIdle: DSv4 full, warm passes. Taking turns (InFlight 1) the
// device idles before every pass for at least that pass's control plane;
// overlapped (the default), the next pass's control plane runs under the
// device's 68 ms simulated wall, so the device does not idle (the median is
// asserted: a host descheduled for longer than a device wall on a loaded
// machine can make one pass wait).
func TestDeviceIdle(t *testing.T) {
	m := loadDSv4(t)
	orch := orchestration(m, "full")
	for _, inFlight := range []int{1, 2} {
		rt := startRuntime(t, actors.Config{InFlight: inFlight})
		passes, err := rt.Run(context.Background(), actors.RunSpec{Orchestration: orch, Rounds: 6, Ranks: 1, Info: trace.RunInfo{Model: m.Name, Form: "full"}})
		if err != nil {
			t.Fatal(err)
		}
		var idle []int64
		for _, p := range passes[1:] {
			cp, _ := p.Pass.ControlPlaneNs()
			if inFlight == 1 && p.Pass.DeviceIdleNs < cp {
				t.Errorf("in turns, round %d: device idle %d ns, control plane %d ns", p.Pass.Round, p.Pass.DeviceIdleNs, cp)
			}
			idle = append(idle, p.Pass.DeviceIdleNs)
		}
		slices.Sort(idle)
		t.Logf("in flight %d: warm device_idle %v ns", inFlight, idle)
		if med := idle[len(idle)/2]; inFlight == 2 && med != 0 {
			t.Errorf("overlapped: median device idle %d ns, want 0", med)
		}
	}
}
