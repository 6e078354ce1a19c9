package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/trace"
)

// uploader makes Definitions device objects on one rank's device, each at
// most once: it alone knows what the device holds, across passes. It takes
// the store's answers for this rank as they come (during or after the host_orch
// that asked), uploads what the device lacks, and passes each answer on to
// the rank's replay once its Definition is a device object. It waits for the
// device by message; the device answers in order.
type uploader struct {
	rank     int
	device   *actor.PID
	replay   *actor.PID
	tracer   *trace.Tracer
	noRetain bool
	disk     *diskstore.Store  // unpins what it loaded once uploaded
	uploaded map[uint64]uint64 // content hash -> device object
	sent     []sentUpload      // uploads the device has not answered yet, in order
	name     string            // its actor name, for the upload spans
}

type sentUpload struct {
	def  *mailbox.Definition
	span trace.UploadSpan
	// waiting is the answers to pass on once it is on the device; the
	// first one's pass paid for the upload.
	waiting []mailbox.DefinitionUploaded
}

func (u *uploader) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *mailbox.DefinitionReady:
		u.ready(ctx, m)
	case *mailbox.Uploaded:
		u.replied(ctx, m)
	case *forgetUploads:
		for _, h := range m.hashes {
			delete(u.uploaded, h)
		}
	}
}

func (u *uploader) ready(ctx actor.Context, m *mailbox.DefinitionReady) {
	up := mailbox.DefinitionUploaded{Outcome: m.Outcome}
	if m.Verify || m.Err != nil || m.Def == nil {
		ctx.Send(u.replay, &up)
		return
	}
	d := m.Def
	if _, ok := u.uploaded[d.Hash]; ok && !u.noRetain {
		ctx.Send(u.replay, &up)
		return
	}
	for i := range u.sent {
		if u.sent[i].def.Hash == d.Hash {
			// On its way to the device for another request.
			u.sent[i].waiting = append(u.sent[i].waiting, up)
			return
		}
	}
	_, span := u.tracer.StartUpload(m.Trace.Context(context.Background()), trace.UploadInfo{
		Key: d.Def.Key, FullKey: d.Def.FullKey, Bytes: int64(len(d.Image)), Actor: u.name,
	})
	u.sent = append(u.sent, sentUpload{def: d, span: span, waiting: []mailbox.DefinitionUploaded{up}})
	// The device actor owns the queue: uploads are executed in order.
	sendDevice(ctx, u.device, &mailbox.Upload{Bytes: d.Image})
}

func (u *uploader) replied(ctx actor.Context, m *mailbox.Uploaded) {
	s := u.sent[0]
	u.sent[0] = sentUpload{}
	u.sent = u.sent[1:]
	s.span.Finish(uint64(m.Object), m.Err)
	if m.Err == nil {
		if u.uploaded == nil {
			u.uploaded = map[uint64]uint64{}
		}
		u.uploaded[s.def.Hash] = uint64(m.Object)
	}
	for i, up := range s.waiting {
		o := &up.Outcome
		if o.Store.Loaded > o.Store.Preloaded && u.disk != nil {
			// Loaded from disk for this pass and now uploaded (or
			// failed): eviction may take it again. (A preload unpinned
			// what it loaded already.)
			u.disk.Unpin(s.def.Def.FullKey)
		}
		if i == 0 && m.Err == nil {
			o.UploadedBytes = int64(len(s.def.Image))
		}
		if m.Err != nil {
			o.UploadErr = fmt.Errorf("uploading Definition %q: %w", s.def.Def.Key, m.Err)
		}
		ctx.Send(u.replay, &up)
	}
}
