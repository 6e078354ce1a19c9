package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/trace"
)

// uploader makes Definitions device objects on one rank's device, each at
// most once: it remembers what the device holds across passes, so a warm pass
// uploads nothing. It waits for the device's answers by message.
type uploader struct {
	rank     int
	device   *actor.PID
	tracer   *trace.Tracer
	uploaded map[uint64]uint64 // content hash -> device object
	req      *mailbox.UploadRequest
	waiting  []pendingUpload
	done     mailbox.UploadDone
	ctx      actor.Context
}

type pendingUpload struct {
	def  *mailbox.Definition
	span trace.UploadSpan
}

func (u *uploader) Receive(ctx actor.Context) {
	u.ctx = ctx
	switch m := ctx.Message().(type) {
	case *mailbox.UploadRequest:
		u.start(m)
	case *deviceReply:
		u.replied(m)
	}
}

func (u *uploader) start(m *mailbox.UploadRequest) {
	if u.uploaded == nil || m.Fresh {
		u.uploaded = map[uint64]uint64{}
	}
	u.req, u.done = m, mailbox.UploadDone{}
	for _, d := range m.Defs {
		if _, ok := u.uploaded[d.Hash]; ok {
			continue
		}
		_, span := u.tracer.StartUpload(m.Trace.Context(context.Background()), trace.UploadInfo{
			Key: d.Def.Key, FullKey: d.Def.FullKey, Bytes: int64(len(d.Image)), Actor: fmt.Sprintf("uploader-%d", u.rank),
		})
		u.waiting = append(u.waiting, pendingUpload{def: d, span: span})
		// The device actor owns the queue: uploads are executed in order.
		sendDevice(u.ctx, u.device, &deviceUpload{image: d.Image})
	}
	u.maybeDone()
}

func (u *uploader) replied(m *deviceReply) {
	p := u.waiting[0]
	u.waiting = u.waiting[1:]
	p.span.Finish(m.object, m.err)
	if m.err != nil && u.done.Err == nil {
		u.done.Err = fmt.Errorf("uploading Definition %q: %w", p.def.Def.Key, m.err)
	} else if m.err == nil {
		u.uploaded[p.def.Hash] = m.object
		u.done.Uploaded++
		u.done.Bytes += int64(len(p.def.Image))
	}
	u.maybeDone()
}

func (u *uploader) maybeDone() {
	if len(u.waiting) > 0 || u.req == nil {
		return
	}
	done := u.done
	u.ctx.Send(u.req.ReplyTo, &done)
	u.req = nil
}
