package mailbox

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// The device actor's protocol. A device actor owns one rank's npu.Die
// (the a2a3 queue): every registration, upload, copy and launch is a message
// to it and they are served in mailbox order. Each request is answered (when
// it names a ReplyTo, or was sent as a request) with its result or its
// error; a refused request leaves the device as it was and the next request
// is served normally.
//
// Byte slices in requests are read when the request is served (that is the
// H2D copy); the sender must not modify them after sending.

// RegisterDevice registers the model with the device once: its entry roots
// (RootID i = Entry[i]; addresses and sizes only) and its kernel table.
// Answered with *DeviceRegistered when asked (ReplyTo, or a request); the
// runtime sends it one-way, so it never interleaves with the replies a pass
// waits for.
type RegisterDevice struct {
	Entry   []stages.Root
	Kernels []stages.Kernel
	ReplyTo *actor.PID
}

// DeviceRegistered answers RegisterDevice.
type DeviceRegistered struct{}

// Upload makes a Definition image a shared device object (decoded and
// verified on the device; the same content hash gives the same object).
// Answered with *Uploaded.
type Upload struct {
	Bytes   []byte
	ReplyTo *actor.PID
}

// FreeDefinitions frees one upload each of the Definition objects of these
// content hashes (npu.Die.Free): the rank's residency budget evicted them,
// and no pass the device has still to run replays them. One-way.
type FreeDefinitions struct {
	Hashes []uint64
}

// Uploaded answers Upload.
type Uploaded struct {
	Object npu.ObjectID
	Hash   uint64
	Err    error
}

// CopyRun copies a run image to the device (one H2D copy). ReplyTo is
// optional: the copy is checked when launched. Answered with *RunCopied.
type CopyRun struct {
	Bytes   []byte
	ReplyTo *actor.PID
	// Tag names this image (0: unnamed, copied whole). When the device's
	// resident image is the one named Base, only Changed is copied
	// (npu.Die.PatchRun): a warm pass sends only what changed.
	Tag, Base uint64
	Changed   []stages.ImageRange
	// Phase is the pass the copy belongs to: the device spans arena_h2d
	// itself, so the phase covers the copy and not the wait behind the
	// previous pass's launch in the device's queue.
	Phase DevicePhase
}

// RunCopied answers CopyRun: Bytes is what crossed (the changed ranges
// of a patch), StartNs when the copy began (trace.Now's clock) and Ns how
// long it took (arena_h2d).
type RunCopied struct {
	Bytes       int
	Err         error
	StartNs, Ns int64
}

// Launch runs the resident run image. Answered with *Launched.
type Launch struct {
	// Timeline asks for the per-core timeline in the result.
	Timeline bool
	ReplyTo  *actor.PID
	// Phase is the pass the launch belongs to (device_wall's span).
	Phase DevicePhase
}

// Launched answers Launch: StartNs is when device_wall began (trace.Now's
// clock) and Ns the simulation's real wall.
type Launched struct {
	Result      *npu.Result
	Stats       npu.Stats
	Err         error
	StartNs, Ns int64
}

// DevicePhase names the pass a copy or a launch belongs to, for its phase
// span; its zero value spans nothing.
type DevicePhase struct {
	Tracer      *trace.Tracer
	Run         trace.Carrier
	Rank, Round int
}

// ResetDevice drops every Definition object and the run image (entry roots
// and kernels stay registered). Answered with *DeviceReset.
type ResetDevice struct {
	ReplyTo *actor.PID
}

// DeviceReset answers ResetDevice.
type DeviceReset struct{}

// DeviceStats asks for the device's accounting. Answered with npu.Stats.
type DeviceStats struct {
	ReplyTo *actor.PID
}
