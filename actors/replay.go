package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// replayActor is one rank's Replay (stages.Replay): it takes each pass at
// the end of its host_orch, finalizes its shells as their Definitions arrive
// from the uploader, ships its run image (arena_h2d) and launches it, and
// answers the caller. The submission meanwhile orchestrates the next pass.
type replayActor struct {
	rt         *Runtime
	rank       int
	device     *actor.PID
	submission *actor.PID
	rp         *stages.Replay
	axis       stages.DeviceAxis
	runs       map[uint64]*passRun // by stages.Pass.ID, until the device owes them nothing
	free       [][]byte            // run image buffers the device has read
	// last is the run image last shipped (its bytes are what the device
	// holds, once it has read them) and lastTag its name: the next pass
	// sends only the ranges that differ from it. lastRead is whether the
	// device has read it (then it goes to free when it is replaced).
	last     []byte
	lastTag  uint64
	lastRead bool
	// frees is the evictions waiting for their passes to ship (freeAfter).
	frees []*freeAfter
}

func (r *replayActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.rp = stages.NewReplay()
		r.runs = map[uint64]*passRun{}
	case *replayWire:
		r.submission = m.submission
	case *handoff:
		r.runs[m.run.pass.ID] = m.run
		if m.run.pass.Awaiting() {
			m.run.handoffNs = trace.Now()
		}
		r.rp.Handoff(m.run.pass)
	case *mailbox.DefinitionUploaded:
		if run := r.runs[m.Outcome.Pass]; run != nil && run.handoffNs != 0 {
			run.lastDefNs = trace.Now()
		}
		r.rp.Defined(m.Outcome)
	case *mailbox.RunCopied:
		r.deviceReplied(ctx, m.Err, nil, m.Bytes, m.StartNs, m.Ns, 0)
	case *mailbox.Launched:
		r.deviceReplied(ctx, m.Err, m.Result, 0, m.StartNs, m.Ns, m.Stats.DefinitionBytes)
	case *cancelPass:
		for id, run := range r.runs {
			if run.req.id == m.id && !run.pass.Done() {
				r.rp.Cancel(id, m.err)
			}
		}
	case *freeAfter:
		r.frees = append(r.frees, m)
	}
	r.act(ctx)
	r.sendFrees(ctx)
}

// sendFrees sends the device the frees whose passes, and every earlier one,
// have shipped or are over: the device serves a rank's messages in order,
// so no launch after the free replays what it frees.
func (r *replayActor) sendFrees(ctx actor.Context) {
	for len(r.frees) > 0 {
		f := r.frees[0]
		for _, run := range r.runs {
			if run.pass.ID <= f.pass && !run.shipped {
				return
			}
		}
		sendDevice(ctx, r.device, &mailbox.FreeDefinitions{Hashes: f.hashes})
		r.frees[0] = nil
		r.frees = r.frees[1:]
	}
}

// replayWire tells a rank's replay its submission (spawned after it).
type replayWire struct{ submission *actor.PID }

// deviceReplied takes the device's next answer, a copy's or a launch's
// (the device answers in order): its error, the launch's result, when
// the phase began and how long it took, and the bytes of the Definition
// objects the device held then.
func (r *replayActor) deviceReplied(ctx actor.Context, err error, result *npu.Result, sent int, startNs, ns, defBytes int64) {
	r.refused(ctx, err)
	p, launched, over := r.rp.DeviceReplied(err)
	run := r.runs[p.ID]
	if !p.AtDevice() {
		r.release(run)
		if over {
			delete(r.runs, p.ID)
		}
	}
	if over {
		return
	}
	res := run.res
	if !launched {
		res.Pass.RunImageSentBytes = int64(sent)
		run.clock.Copied(ns)
		res.Pass.Set(trace.PhaseArenaH2D, run.clock.ArenaH2D)
		return
	}
	res.DeviceStartNs = startNs
	res.Pass.DeviceDefinitionBytes = defBytes
	if err == nil {
		res.Pass.DeviceIdleNs = r.axis.Place(run.clock.Begin, run.clock.Ready(), result.SimNs)
		run.placed = true
		res.Pass.Set(trace.PhaseDeviceWall, result.SimNs)
		res.Pass.SimulationNs = ns
		res.Device = result
	}
}

// refused repairs what a launch refused for one Definition's image (one
// from the store on disk or the cluster that the device cannot read): the
// store forgets it, moves its entry aside and counts it, every rank forgets
// the key, so its next call records it again (stages.Store.Refused), and
// the refused pass is rerun (stages.Replay.Refused).
func (r *replayActor) refused(ctx actor.Context, err error) {
	var de *npu.DefinitionError
	if err == nil || !errors.As(err, &de) {
		return
	}
	// The pass is rerun rather than failed (once): its call of the key asks
	// the store again, which records it.
	r.rp.Refused(de.Hash)
	ctx.Send(r.rt.store, &definitionRefused{key: de.FullKey, hash: de.Hash, err: err})
	forget := []stages.Learned{{StoreKey: de.FullKey, Forget: true}}
	r.rt.mu.Lock()
	defer r.rt.mu.Unlock()
	for _, sub := range r.rt.ranks {
		ctx.Send(sub, &learned{ls: forget})
	}
}

// act does what the Replay asks.
func (r *replayActor) act(ctx actor.Context) {
	for _, a := range r.rp.Actions() {
		if a.Kind == stages.ActLearn {
			// A detached outcome's learning names no pass.
			ctx.Send(r.submission, &learned{ls: a.Learned})
			continue
		}
		run := r.runs[a.Pass.ID]
		switch a.Kind {
		case stages.ActRerun:
			delete(r.runs, a.Pass.ID)
			ctx.Send(r.submission, &rerun{run: run, ls: a.Learned})
		case stages.ActShip:
			r.ship(ctx, run)
		case stages.ActReply:
			r.reply(ctx, run)
		}
	}
}

// ship encodes the run image, closes graph_upload and sends the image's
// one copy and the launch together: the device serves them in order, with
// no round trip between. The encoding is host work the pass cannot ship
// without, so it is in graph_upload and the control plane.
func (r *replayActor) ship(ctx actor.Context, run *passRun) {
	img := run.pass.Image
	if r.rt.imageHook != nil {
		r.rt.imageHook(img)
	}
	var buf []byte
	if n := len(r.free); n > 0 {
		buf, r.free = r.free[n-1], r.free[:n-1]
	}
	run.image = stages.AppendRunImage(buf, img)
	cp := &mailbox.CopyRun{Bytes: run.image, Base: r.lastTag}
	if changed, ok := stages.DiffRunImage(nil, r.last, run.image); ok && r.last != nil {
		cp.Changed = changed
	} else {
		cp.Base = 0
	}
	if r.last != nil && r.lastRead {
		r.free = append(r.free, r.last[:0])
	}
	r.lastTag++
	r.last, r.lastRead, cp.Tag = run.image, false, r.lastTag
	run.res.Pass.RunImageBytes = int64(len(run.image))
	run.shipped = true
	if run.lastDefNs > run.handoffNs && run.handoffNs != 0 {
		run.res.Pass.RecordWaitNs += run.lastDefNs - run.handoffNs
	}
	run.closeUpload(true)
	ph := mailbox.DevicePhase{Tracer: r.rt.tracer, Run: run.req.run, Rank: r.rank, Round: run.req.round}
	cp.Phase = ph
	sendDevice(ctx, r.device, cp)
	if !r.rt.cfg.SkipDevice {
		sendDevice(ctx, r.device, &mailbox.Launch{Timeline: r.rt.cfg.Timeline, Phase: ph})
	}
}

// release takes back a run image the device has read: its buffer is
// reused for a later image, unless it is the last shipped, which the next
// image is compared with.
func (r *replayActor) release(run *passRun) {
	if len(run.image) > 0 && len(r.last) > 0 && &run.image[0] == &r.last[0] {
		r.lastRead = true
	} else {
		r.free = append(r.free, run.image[:0])
	}
	run.image = nil
}

// reply answers the caller and frees the pass's slot on the rank.
func (r *replayActor) reply(ctx actor.Context, run *passRun) {
	p := run.pass
	if run.clock.Uploading() {
		run.closeUpload(false) // a pass that failed before shipping
	}
	res := run.res
	res.Counts = p.Counts
	res.Warnings = p.Warnings
	res.Defects = p.Defects
	res.KernelTasks = p.KernelTasks
	res.Err = p.Err
	res.Pass.RecordedNodes = p.RecordedNodes
	res.Pass.BuiltDefinitions = p.BuiltDefinitions
	res.Pass.UploadedDefinitionBytes = p.UploadedBytes
	run.ops.Add(trace.OpRecordNode, int64(p.RecordNodeOps), p.RecordNs)
	run.ops.Add(trace.OpBuildDefinition, int64(p.BuiltDefinitions), p.BuildNs)
	run.ops.Add(trace.OpStoreLoad, int64(p.Store.Loaded-p.Store.Preloaded), p.Store.Ns)
	res.Pass.LoadedDefinitions, res.Pass.LoadedBytes, res.Pass.StoreRejected = p.Store.Loaded, p.Store.Bytes, len(p.Store.Rejected)
	replyFetch(run, res)
	res.Pass.Ops = run.ops
	if !p.AtDevice() {
		delete(r.runs, p.ID)
	}
	if run.placed {
		r.axis.Answered(trace.Now())
	}
	// The slot first, so a caller that has its answer finds the rank's
	// messages for this pass all posted.
	ctx.Send(r.submission, &passDone{run: run})
	run.req.reply <- res
}
