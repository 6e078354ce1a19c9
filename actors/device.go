package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// Device is the actor that owns one rank's simulated a2a3 die. It is thin:
// each message is one call on npu.Device, served in mailbox order, and
// answered with its result or its error. A refused request (a bad image, an
// unknown Definition, a boundary mismatch, a cycle...) is answered with the
// error and changes nothing, so the next request is served normally. A
// panic inside a request is answered as an error too (and drops the cached
// launch plan) rather than restarting the actor, which would lose every
// uploaded Definition.
type Device struct {
	dev *npu.Device
}

// NewDevice returns a device actor over a fresh npu.Device.
func NewDevice(cfg npu.Config) *Device { return &Device{dev: npu.New(cfg)} }

// DeviceProps builds the props of a device actor.
func DeviceProps(cfg npu.Config, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return NewDevice(cfg) }, opts...)
}

// newDeviceProps is the runtime's device actor for one rank, with an
// instrumented unbounded mailbox (its senders never block).
func newDeviceProps(rt *Runtime, rank int) *actor.Props {
	cfg := rt.cfg.Device
	return rt.Mailboxes.Props(fmt.Sprintf("device-%d", rank), 0, func() actor.Actor { return NewDevice(cfg) })
}

// The runtime's own device protocol (submission and uploader actors): sent
// with sendDevice as requests, answered with *deviceReply in order.
// deviceRegister is one-way (no reply), so it never interleaves with the
// replies a pass waits for.
type (
	deviceRegister struct {
		roots   []stages.Root
		kernels []stages.Kernel
	}
	deviceUpload struct{ image []byte }
	deviceCopy   struct{ image []byte }
	deviceLaunch struct{ timeline bool }
	deviceReply  struct {
		object uint64
		result *npu.Result
		err    error
	}
)

// sendDevice sends a request to the device actor; the answer comes back to
// the sender as a message.
func sendDevice(ctx actor.SenderContext, device *actor.PID, msg any) {
	ctx.Request(device, msg)
}

// Receive serves one request.
func (a *Device) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *mailbox.RegisterDevice:
		a.safe(func() error { a.register(m.Entry, m.Kernels); return nil })
		reply(ctx, m.ReplyTo, &mailbox.DeviceRegistered{})
	case *mailbox.Upload:
		var id npu.ObjectID
		err := a.safe(func() (err error) { id, err = a.dev.Upload(m.Bytes); return err })
		reply(ctx, m.ReplyTo, &mailbox.Uploaded{Object: id, Hash: stages.DefinitionHash(m.Bytes), Err: err})
	case *mailbox.CopyRun:
		err := a.safe(func() error { return a.dev.CopyRun(m.Bytes) })
		reply(ctx, m.ReplyTo, &mailbox.RunCopied{Bytes: len(m.Bytes), Err: err})
	case *mailbox.Launch:
		var res *npu.Result
		err := a.safe(func() (err error) { res, err = a.launch(m.Timeline); return err })
		reply(ctx, m.ReplyTo, &mailbox.Launched{Result: res, Stats: a.dev.Stats(), Err: err})
	case *mailbox.ResetDevice:
		a.safe(func() error { a.dev.Reset(); return nil })
		reply(ctx, m.ReplyTo, &mailbox.DeviceReset{})
	case *mailbox.DeviceStats:
		reply(ctx, m.ReplyTo, a.dev.Stats())

	case *deviceRegister:
		a.safe(func() error { a.register(m.roots, m.kernels); return nil })
	case *deviceUpload:
		var id npu.ObjectID
		err := a.safe(func() (err error) { id, err = a.dev.Upload(m.image); return err })
		reply(ctx, nil, &deviceReply{object: uint64(id), err: err})
	case *deviceCopy:
		err := a.safe(func() error { return a.dev.CopyRun(m.image) })
		reply(ctx, nil, &deviceReply{err: err})
	case *deviceLaunch:
		var res *npu.Result
		err := a.safe(func() (err error) { res, err = a.launch(m.timeline); return err })
		reply(ctx, nil, &deviceReply{result: res, err: err})
	}
}

func (a *Device) register(entry []stages.Root, kernels []stages.Kernel) {
	a.dev.RegisterEntry(entry)
	a.dev.RegisterKernels(kernels)
}

func (a *Device) launch(timeline bool) (*npu.Result, error) {
	a.dev.SetTimeline(timeline)
	return a.dev.Launch()
}

// safe runs one request, turning a panic into an error answer.
func (a *Device) safe(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("device: request panicked: %v", r)
		}
	}()
	return f()
}

// reply answers to ReplyTo when set, else to the request's sender (if any:
// a one-way send gets no answer).
func reply(ctx actor.Context, to *actor.PID, msg any) {
	switch {
	case to != nil:
		ctx.Send(to, msg)
	case ctx.Sender() != nil:
		ctx.Respond(msg)
	}
}
