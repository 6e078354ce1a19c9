package actors

import "time"

// The device's figures are simulated nanoseconds as plain integers in
// npu.Result, because npu is a pure stage and may not import time (tests/
// purity_test.go); these give an embedder the same figures as durations, as
// Phase and ControlPlane do for the host's.

// DeviceWall is the simulated device wall of the pass (npu.Result.SimNs),
// and whether the device ran it.
func (r *PassResult) DeviceWall() (time.Duration, bool) {
	if r.Device == nil {
		return 0, false
	}
	return time.Duration(r.Device.SimNs), true
}

// CriticalPath is the simulated length of the pass's longest dependency
// chain on the device (npu.Result.CriticalPathNs), and whether the device
// ran it.
func (r *PassResult) CriticalPath() (time.Duration, bool) {
	if r.Device == nil {
		return 0, false
	}
	return time.Duration(r.Device.CriticalPathNs), true
}
