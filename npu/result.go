package npu

import "github.com/hbg-dev/hbg/stages"

// Result is one launch's outcome.
type Result struct {
	// Tasks is the device task count: every ordinary task and every Graph
	// node retired, kernels, dummies, allocs and predicated-off tasks alike
	// (upstream counts a predicated-off task as a task: DSv4 eager is 15971
	// including its 8256 predicated tasks). Outer GRAPH tasks are not
	// counted; their nodes are.
	Tasks int
	// Kernels ran on cores; Skipped were predicated off (retired by the
	// resolver without a core); Dummies and Allocs were retired likewise.
	Kernels, Skipped, Dummies, Allocs int
	// GraphTasks is the number of outer GRAPH tasks expanded.
	GraphTasks int
	// Subtasks is the number of blocks dispatched (a MIX block counts once
	// and occupies three cores).
	Subtasks int
	// SimNs is the simulated device wall: from launch to the resolver's
	// last completion.
	SimNs int64
	// Digest combines, in root order, the digest of every entry root the
	// run wrote and of every entry output (Outputs lists them).
	Digest  uint64
	Outputs []RootDigest
	// CoreBusyNs is each core's busy time (cores 0..23 AIC, 24..71 AIV).
	CoreBusyNs []int64
	// CriticalPathNs is the longest dependency chain in simulated time:
	// the sum, along a chain of dependencies, of each task's execution span
	// (first block start to last block end; zero for tasks without a
	// core). CriticalPath lists that chain's tasks, first to last.
	CriticalPathNs int64
	CriticalPath   []TaskRef
	// Timeline is every subtask on its core (when Config.Timeline is set).
	Timeline []Slice
	// Flows is every dependency released, producer then consumer, in the
	// order the producers completed (when Config.Flows is set).
	Flows []Flow
	// TaskDigests is every device task's input digest (when
	// Config.TaskDigests is set), in submission order, GRAPH tasks expanded
	// into their nodes in place.
	TaskDigests []TaskDigest
	// Races is the run's racing pairs (race.go; at most Config.MaxRaces),
	// RaceCount how many were found; both empty with Config.NoRace.
	Races     []Race
	RaceCount int
	// DeclaredRaces counts the races among kernels the model declares may
	// race (stages.Kernel.RaceGroup); they are in neither Races nor
	// RaceCount.
	DeclaredRaces int
	// FaninEdges is every dependency edge of the run's task graph, each
	// Graph instance's nodes included: the edges the host's TensorMap
	// resolved. ShippedEdges is those the host shipped (its transitive
	// reduction drops the edges other paths imply, stages/reduce.go),
	// which the resolver resolved one by one (Config.FaninNs each).
	FaninEdges, ShippedEdges int
	// AICPUBusyNs is each AICPU thread's busy time: the schedulers, then
	// the resolver (the simulated scheduler time).
	AICPUBusyNs []int64
}

// TaskDigest is one device task's identity and the digest of what it read
// (kernel code, block_num, scalars, inputs); 0 for tasks without a core.
type TaskDigest struct {
	Ref     TaskRef
	Kind    stages.Kind
	Kernel  [3]stages.KernelID
	In      uint64
	Skipped bool
}

// RootDigest is one entry root's digest at the end of a run.
type RootDigest struct {
	Root    stages.RootID
	Name    string
	Digest  uint64
	Written bool
	// Segments is the root's contents at the end of the run: element
	// intervals with their digest and last writer (the golden check names
	// the first interval where two runs differ).
	Segments []Segment
}

// TaskRef names a device task: an image task, or node Node of the Graph
// instance whose outer task is Task (Node is -1 for an image task).
type TaskRef struct {
	Task stages.TaskID
	Node int32
}

// Flow is one dependency: To waited for From.
type Flow struct{ From, To TaskRef }

// Slice is one subtask on one core, for a Perfetto trace.
type Slice struct {
	Core   int32
	Task   stages.TaskID
	Node   int32 // -1 for an ordinary task
	Kernel stages.KernelID
	Block  int32
	Start  int64 // ns of simulated time
	Dur    int64
	// Key is the Graph key of the Definition a node belongs to ("" for an
	// ordinary task): a timeline is read by which Graph kept which cores
	// busy, and only the device knows which instance a node came from.
	Key string
}
