package actors

import (
	"sync/atomic"
	"time"

	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// Counts describe one pass.
type Counts = stages.PassCounts

// PassResult is one pass of one rank.
type PassResult struct {
	Pass     trace.Pass
	Counts   Counts
	Device   *npu.Result
	Defects  []stages.Defect
	Warnings []string
	// DeviceStartNs is when device_wall began, on trace.Now's clock: the
	// simulated timeline starts there in a trace.
	DeviceStartNs int64
	// KernelTasks counts device tasks per KernelID (with CountKernels).
	KernelTasks []int
	// Golden is the pass's golden check (with Config.Golden).
	Golden *golden.Check
	Err    error
}

// Phase is how long phase ph took in this pass (device_wall: the simulated
// wall) and whether the pass measured it.
func (r *PassResult) Phase(ph trace.Phase) (time.Duration, bool) {
	return time.Duration(r.Pass.Phases[ph]), r.Pass.Has(ph)
}

// ControlPlane is the pass's host_orch + graph_upload + arena_h2d.
func (r *PassResult) ControlPlane() time.Duration {
	ns, _ := r.Pass.ControlPlaneNs()
	return time.Duration(ns)
}

// Stats are the runtime's lifetime counters.
type Stats struct {
	Recorded      atomic.Int64
	RecordedNodes atomic.Int64
	Restarts      atomic.Int64
	MaxQueued     atomic.Int64
	// Loaded, StoreRejected and StoreWritten count Definitions loaded from
	// the store on disk, entries rejected there, and Definitions written.
	Loaded        atomic.Int64
	StoreRejected atomic.Int64
	StoreWritten  atomic.Int64
	// Fetched, FetchedBytes and FetchRejected count Definitions fetched
	// from Config.Peers, their bytes, and images from there that failed
	// verification.
	Fetched       atomic.Int64
	FetchedBytes  atomic.Int64
	FetchRejected atomic.Int64
	// DeviceRefused counts Definitions from the store on disk or the
	// cluster that the device could not read: each is moved aside, counted
	// in StoreRejected too, and recorded again.
	DeviceRefused atomic.Int64
}

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
