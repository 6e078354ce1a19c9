package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// Device is the actor that owns one rank's simulated a2a3 die. It is thin:
// each message is one call on npu.Die, served in mailbox order, and
// answered with its result or its error. A refused request (a bad image, an
// unknown Definition, a boundary mismatch, a cycle...) is answered with the
// error and changes nothing, so the next request is served normally. A
// panic inside a request is answered as an error too (and drops the cached
// launch plan) rather than restarting the actor, which would lose every
// uploaded Definition.
type Device struct {
	dev *npu.Die
}

// NewDevice returns a device actor over a fresh npu.Die.
func NewDevice(cfg npu.Config) *Device { return &Device{dev: npu.New(cfg)} }

// DeviceProps builds the props of a device actor.
func DeviceProps(cfg npu.Config, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return NewDevice(cfg) }, opts...)
}

// newDeviceProps is the runtime's device actor for one rank, with an
// instrumented unbounded mailbox (its senders never block). A device that
// simulates runs on a worker of its own, so that a launch overlaps the
// host's next pass. A skipped device (Config.SkipDevice) only registers,
// uploads and copies, each the short tail of its sender's turn, so it runs
// on its sender's goroutine (as the replay does): waking a worker for a
// 50 KB copy cost more than the copy, and the wake-ups of the other core
// slowed the host's next host_orch.
func newDeviceProps(rt *Runtime, rank int) *actor.Props {
	cfg := rt.cfg.Device
	name := fmt.Sprintf("device-%d", rank)
	producer := func() actor.Actor { return NewDevice(cfg) }
	if rt.cfg.SkipDevice {
		return rt.inlineProps(name, producer)
	}
	return rt.props(name, 0, producer)
}

// noTracer spans requests that name no pass.
var noTracer = trace.NewTracer(nil)

// startPhase starts a copy's or a launch's phase span: the device spans
// arena_h2d and device_wall itself, so a phase covers its own work and not
// the wait behind the previous pass's launch in the device's queue.
func startPhase(d mailbox.DevicePhase, ph trace.Phase) trace.PhaseSpan {
	if d.Tracer == nil {
		d.Tracer = noTracer
	}
	_, span := d.Tracer.StartPhase(d.Run.Context(context.Background()), ph, d.Rank, d.Round)
	return span
}

// sendDevice sends a request of mailbox's device protocol to the device
// actor; the answer comes back to the sender as a message, in order.
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
		ph := startPhase(m.Phase, trace.PhaseArenaH2D)
		var sent int
		err := a.safe(func() (err error) { sent, err = a.dev.PatchRun(m.Bytes, m.Tag, m.Base, m.Changed); return err })
		ph.SetBytes(sent)
		ph.Fail(err)
		reply(ctx, m.ReplyTo, &mailbox.RunCopied{Bytes: sent, Err: err, StartNs: ph.StartNs(), Ns: ph.Finish()})
	case *mailbox.Launch:
		ph := startPhase(m.Phase, trace.PhaseDeviceWall)
		var res *npu.Result
		err := a.safe(func() (err error) { res, err = a.launch(m.Timeline); return err })
		r := &mailbox.Launched{Result: res, Stats: a.dev.Stats(), Err: err, StartNs: ph.StartNs()}
		if err != nil {
			ph.Fail(err)
			r.Ns = ph.Finish()
		} else {
			_, r.Ns = ph.FinishDevice(res.SimNs)
		}
		reply(ctx, m.ReplyTo, r)
	case *mailbox.FreeDefinitions:
		a.safe(func() error {
			for _, h := range m.Hashes {
				a.dev.Free(h)
			}
			return nil
		})
	case *mailbox.ResetDevice:
		a.safe(func() error { a.dev.Reset(); return nil })
		reply(ctx, m.ReplyTo, &mailbox.DeviceReset{})
	case *mailbox.DeviceStats:
		reply(ctx, m.ReplyTo, a.dev.Stats())
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
			err = fmt.Errorf("device: request panicked: %w", panicError(r))
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
