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
	// Signature is the recorder's signature of Image when it came from
	// another node and the signature verified (package peer/defsig's
	// encoding), nil for one recorded here: the store on disk keeps it
	// beside the image.
	Signature []byte
	// Nested is the Definition's own image when its body calls Graphs
	// (nested.go): it refers to each child by content hash. Image is then
	// its flattening, what the device runs, and Hash the flattening's;
	// Children are the Definitions it refers to, each kept as a Definition
	// of its own (OwnImage). Both nil for a body that calls none.
	Nested   []byte
	Children []*Published
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
	// Shells is Graph calls of a key not yet recorded (recording now, or
	// asked for by this call): they wait for the recording (record_wait).
	Shells int
	// Evicted is the Definitions the residency budget evicted after this
	// pass's host_orch; Kept and KeptBytes those the rank keeps then, and
	// the device bytes their images take.
	Evicted   int
	Kept      int
	KeptBytes int64
	// OrdinaryWhileRecording is Graph calls run on the ordinary path
	// because their key had no Definition yet and the pass does not wait
	// for recordings (PassConfig.OrdinaryWhileRecording).
	OrdinaryWhileRecording int
	// KeysMet is the keys this pass's calls were the rank's first to
	// name; Rerecorded the keys met again after the residency budget
	// evicted them (each recorded again).
	KeysMet, Rerecorded int
	// Barriers is the dummy tasks those calls added, two a call, to order
	// their bodies as their Graphs would (ordered.go): device tasks no
	// Graph form has, which the golden check discounts.
	Barriers int
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
	// Detached: no pass waits for the outcome (the asking pass ran the
	// call on the ordinary path, PassConfig.OrdinaryWhileRecording); the
	// Replay hands it to the Host as soon as it arrives.
	Detached bool
	// MaxEdges bounds the Definition's dependency edges (the
	// orchestration's, 0: DefaultMaxEdges).
	MaxEdges int64
	// Identity is the hash of the orchestration identity (full_key's first
	// part): a Graph called inside the body gets its full_key under it.
	Identity uint64
}

// Outcome is the pipeline's answer to a RecordRequest, as it reaches the
// rank's replay: the Definition, built and made a device object, or why not.
type Outcome struct {
	Pass     uint64
	StoreKey uint64
	Verify   bool
	Detached bool // the request's: no pass waits for it
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
	// Fetch is what asking the cluster did for this request.
	Fetch PeerFetch
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
	// KeepBytes and KeepDefinitions are the residency budget: a bound on
	// the bytes of the Definitions a rank keeps (their device images) and
	// on how many (0: no bound). Past it, the least recently used are
	// evicted at the end of a pass (Host.End), as a server's graph cache
	// (PyTorch's 64 shapes, llama.cpp CANN's LRU of 12) drops what it has
	// not replayed lately; an evicted key records again when met.
	KeepBytes       int64
	KeepDefinitions int
	// OrdinaryWhileRecording is the choice for a call whose key has no
	// Definition yet: false, it is a shell and its pass waits for the
	// recording (record_wait) before it ships; true, it runs on the
	// ordinary path while a recorder records the key beside the passes,
	// and a later pass replays it once it has arrived (the recording off
	// the critical path). Without retention (NoRetain) every pass waits.
	OrdinaryWhileRecording bool
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
	// Store is what the store on disk loaded for the pass, and rejected;
	// Fetch what asking the cluster did for it (reruns included).
	Store StoreLoad
	Fetch PeerFetch
	// UploadedBytes is the Definition bytes uploaded for this pass.
	UploadedBytes int64
	// Err is why the pass failed, once it has.
	Err error
	// StoreKeys lists, without retention, the pass's own store keys, which
	// the store drops once the pass is over.
	StoreKeys []uint64
	// Evicted lists the store keys the residency budget evicted at the
	// end of this pass's host_orch (PassConfig.KeepBytes): the store drops
	// them too, so the next call of one records it again.
	Evicted []uint64
	// Freed is the content hashes of the evicted Definitions that no kept
	// key shares: the device objects to free once every earlier pass has
	// shipped (and the uploader to forget, so a key recorded again is
	// uploaded again).
	Freed []uint64

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
	// repaired: the pass was given back once for a Definition the device
	// refused (Replay.Refused).
	repaired bool
	// awaited is the sum of pending's counts.
	awaited int
	// usedSet and byHash index used once it outgrows usedScan.
	usedSet map[*Published]struct{}
	byHash  map[uint64]*Published
	// graphNodes sums the nodes of the Definitions of the pass's
	// GraphSubmissions (the device tasks they expand into).
	graphNodes int
	// byTemplate counts the Graph calls replayed by their template
	// (Host.replayLocs), no boundary materialized.
	byTemplate int
	// atDevice counts this pass's device requests not yet answered.
	atDevice int
	replied  bool
	// walked counts the entries of per-pass collections that the pass's
	// steps visit (TestWarmWorkPerCall): a step that walks them per Graph
	// call makes the pass quadratic in its keys.
	walked int
}

// Shipping says whether the pass's run image has been sent to the device.
func (p *Pass) Shipping() bool { return p.step >= stepShipped }

func (p *Pass) warn(format string, a ...any) {
	const maxWarnings = 64
	if len(p.Warnings) < maxWarnings {
		p.Warnings = append(p.Warnings, fmt.Sprintf(format, a...))
	}
}

// usedScan is how many Definitions a pass finds by scanning p.used before
// it indexes them: a handful (DSv4 replays 8) is found faster by a scan
// than through a map, and costs no allocation; past it, an index keeps a
// pass of many distinct keys linear in its Graph calls. The Host marks the
// Definitions its replays use on their keys (keyState.usedPass), so use is
// the Replay's, for the shells of keys recorded in the pass; a Published is
// one key's, so the two never add the same one.
const usedScan = 16

func (p *Pass) use(d *Published) {
	if p.usedSet == nil {
		for _, u := range p.used {
			p.walked++
			if u == d {
				return
			}
		}
		p.used = append(p.used, d)
		if len(p.used) > usedScan {
			p.usedSet = make(map[*Published]struct{}, 2*len(p.used))
			for _, u := range p.used {
				p.usedSet[u] = struct{}{}
			}
		}
		return
	}
	if _, ok := p.usedSet[d]; !ok {
		p.usedSet[d] = struct{}{}
		p.used = append(p.used, d)
	}
}

// def finds a used Definition by its hash: by a scan while they are few,
// else through an index built at the first call (once per pass).
func (p *Pass) def(hash uint64) *Published {
	if len(p.used) <= usedScan {
		for _, d := range p.used {
			p.walked++
			if d.Hash == hash {
				return d
			}
		}
		return nil
	}
	if p.byHash == nil {
		p.byHash = make(map[uint64]*Published, len(p.used))
		for _, u := range p.used {
			if _, ok := p.byHash[u.Hash]; !ok { // the first with a hash, as a scan finds it
				p.byHash[u.Hash] = u
			}
		}
	}
	return p.byHash[hash]
}

// ByTemplate is the number of the pass's Graph calls replayed by their
// call site's BoundaryTemplate.
func (p *Pass) ByTemplate() int { return p.byTemplate }

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
