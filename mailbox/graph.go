package mailbox

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// RecordJob asks for one Graph body to be recorded. The submission sends it
// to the Definition store, which hands it to a free recorder; its slices are
// the job's own (snapshotted from the call), never shared with the caller.
type RecordJob struct {
	// StoreKey is the store's key: full_key, salted per pass when
	// Definitions are not retained.
	StoreKey uint64
	FullKey  uint64
	Key      string
	Boundary []stages.Arg
	Roots    []stages.BoundaryRoot
	Scalars  []uint64
	ExtDeps  []stages.TaskID // the call's external dependencies
	Body     func(stages.Orchestrator, *stages.Boundary)
	// Verify re-records a later call of a key already recorded: the store
	// compares the two Definitions to catch what the first one baked in.
	Verify bool
	// ReplyTo is the submission that waits for DefinitionReady.
	ReplyTo *actor.PID
	Trace   trace.Carrier
}

// Recorded is a recorder's result, sent to the Definition builder.
type Recorded struct {
	Job     *RecordJob
	Def     *stages.Definition
	Defects []stages.Defect
	Nodes   int
	// Err is a recording failure: an unsupported construct, or a panic
	// (Panicked set), either way with the key and the cause.
	Err      error
	Panicked bool
	// RecordNs is the recorder's record_node time for this job.
	RecordNs int64
	// Trace is the recording's span: the build is its child.
	Trace trace.Carrier
}

// Built is a Definition with its flat image, from the builder to the store.
type Built struct {
	Recorded *Recorded
	Image    []byte
	Hash     uint64
	BuildNs  int64
}

// RecorderIdle tells the store a recorder can take the next job.
type RecorderIdle struct {
	Recorder *actor.PID
}

// Definition is a published Definition as the store keeps it: immutable once
// published, shared by every submission that replays it.
type Definition struct {
	Def     *stages.Definition
	Image   []byte
	Hash    uint64
	Written []int32 // boundary slots the body writes
}

// DefinitionReady answers a RecordJob: the Definition, or why there is none.
type DefinitionReady struct {
	StoreKey uint64
	Def      *Definition
	Err      error
	Panicked bool
	Defects  []stages.Defect
	Verify   bool
	// Recorded says this job's own recording made the Definition (false
	// when the store already had it, or another request recorded it).
	Recorded      bool
	RecordedNodes int
	RecordNs      int64
	BuildNs       int64
}

// UploadRequest asks a rank's uploader to make every Definition in Defs a
// device object; each is uploaded at most once per device.
type UploadRequest struct {
	Defs []*Definition
	// Fresh forgets earlier uploads first (no retention across runs).
	Fresh   bool
	ReplyTo *actor.PID
	Trace   trace.Carrier
}

// UploadDone answers an UploadRequest.
type UploadDone struct {
	Uploaded int
	Bytes    int64
	Err      error
}
