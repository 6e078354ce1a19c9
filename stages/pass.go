package stages

import (
	"fmt"
	"slices"
)

// This file (with host.go and replay.go) is the logic of a pass as a pure state machine, in the manner of
// etcd raft's RawNode: events in, actions out, no actors, time or goroutines.
// It has two halves, one per actor that owns it in turn:
//
//	Host (the submission actor, per rank)   Graph calls → record requests;
//	                                        End → the Pass, handed off once
//	Replay (the replay actor, per rank)     Outcomes (a Definition built and
//	                                        uploaded, or why not), device
//	                                        replies → actions: Learn, Ship,
//	                                        Rerun, Reply
//
// A Pass is owned by the Host until End and by the Replay after Handoff, and
// by the Host again if the Replay gives it back to be rerun (Host.Rerun); it
// is never held by both at once. Its Published Definitions are shared with
// every rank, which is why they are immutable.

// Published is a Definition as the store publishes it: immutable, shared by
// every rank that replays it.
type Published struct {
	Def     *Definition
	Image   []byte
	Hash    uint64
	Written []int32 // boundary slots the body writes
}

// PassCounts describe one pass.
type PassCounts struct {
	// GraphCalls is every Graph call the orchestration made.
	GraphCalls          int
	HostSubmissions     int
	OrdinaryTasks       int
	GraphSubmissions    int
	Definitions         int
	Demoted             int
	BoundaryMismatches  int
	FallbackCalls       int
	Verified            int
	ExpectedDeviceTasks int
}

// RecordRequest asks the pipeline to record one body. Its slices are its own
// (copied from the call).
type RecordRequest struct {
	Pass     uint64
	StoreKey uint64
	FullKey  uint64
	Key      string
	Boundary []Arg
	Roots    []BoundaryRoot
	Scalars  []uint64
	ExtDeps  []TaskID // the call's external dependencies
	Body     BodyFunc
	// Verify re-records a later call of a key already recorded, to catch
	// what the first recording baked in.
	Verify bool
	// FullEdges: the Definition ships every fanin edge (PassConfig's).
	FullEdges bool
}

// Outcome is the pipeline's answer to a RecordRequest, as it reaches the
// rank's replay: the Definition, built and made a device object, or why not.
type Outcome struct {
	Pass     uint64
	StoreKey uint64
	Verify   bool
	Def      *Published
	// Err is a recording failure (Panicked: the body panicked).
	Err      error
	Panicked bool
	Defects  []Defect
	// Recorded says this request's own recording made the Definition.
	Recorded      bool
	RecordedNodes int
	RecordNs      int64
	BuildNs       int64
	// Store is what the store on disk did for this request.
	Store StoreLoad
	// UploadedBytes is the Definition bytes uploaded for this request.
	UploadedBytes int64
	UploadErr     error
}

// Learned is what a pass tells the Host about one key once the pipeline has
// answered: its Definition (a device object on this rank), its failure, or
// nothing known (Forget: ask again next time).
type Learned struct {
	StoreKey uint64
	Def      *Published
	Failed   error
	Forget   bool
}

// PassConfig is what a pass's logic depends on.
type PassConfig struct {
	// NoRetain salts store keys per pass, so every pass records afresh.
	NoRetain bool
	// DefectsAsWarnings reports body defects as warnings, not errors.
	DefectsAsWarnings bool
	// StrictRecording fails a pass whose body records something
	// unsupported instead of rerunning it with that key on the ordinary path.
	StrictRecording bool
	// SkipDevice ends a pass once its run image is copied.
	SkipDevice bool
	// CountKernels fills Pass.KernelTasks.
	CountKernels bool
	// FullEdges ships every fanin edge the TensorMap resolved instead of
	// their transitive reduction (reduce.go): the ordinary path's run
	// image and the Definitions the pass's recordings build.
	FullEdges bool
}

type passStep uint8

const (
	stepOrch    passStep = iota // host_orch: the Host owns it
	stepWait                    // handed off, waiting for outcomes
	stepReady                   // every outcome in, shells final: may ship
	stepShipped                 // run image (and launch) sent to the device
	stepCopied                  // the copy answered, the launch not yet
	stepDone
)

type shell struct {
	task TaskID
	sk   uint64
}

// Pass is one pass of one rank.
type Pass struct {
	ID       uint64
	Round    int
	Image    *RunImage
	Counts   PassCounts
	Warnings []string
	Defects  []Defect
	// KernelTasks counts device tasks per KernelID (CountKernels).
	KernelTasks []int
	// What the pass's recordings made and cost, summed over the recorders
	// (each builds the Definition it recorded): the nodes of its new
	// Definitions, and the record_node (verifications included) and
	// build_definition totals.
	RecordedNodes    int
	RecordNodeOps    int
	RecordNs         int64
	BuiltDefinitions int
	BuildNs          int64
	// Store is what the store on disk loaded for the pass, and rejected.
	Store StoreLoad
	// UploadedBytes is the Definition bytes uploaded for this pass.
	UploadedBytes int64
	// Err is why the pass failed, once it has.
	Err error
	// StoreKeys lists, without retention, the pass's own store keys, which
	// the store drops once the pass is over.
	StoreKeys []uint64

	cfg      PassConfig
	nkernels int
	step     passStep
	errs     []error
	shells   []shell
	used     []*Published
	pending  map[uint64]int // store key -> outcomes awaited (a recording and a verification)
	defs     map[uint64]*Published
	learned  []Learned
	rerun    bool
	fellBack []uint64
	// atDevice counts this pass's device requests not yet answered.
	atDevice int
	replied  bool
}

// Shipping says whether the pass's run image has been sent to the device.
func (p *Pass) Shipping() bool { return p.step >= stepShipped }

func (p *Pass) warn(format string, a ...any) {
	const maxWarnings = 64
	if len(p.Warnings) < maxWarnings {
		p.Warnings = append(p.Warnings, fmt.Sprintf(format, a...))
	}
}

func (p *Pass) use(d *Published) {
	for _, u := range p.used {
		if u == d {
			return
		}
	}
	p.used = append(p.used, d)
}

// Used is the Definitions the pass replays.
func (p *Pass) Used() []*Published { return p.used }

// Waiting lists the store keys whose outcome the pass still awaits.
func (p *Pass) Waiting() []uint64 {
	var out []uint64
	for k, n := range p.pending {
		if n > 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
