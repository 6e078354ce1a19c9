package trace

import (
	"fmt"
	"time"
)

// Phase is one segment of a pass, named as upstream names it (its bind
// phases), so that a table from hbg and one from upstream's hbg_bind_phases
// read side by side.
type Phase uint8

const (
	// PhaseArgs stages the entry arguments.
	PhaseArgs Phase = iota
	// PhaseHostOrch runs the orchestration on the host: ordinary submits,
	// Graph calls (record, replay), until commit.
	PhaseHostOrch
	// PhaseGraphUpload uploads each new Definition once, as a shared device
	// object.
	PhaseGraphUpload
	// PhaseArenaH2D copies the run image (task descriptors and
	// GraphSubmissions) to the device.
	PhaseArenaH2D
	// PhaseDeviceWall is the device's wall. In a Pass it holds the
	// *simulated* ns; its span covers the real wall of the simulation.
	PhaseDeviceWall

	// NumPhases sizes per-phase arrays.
	NumPhases
)

var phaseNames = [NumPhases]string{"args", "host_orch", "graph_upload", "arena_h2d", "device_wall"}

// String is the phase's upstream name, which is also its span name.
func (p Phase) String() string {
	if p < NumPhases {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// ControlPlane reports whether the phase counts toward the control plane,
// host_orch + graph_upload + arena_h2d. args is left out as upstream leaves it
// out (it scales with the staged weights, not with the runtime), and
// device_wall is the data plane.
func (p Phase) ControlPlane() bool {
	return p == PhaseHostOrch || p == PhaseGraphUpload || p == PhaseArenaH2D
}

// ParsePhase accepts a phase's upstream name.
func ParsePhase(s string) (Phase, error) {
	for i, n := range phaseNames {
		if n == s {
			return Phase(i), nil
		}
	}
	return NumPhases, fmt.Errorf("trace: unknown phase %q (want args, host_orch, graph_upload, arena_h2d or device_wall)", s)
}

// PhaseSet is a set of phases, one bit each.
type PhaseSet uint8

// Has reports whether p is in the set.
func (s PhaseSet) Has(p Phase) bool { return s&(1<<p) != 0 }

// With returns the set plus p.
func (s PhaseSet) With(p Phase) PhaseSet { return s | 1<<p }

// Op is an operation inside host_orch whose cost is summed, not spanned:
// there are thousands per pass, and one span each would cost more than the
// operation.
type Op uint8

const (
	OpSubmitTask      Op = iota // an ordinary task submission (upstream submit_task)
	OpAllocTensors              // an alloc task (upstream alloc_tensors)
	OpRecordNode                // one node recorded into a Definition
	OpGraphSubmit               // a replay: patch the boundary, emit the GraphSubmission
	OpBuildDefinition           // building one Definition's flat image
	OpStoreLoad                 // loading and verifying one Definition from the store on disk
	OpPeerFetch                 // asking the cluster for one Definition: the image fetched from a peer, or the answer to record it

	// NumOps sizes per-op arrays.
	NumOps
)

var opNames = [NumOps]string{"submit_task", "alloc_tensors", "record_node", "graph_submit", "build_definition", "store_load", "peer_fetch"}

// String is the operation's upstream name.
func (o Op) String() string {
	if o < NumOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseOp accepts an operation's upstream name.
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if n == s {
			return Op(i), nil
		}
	}
	return NumOps, fmt.Errorf("trace: unknown op %q (want submit_task, alloc_tensors, record_node, graph_submit, build_definition, store_load or peer_fetch)", s)
}

// epoch is the origin of Now. Capturing it once gives every figure in a
// process one monotonic clock: op totals, phase spans and the Chrome trace
// timeline all subtract from the same reading.
var epoch = time.Now()

// Now is a monotonic reading in ns since the process started. It reads only
// the monotonic clock (time.Since on a time with a monotonic reading), so it
// costs about as much as one clock_gettime and never allocates.
func Now() int64 { return int64(time.Since(epoch)) }

// sinceEpoch converts a time taken in this process to the Now timeline.
func sinceEpoch(t time.Time) int64 { return int64(t.Sub(epoch)) }

// OpTotal is the summed cost of one operation: a cost share, not an interval
// (upstream's "host-orch phase=" lines are the same thing).
type OpTotal struct {
	Count   int64 `json:"count"`
	TotalNs int64 `json:"total_ns"`
}

// Ops holds per-operation totals. It is a plain array: one Ops per actor,
// written only by that actor's goroutine (so no lock and no atomic on the hot
// path), sent by value at the end of a pass and merged by whoever assembles
// the Pass. The zero value is ready to use.
//
// The hot path is two clock reads and two adds:
//
//	t0 := trace.Now()
//	id := submit(task)
//	ops.Since(trace.OpSubmitTask, t0)
type Ops [NumOps]OpTotal

// Since adds one operation that started at t0 (a Now reading) and ends now.
func (o *Ops) Since(op Op, t0 int64) {
	o[op].Count++
	o[op].TotalNs += Now() - t0
}

// Add adds count operations that took ns in total.
func (o *Ops) Add(op Op, count, ns int64) {
	o[op].Count += count
	o[op].TotalNs += ns
}

// Merge adds another actor's totals.
func (o *Ops) Merge(other *Ops) {
	for i := range o {
		o[i].Count += other[i].Count
		o[i].TotalNs += other[i].TotalNs
	}
}

// Pass is what one rank measured in one round: the phase durations and the
// counters that explain them. Its fields are plain data so that a pass can be
// sent between actors by value and summarized by pure functions.
type Pass struct {
	Rank  int
	Round int // 0-based
	// Cold marks the first pass of a rank: it pays for recordings, builds and
	// uploads that later passes reuse, so it is reported apart from the warm
	// passes. NewPass sets it for round 0.
	Cold bool
	// Phases holds ns per phase, valid where Measured has the phase.
	// Phases[PhaseDeviceWall] is the simulated device wall.
	Phases   [NumPhases]int64
	Measured PhaseSet
	// Ops is the merged per-operation totals of every actor in the pass.
	Ops Ops
	// RecordedNodes is the nodes recorded in this pass (all keys).
	RecordedNodes int
	// BuiltDefinitions is the Definitions built in this pass.
	BuiltDefinitions int
	// UploadedDefinitionBytes is the Definition image bytes uploaded in this
	// pass (the run image is not counted: it goes with arena_h2d).
	UploadedDefinitionBytes int64
	// RunImageBytes is the pass's run image and RunImageSentBytes what of
	// it crossed to the device: only the ranges that changed since the
	// image the device holds (nothing, for a warm pass whose boundary
	// values are the last pass's).
	RunImageBytes, RunImageSentBytes int64
	// LoadedDefinitions and LoadedBytes count the Definitions this pass
	// loaded from the store on disk instead of recording them, and their
	// image bytes; StoreRejected the entries found bad there (moved aside
	// and recorded again).
	LoadedDefinitions int
	LoadedBytes       int64
	StoreRejected     int
	// FetchedDefinitions and FetchedBytes count the Definitions this pass
	// fetched from another node of the cluster instead of recording them
	// (package peer), and their image bytes; FetchRejected the images a
	// peer sent that failed verification (recorded here instead).
	FetchedDefinitions int
	FetchedBytes       int64
	FetchRejected      int
	// SimulationNs is the real (host) time the device simulation took; the
	// simulated figure is Phases[PhaseDeviceWall].
	SimulationNs int64
	// RecordWaitNs is record_wait: how long the pass, its host_orch over,
	// waited for recordings it asked for (from the hand-off to the replay
	// to the last of their Definitions arriving there), inside its
	// graph_upload; 0 when they were in before host_orch ended.
	RecordWaitNs int64
	// DeviceDefinitionBytes is the bytes of the Definition objects the
	// device held at the pass's launch (0 with the device skipped).
	DeviceDefinitionBytes int64
	// DeviceIdleNs is how long the simulated device idled before this pass,
	// waiting for the host (stages.DeviceAxis says how the host's control
	// plane is placed on the device's timeline); valid with device_wall.
	DeviceIdleNs int64
}

// NewPass starts the record of one pass; round 0 is the cold pass.
func NewPass(rank, round int) Pass {
	return Pass{Rank: rank, Round: round, Cold: round == 0}
}

// Set records a phase's duration.
func (p *Pass) Set(ph Phase, ns int64) {
	p.Phases[ph] = ns
	p.Measured = p.Measured.With(ph)
}

// Has reports whether the phase was measured in this pass.
func (p *Pass) Has(ph Phase) bool { return p.Measured.Has(ph) }

// ControlPlaneNs is this pass's control plane: the sum of its measured
// control-plane phases, and whether it measured any.
func (p *Pass) ControlPlaneNs() (int64, bool) {
	var sum int64
	measured := false
	for ph := Phase(0); ph < NumPhases; ph++ {
		if ph.ControlPlane() && p.Has(ph) {
			sum += p.Phases[ph]
			measured = true
		}
	}
	return sum, measured
}
