package mailbox

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// RecordJob asks for one Graph body to be recorded. The submission sends it
// to the Definition store, which hands it to a free recorder; its slices are
// the job's own (snapshotted from the call), never shared with the caller.
// Its answer goes down the pipeline, never back to the submission:
// store -> ReplyTo (the rank's uploader) -> the rank's replay.
type RecordJob struct {
	stages.RecordRequest
	// Model is the orchestration identity, for the store on disk's index.
	Model string
	// ReplyTo is the rank's uploader, which takes DefinitionReady.
	ReplyTo *actor.PID
	// Trace is the host_orch span of the pass that asked.
	Trace trace.Carrier
}

// Request gives the store stage the job's record request
// (stages.StoreJob).
func (j *RecordJob) Request() *stages.RecordRequest { return &j.RecordRequest }

// Built is a recorder's result, sent to the store: the recorded Definition
// imaged (the recorder builds what it recorded, from its own buffers), or
// why there is none. It also gives the recorder back to the store for the
// next job.
type Built struct {
	Recorder *actor.PID
	Job      *RecordJob
	// Recording is the result itself, as the store stage takes it: the
	// Definition, its image and hash (nil when Err is set), the defects,
	// nodes, the failure (an unsupported construct, or a panic or Goexit:
	// Panicked set, either way with the key and the cause), and the
	// recorder's record_node and build_definition times.
	stages.Recording
}

// Definition is a published Definition as the store keeps it: immutable once
// published, shared by every rank that replays it.
type Definition = stages.Published

// DefinitionReady answers a RecordJob, from the store to the rank's
// uploader: the Definition, or why there is none (stages.Outcome, as the
// store stage answers it; the uploader fills its upload).
type DefinitionReady struct {
	stages.Outcome
	// Trace is the asking pass's host_orch span: the upload is its child.
	Trace trace.Carrier
}

// PeerFetch is what asking the cluster did for one request.
type PeerFetch = stages.PeerFetch

// DefinitionUploaded is a DefinitionReady once the rank's uploader has made
// its Definition a device object (or knew it was one), from the uploader to
// the rank's replay.
type DefinitionUploaded struct {
	stages.Outcome
}
