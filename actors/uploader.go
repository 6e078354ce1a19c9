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
// uploads nothing. Requests may overlap (a Definition is uploaded as soon as
// it is built, while the pass still records others); they are answered in
// the order they came, each once every Definition it names is on the device.
// It waits for the device's answers by message; the device answers in order.
type uploader struct {
	rank     int
	device   *actor.PID
	tracer   *trace.Tracer
	uploaded map[uint64]uint64 // content hash -> device object
	sent     []sentUpload      // uploads the device has not answered yet, in order
	reqs     []*uploadReq      // requests not answered yet, in order
	ctx      actor.Context
}

type sentUpload struct {
	def  *mailbox.Definition
	span trace.UploadSpan
	req  *uploadReq // the request that sent it (its bytes count there)
}

type uploadReq struct {
	m       *mailbox.UploadRequest
	pending int // its own uploads not yet answered
	done    mailbox.UploadDone
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
	r := &uploadReq{m: m}
	u.reqs = append(u.reqs, r)
	for _, d := range m.Defs {
		if _, ok := u.uploaded[d.Hash]; ok || u.inFlight(d.Hash) {
			// On the device, or on its way there for an earlier request,
			// which is answered first.
			continue
		}
		_, span := u.tracer.StartUpload(m.Trace.Context(context.Background()), trace.UploadInfo{
			Key: d.Def.Key, FullKey: d.Def.FullKey, Bytes: int64(len(d.Image)), Actor: fmt.Sprintf("uploader-%d", u.rank),
		})
		u.sent = append(u.sent, sentUpload{def: d, span: span, req: r})
		r.pending++
		// The device actor owns the queue: uploads are executed in order.
		sendDevice(u.ctx, u.device, &deviceUpload{image: d.Image})
	}
	u.answer()
}

func (u *uploader) inFlight(hash uint64) bool {
	for _, s := range u.sent {
		if s.def.Hash == hash {
			return true
		}
	}
	return false
}

func (u *uploader) replied(m *deviceReply) {
	s := u.sent[0]
	u.sent = u.sent[1:]
	s.span.Finish(m.object, m.err)
	r := s.req
	r.pending--
	switch {
	case m.err != nil && r.done.Err == nil:
		r.done.Err = fmt.Errorf("uploading Definition %q: %w", s.def.Def.Key, m.err)
	case m.err == nil:
		u.uploaded[s.def.Hash] = m.object
		r.done.Uploaded++
		r.done.Bytes += int64(len(s.def.Image))
	}
	u.answer()
}

// answer replies to the requests at the front whose uploads are all done.
func (u *uploader) answer() {
	for len(u.reqs) > 0 && u.reqs[0].pending == 0 {
		r := u.reqs[0]
		u.reqs = u.reqs[1:]
		done := r.done
		u.ctx.Send(r.m.ReplyTo, &done)
	}
}
