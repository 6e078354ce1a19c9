package stages

import "testing"

// TestDeviceAxis: taking turns, the device idles for every control plane;
// overlapped, for none once the host runs ahead; a host slower than the
// device leaves the difference idle.
func TestDeviceAxis(t *testing.T) {
	const ms = int64(1e6)
	type pass struct{ begin, ready, sim, answer int64 }
	cases := []struct {
		name   string
		passes []pass
		want   []int64
	}{
		// Turns: each pass begins 1 ms after the previous answer; control
		// plane 2 ms (1 ms of waiting for the answer counts as idle too).
		{"turns", []pass{{0, 2 * ms, 50 * ms, 60 * ms}, {61 * ms, 63 * ms, 50 * ms, 120 * ms}, {121 * ms, 123 * ms, 50 * ms, 180 * ms}},
			[]int64{2 * ms, 3 * ms, 3 * ms}},
		// Overlap: pass 1 begins right after pass 0's host_orch, before
		// any answer; pass 2 after pass 0's answer. The device never waits.
		{"overlap", []pass{{0, 2 * ms, 50 * ms, 60 * ms}, {1 * ms, 3 * ms, 50 * ms, 120 * ms}, {61 * ms, 63 * ms, 50 * ms, 180 * ms}},
			[]int64{2 * ms, 0, 0}},
		// A host whose control plane (80 ms) outlasts the device (50 ms):
		// overlapped, the device waits for the difference.
		{"slow host", []pass{{0, 80 * ms, 50 * ms, 90 * ms}, {80 * ms, 160 * ms, 50 * ms, 170 * ms}},
			[]int64{80 * ms, 30 * ms}},
	}
	for _, tc := range cases {
		var a DeviceAxis
		for i, p := range tc.passes {
			if got := a.Place(p.begin, p.ready, p.sim); got != tc.want[i] {
				t.Errorf("%s: pass %d idle %d ns, want %d", tc.name, i, got, tc.want[i])
			}
			a.Answered(p.answer)
		}
	}
}
