package stages

import (
	"errors"
	"fmt"
	"slices"
)

// The Replay half of the pass state machine (pass.go): the replay actor's.

// ActionKind names what a Replay asks its actor to do.
type ActionKind uint8

const (
	// ActLearn: tell the Host what the pass learned (Action.Learned; Pass
	// is nil for a detached outcome, which no pass waited for).
	ActLearn ActionKind = iota + 1
	// ActShip: encode Pass.Image, copy it to the device and (unless
	// SkipDevice) launch it, in that order, at once.
	ActShip
	// ActRerun: give the pass back to the Host, which runs its
	// orchestration again with what it learned (Action.Learned).
	ActRerun
	// ActReply: the pass is over (Pass.Err says how): answer its caller.
	ActReply
)

var actionNames = [...]string{"", "learn", "ship", "rerun", "reply"}

func (k ActionKind) String() string { return actionNames[k] }

// Action is one thing to do.
type Action struct {
	Kind    ActionKind
	Pass    *Pass
	Learned []Learned
}

// Replay is one rank's replay side: the passes handed off and not yet
// answered, in order. It finalizes shells as their Definitions arrive, ships
// run images in pass order, and matches the device's in-order replies to
// their passes. It is owned by one actor.
type Replay struct {
	passes []*Pass
	// early holds outcomes that reached the Replay before their pass did
	// (a recording can finish while its pass is still in host_orch).
	early map[uint64][]Outcome
	// device lists, in order, the pass of each request at the device
	// (copy, then launch), including passes already answered by a cancel.
	device  []*Pass
	actions []Action
	// refused is the content hash of the Definition the device's next
	// reply refused a launch for (Refused), 0 when none.
	refused uint64
	// carry is detached outcomes' work that came when no pass was here:
	// the next pass handed off counts it.
	carry []Outcome
}

// NewReplay makes a rank's Replay.
func NewReplay() *Replay { return &Replay{early: map[uint64][]Outcome{}} }

// InFlight is the number of passes handed off and not yet answered.
func (r *Replay) InFlight() int { return len(r.passes) }

// Handoff takes a pass at the end of its host_orch.
func (r *Replay) Handoff(p *Pass) {
	r.passes = append(r.passes, p)
	for _, o := range r.carry {
		p.addWork(o)
	}
	r.carry = r.carry[:0]
	for id, os := range r.early {
		switch {
		case id == p.ID:
			for _, o := range os {
				r.apply(p, o)
			}
			delete(r.early, id)
		case id < p.ID:
			delete(r.early, id) // its pass was cancelled before handoff
		}
	}
	r.advance(p)
}

// Defined takes an outcome from the pipeline.
func (r *Replay) Defined(o Outcome) {
	if o.Detached {
		r.detached(o)
		return
	}
	p := r.find(o.Pass)
	if p == nil {
		if len(r.passes) == 0 || o.Pass > r.passes[len(r.passes)-1].ID {
			r.early[o.Pass] = append(r.early[o.Pass], o)
		}
		return // else its pass is over (cancelled): nothing waits for it
	}
	r.apply(p, o)
	r.advance(p)
}

func (r *Replay) find(id uint64) *Pass {
	for _, p := range r.passes {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// detached takes an outcome no pass waits for (RecordRequest.Detached):
// the Host learns it at once, so the next pass replays the key; its work
// is counted in the pass that asked, if that one has not answered, else in
// the latest pass here, else in the next handed off. A recording that
// failed, or found defects, leaves the key on the ordinary path (the
// Host's warning names why).
func (r *Replay) detached(o Outcome) {
	var l Learned
	switch {
	case o.Err != nil:
		l = Learned{StoreKey: o.StoreKey, Failed: o.Err}
	case len(o.Defects) > 0:
		errs := make([]error, len(o.Defects))
		for i, d := range o.Defects {
			errs[i] = d
		}
		l = Learned{StoreKey: o.StoreKey, Failed: errors.Join(errs...)}
	case o.UploadErr != nil:
		l = Learned{StoreKey: o.StoreKey, Forget: true}
	default:
		l = Learned{StoreKey: o.StoreKey, Def: o.Def}
	}
	r.actions = append(r.actions, Action{Kind: ActLearn, Learned: []Learned{l}})
	o.Defects = nil // the key's failure now, not the pass's
	p := r.find(o.Pass)
	if p == nil && len(r.passes) > 0 {
		p = r.passes[len(r.passes)-1]
	}
	if p == nil {
		r.carry = append(r.carry, o)
		return
	}
	p.addWork(o)
}

func (r *Replay) apply(p *Pass, o Outcome) {
	if p.pending[o.StoreKey] == 0 {
		panic(fmt.Sprintf("stages: pass %d got an outcome for key %016x it did not ask for", p.ID, o.StoreKey))
	}
	p.pending[o.StoreKey]--
	p.awaited--
	p.addWork(o)
	if o.Verify {
		p.Counts.Verified++
		return
	}
	switch {
	case o.Err == nil && o.UploadErr != nil:
		p.errs = append(p.errs, fmt.Errorf("graph_upload: %w", o.UploadErr))
		p.learned = append(p.learned, Learned{StoreKey: o.StoreKey, Forget: true})
	case o.Err == nil:
		p.defs[o.StoreKey] = o.Def
		p.learned = append(p.learned, Learned{StoreKey: o.StoreKey, Def: o.Def})
	case !errors.Is(o.Err, ErrUnsupported) || p.cfg.StrictRecording:
		// A panic, a body's own error, or strict: the pass fails.
		p.errs = append(p.errs, o.Err)
		p.learned = append(p.learned, Learned{StoreKey: o.StoreKey, Failed: o.Err})
	default:
		// Unsupported: the pass is rerun with this key on the ordinary
		// path (its shells are in the image, and a shell cannot be unwound).
		p.rerun = true
		p.learned = append(p.learned, Learned{StoreKey: o.StoreKey, Failed: o.Err})
	}
}

// addWork counts an outcome's work (recording, build, store, upload) and
// its defects in p.
func (p *Pass) addWork(o Outcome) {
	p.RecordNodeOps += o.RecordedNodes
	p.RecordNs += o.RecordNs
	if o.Recorded && o.Err == nil {
		p.RecordedNodes += o.RecordedNodes
		p.BuiltDefinitions++
		p.BuildNs += o.BuildNs
	}
	p.UploadedBytes += o.UploadedBytes
	p.Store.Add(o.Store)
	p.Fetch.Add(o.Fetch)
	for _, r := range o.Store.Rejected {
		p.warn("%s; recorded again", r)
	}
	for _, d := range o.Defects {
		if p.cfg.DefectsAsWarnings {
			p.warn("%v", d)
		} else {
			p.errs = append(p.errs, d)
		}
		p.Defects = append(p.Defects, d)
	}
}

func (p *Pass) awaiting() bool { return p.awaited > 0 }

// Awaiting reports whether the pass still waits for outcomes of
// recordings it asked for (record_wait, once its host_orch is over).
func (p *Pass) Awaiting() bool { return p.awaiting() }

// advance moves a waiting pass on once every outcome is in.
func (r *Replay) advance(p *Pass) {
	if p.step != stepWait || p.awaiting() {
		r.ship()
		return
	}
	learned := p.learned
	p.learned = nil
	switch {
	case p.rerun && len(p.errs) == 0:
		r.remove(p)
		p.step = stepDone
		r.actions = append(r.actions, Action{Kind: ActRerun, Pass: p, Learned: learned})
		r.ship()
		return
	case len(learned) > 0:
		r.actions = append(r.actions, Action{Kind: ActLearn, Pass: p, Learned: learned})
	}
	if len(p.errs) > 0 {
		r.finish(p, errors.Join(p.errs...))
		return
	}
	for _, sh := range p.shells {
		d := p.defs[sh.sk]
		if d == nil {
			panic("stages: shell of a key with neither a Definition nor a failure at commit")
		}
		p.Image.FinalizeGraph(sh.task, d.Hash, d.Def.HeapBytes)
		p.use(d)
		p.graphNodes += len(d.Def.Nodes)
	}
	p.count()
	p.step = stepReady
	r.ship()
}

// count derives the counts that need the pass's Definitions.
func (p *Pass) count() {
	c := &p.Counts
	c.Definitions = len(p.used)
	c.ExpectedDeviceTasks = c.OrdinaryTasks + p.graphNodes
	if p.cfg.CountKernels {
		p.KernelTasks = kernelTasks(p.Image, p.nkernels, p.def)
	}
}

// kernelTasks counts the device tasks of each kernel in a run image, Graph
// nodes included (a MIX task counts for its AIC kernel).
func kernelTasks(img *RunImage, nkernels int, def func(uint64) *Published) []int {
	counts := make([]int, nkernels)
	add := func(k Kind, ks [3]KernelID) {
		id := ks[0]
		if k == KindAIV {
			id = ks[1]
		}
		if id >= 0 && int(id) < nkernels {
			counts[id]++
		}
	}
	for _, t := range img.Tasks {
		if t.Kind == KindGraph {
			if d := def(img.Graphs[t.Graph].DefHash); d != nil {
				for _, n := range d.Def.Nodes {
					add(n.Kind, n.Kernel)
				}
			}
			continue
		}
		add(t.Kind, t.Kernel)
	}
	return counts
}

// ship sends ready passes to the device in pass order: a pass never
// overtakes an earlier one still waiting for its Definitions.
func (r *Replay) ship() {
	for _, p := range r.passes {
		if p.step >= stepShipped {
			continue
		}
		if p.step != stepReady {
			return
		}
		p.step = stepShipped
		p.atDevice = 2
		if p.cfg.SkipDevice {
			p.atDevice = 1
		}
		for i := 0; i < p.atDevice; i++ {
			r.device = append(r.device, p)
		}
		r.actions = append(r.actions, Action{Kind: ActShip, Pass: p})
	}
}

// DeviceReplied takes the device's next reply (to a copy or a launch, in the
// order they were shipped) and says whose it was, whether it answered the
// launch, and whether the pass was already over (a cancelled pass's replies
// are absorbed).
func (r *Replay) DeviceReplied(err error) (p *Pass, launched, over bool) {
	if len(r.device) == 0 {
		panic("stages: a device reply with no request outstanding")
	}
	p = r.device[0]
	r.device[0] = nil
	r.device = r.device[1:]
	refused := r.refused
	r.refused = 0
	p.atDevice--
	launched = p.atDevice == 0 && !p.cfg.SkipDevice
	if p.replied {
		return p, launched, true
	}
	switch p.step {
	case stepShipped:
		p.step = stepCopied
		if err != nil {
			r.finish(p, fmt.Errorf("arena_h2d: %w", err))
		} else if p.cfg.SkipDevice {
			r.finish(p, nil)
		}
		return p, false, false
	case stepCopied:
		if err != nil && r.rerunRefused(p, refused) {
			return p, true, false
		}
		if err != nil {
			err = fmt.Errorf("device: %w", err)
		}
		r.finish(p, err)
		return p, true, false
	}
	panic(fmt.Sprintf("stages: device reply for pass %d in step %d", p.ID, p.step))
}

// Refused says that the device's next reply refuses a launch because of the
// Definition with content hash hash: its image does not read on the device
// (one loaded from the store on disk or fetched from a peer, which the host
// checked only in part). Then that reply does not fail its pass, if the pass
// replays that Definition under its full_key and has not been given back
// for a refusal before: the pass is given back to be rerun (ActRerun) with
// the key forgotten, so its call asks for the key again, which the store
// records afresh. Once per pass: a Definition recorded here that the device
// refuses would be refused again.
func (r *Replay) Refused(hash uint64) { r.refused = hash }

func (r *Replay) rerunRefused(p *Pass, hash uint64) bool {
	d := p.def(hash)
	if hash == 0 || d == nil || p.repaired || p.cfg.NoRetain {
		return false
	}
	p.repaired = true
	p.step = stepDone
	r.remove(p)
	// Every Definition the pass used is forgotten, not only the refused
	// one: the device refuses one image a launch, and the others from the
	// same store may be as bad (the store drops and reloads them, checked
	// in full; a recorded one is answered again at once). One rerun then
	// repairs them all.
	forget := make([]Learned, 0, len(p.used))
	seen := make(map[uint64]bool, len(p.used))
	for _, u := range p.used {
		if k := u.Def.FullKey; !seen[k] {
			seen[k] = true
			forget = append(forget, Learned{StoreKey: k, Forget: true})
		}
	}
	if !seen[d.Def.FullKey] {
		forget = append(forget, Learned{StoreKey: d.Def.FullKey, Forget: true})
	}
	r.actions = append(r.actions, Action{Kind: ActRerun, Pass: p, Learned: forget})
	return true
}

// Done reports whether the pass has been answered.
func (p *Pass) Done() bool { return p.replied }

// Cancel ends a pass now with err (its caller gave up, or the runtime
// stops). Keys it still awaited are forgotten by the Host; device replies
// still owed to it are absorbed when they come.
func (r *Replay) Cancel(id uint64, err error) {
	p := r.find(id)
	if p == nil {
		return
	}
	if p.step == stepWait {
		for _, k := range p.Waiting() {
			p.learned = append(p.learned, Learned{StoreKey: k, Forget: true})
		}
		if len(p.learned) > 0 {
			r.actions = append(r.actions, Action{Kind: ActLearn, Pass: p, Learned: p.learned})
			p.learned = nil
		}
	}
	r.finish(p, err)
	r.ship()
}

func (r *Replay) finish(p *Pass, err error) {
	p.Err = err
	p.step = stepDone
	p.replied = true
	r.remove(p)
	r.actions = append(r.actions, Action{Kind: ActReply, Pass: p})
}

func (r *Replay) remove(p *Pass) {
	if i := slices.Index(r.passes, p); i >= 0 {
		r.passes = slices.Delete(r.passes, i, i+1)
	}
}

// AtDevice reports whether the device still owes pass p a reply (its image
// bytes are in use until then).
func (p *Pass) AtDevice() bool { return p.atDevice > 0 }

// Actions returns what to do, in order, and forgets it. The slice is reused.
func (r *Replay) Actions() []Action {
	a := r.actions
	r.actions = r.actions[:0]
	return a
}
