package actors

import (
	"errors"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
)

// store is the Definition store: it outlives runs, owns the keyed in-flight
// map (at most one recording per key, every distinct key records) and
// dispatches recording jobs to the recorder pool. The pool bounds how many
// bodies record at once; jobs beyond it wait here, in order, never demoted.
type store struct {
	idle []*actor.PID
	// busy is the job each recorder was given and has not finished: a
	// recorder that stops for good gives it back to the queue.
	busy     map[string]*mailbox.RecordJob
	queue    []*mailbox.RecordJob
	defs     map[uint64]*mailbox.Definition
	inflight map[uint64][]*mailbox.RecordJob // waiters per key, the first is recording
	verified map[uint64]bool
	// verifies wait here while their key's first recording is in flight.
	verifies map[uint64][]*mailbox.RecordJob
	stats    *Stats
	disk     storeDisk
	// peers is Config.Peers; fetchNotes is, per key, what asking them did
	// before the key's recording, reported with the recording.
	peers      DefinitionSource
	fetchNotes map[uint64]mailbox.PeerFetch
	// preloading is, per key loading ahead of any request (prefetch), its
	// preload; loadNotes, per key loaded ahead, what the load did, reported
	// with the first request for it.
	preloading map[uint64]*preloadWait
	loadNotes  map[uint64]stages.StoreLoad
	// peerChecks are the recordings that check a peer's image (peercheck.go).
	peerChecks map[*mailbox.RecordJob]*peerCheck
}

func newStore(rt *Runtime) *store {
	return &store{
		defs:       map[uint64]*mailbox.Definition{},
		busy:       map[string]*mailbox.RecordJob{},
		inflight:   map[uint64][]*mailbox.RecordJob{},
		verified:   map[uint64]bool{},
		verifies:   map[uint64][]*mailbox.RecordJob{},
		stats:      &rt.Stats,
		disk:       storeDisk{disk: rt.disk, writer: rt.diskWriter, tracer: rt.tracer, rejected: map[uint64][]string{}},
		peers:      rt.cfg.Peers,
		fetchNotes: map[uint64]mailbox.PeerFetch{},
		preloading: map[uint64]*preloadWait{},
		loadNotes:  map[uint64]stages.StoreLoad{},
	}
}

// storeReady registers the recorder pool with the store.
type storeReady struct{ recorders []*actor.PID }

// forgetDefinitions drops a pass's Definitions when they are not retained
// (their store keys are salted per pass, so nothing else would reuse them).
type forgetDefinitions struct{ keys []uint64 }

func (s *store) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *storeReady:
		for _, r := range m.recorders {
			ctx.Watch(r)
		}
		s.idle = append(s.idle, m.recorders...)
		s.dispatch(ctx)
	case *actor.Terminated:
		// Only at shutdown (recorders restart without a budget), but a job
		// is never left with an actor that is not there.
		s.idle = slices.DeleteFunc(s.idle, func(p *actor.PID) bool { return p.Equal(m.Who) })
		if job := s.busy[m.Who.Id]; job != nil {
			delete(s.busy, m.Who.Id)
			s.queue = append([]*mailbox.RecordJob{job}, s.queue...)
		}
	case *mailbox.RecordJob:
		s.request(ctx, m)
	case *mailbox.Built:
		s.built(ctx, m)
	case *fetched:
		s.fetchDone(ctx, m)
	case *diskLoaded:
		s.diskLoaded(ctx, m)
	case *prefetch:
		s.prefetch(ctx, m)
	case *forgetDefinitions:
		for _, k := range m.keys {
			delete(s.defs, k)
			delete(s.verified, k)
		}
	}
}

func (s *store) request(ctx actor.Context, job *mailbox.RecordJob) {
	if job.Verify {
		switch {
		case s.inflight[job.StoreKey] != nil:
			s.verifies[job.StoreKey] = append(s.verifies[job.StoreKey], job)
		case s.verified[job.StoreKey] || s.defs[job.StoreKey] == nil:
			// Verified before, or nothing to verify against (the first
			// recording failed, and that failure is reported already).
			ctx.Send(job.ReplyTo, &mailbox.DefinitionReady{Pass: job.Pass, StoreKey: job.StoreKey, Verify: true, Def: s.defs[job.StoreKey], Trace: job.Trace})
		default:
			s.verified[job.StoreKey] = true
			s.enqueue(ctx, job)
		}
		return
	}
	if d, ok := s.defs[job.StoreKey]; ok {
		ready := &mailbox.DefinitionReady{Pass: job.Pass, StoreKey: job.StoreKey, Def: d, Trace: job.Trace}
		if l, ok := s.loadNotes[job.StoreKey]; ok {
			// Preloaded for this, the first request: it came from disk,
			// in the preload's time.
			ready.Store = stages.StoreLoad{Loaded: l.Loaded, Bytes: l.Bytes, Preloaded: l.Loaded}
			delete(s.loadNotes, job.StoreKey)
		}
		ctx.Send(job.ReplyTo, ready)
		return
	}
	if w, ok := s.inflight[job.StoreKey]; ok {
		// Recording now for another requester: wait for that one.
		s.inflight[job.StoreKey] = append(w, job)
		return
	}
	s.inflight[job.StoreKey] = []*mailbox.RecordJob{job}
	if s.disk.startLoad(ctx, job, s.stats) {
		return // the answer comes back as *diskLoaded
	}
	s.missed(ctx, job)
}

// missed goes on with a key that is in neither the store's memory nor its
// store on disk: ask the cluster, else record it.
func (s *store) missed(ctx actor.Context, job *mailbox.RecordJob) {
	if s.fetch(ctx, job) {
		return // the answer comes back as *fetched
	}
	s.enqueue(ctx, job)
}

// publish makes d the key's Definition and answers every request waiting
// for it; the first one's answer carries what getting it did (first).
func (s *store) publish(ctx actor.Context, key uint64, d *mailbox.Definition, first func(*mailbox.DefinitionReady)) {
	s.defs[key] = d
	waiters := s.inflight[key]
	delete(s.inflight, key)
	for i, w := range waiters {
		ready := &mailbox.DefinitionReady{Pass: w.Pass, StoreKey: w.StoreKey, Def: d, Trace: w.Trace}
		if i == 0 {
			first(ready)
		}
		ctx.Send(w.ReplyTo, ready)
	}
	s.askVerifies(ctx, key)
}

// askVerifies takes again the verifications that waited for key's
// recording or load to end.
func (s *store) askVerifies(ctx actor.Context, key uint64) {
	vs := s.verifies[key]
	delete(s.verifies, key)
	for _, v := range vs {
		s.request(ctx, v)
	}
}

func (s *store) enqueue(ctx actor.Context, job *mailbox.RecordJob) {
	s.queue = append(s.queue, job)
	if q := int64(len(s.queue)); q > s.stats.MaxQueued.Load() {
		s.stats.MaxQueued.Store(q)
	}
	s.dispatch(ctx)
}

func (s *store) dispatch(ctx actor.Context) {
	for len(s.queue) > 0 && len(s.idle) > 0 {
		r := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		job := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.busy[r.Id] = job
		ctx.Send(r, job)
	}
}

// built takes a recorder's result: the recorder is free again (its next
// job goes out first), and the recording's Definition, or its failure, goes
// to every request waiting for the key.
func (s *store) built(ctx actor.Context, b *mailbox.Built) {
	delete(s.busy, b.Recorder.Id)
	s.idle = append(s.idle, b.Recorder)
	s.dispatch(ctx)
	job := b.Job
	if s.peerChecked(ctx, b) {
		return
	}
	ready := &mailbox.DefinitionReady{
		Pass: job.Pass, Trace: job.Trace, StoreKey: job.StoreKey, Defects: b.Defects, Verify: job.Verify,
		RecordedNodes: b.Nodes, RecordNs: b.RecordNs, BuildNs: b.BuildNs,
		Err: b.Err, Panicked: b.Panicked,
	}
	if job.Verify {
		s.verify(ctx, job, b, ready)
		return
	}
	if d := b.Def; ready.Err == nil {
		s.defs[job.StoreKey] = d
		ready.Def = d
		s.stats.Recorded.Add(1)
		s.stats.RecordedNodes.Add(int64(b.Nodes))
		s.disk.store(ctx, job, d)
		s.recordedHere(job, d.Image)
	} else {
		s.recordedHere(job, nil)
	}
	rejected := s.disk.takeRejected(job.StoreKey)
	fetch := s.takeFetchNote(job.StoreKey)
	waiters := s.inflight[job.StoreKey]
	delete(s.inflight, job.StoreKey)
	for i, w := range waiters {
		r := *ready
		r.Pass, r.Trace = w.Pass, w.Trace
		r.Recorded = i == 0
		if i == 0 {
			r.Store.Rejected = rejected
			r.Fetch = fetch
		} else {
			r.RecordedNodes, r.RecordNs, r.BuildNs = 0, 0, 0
		}
		ctx.Send(w.ReplyTo, &r)
	}
	s.askVerifies(ctx, job.StoreKey)
}

// verify compares a later call's recording with the published Definition.
// Both images hold no boundary address or boundary scalar value, so equal
// bodies give equal content hashes; a difference is something the first
// recording baked in: a static scalar derived from a boundary value, or a
// structure that depends on a value outside the key.
func (s *store) verify(ctx actor.Context, job *mailbox.RecordJob, b *mailbox.Built, ready *mailbox.DefinitionReady) {
	d := s.defs[job.StoreKey]
	ready.Def = d
	// The first recording reported its own defects; a verification
	// reports only how it differs.
	ready.Defects = nil
	if ready.Err == nil && d != nil && d.Hash != b.Def.Hash {
		// Both hold only the host's part of their Definition
		// (stages.Recorder.Publish, stages.DecodeDefinitionHost); their
		// images hold all of it, and a differing pair is rare enough to
		// decode.
		a, errA := stages.DecodeDefinition(d.Image)
		v, errV := stages.DecodeDefinition(b.Def.Image)
		if err := errors.Join(errA, errV); err != nil {
			// A loaded or fetched image is checked in full only by the
			// device; the hashes differ all the same.
			ready.Defects = append(ready.Defects, stages.Defect{Key: job.Key, Kind: stages.DefectStructure, Slot: -1, Node: -1,
				Msg: fmt.Sprintf("two calls recorded different Definitions (%v)", err)})
		} else {
			ready.Defects = append(ready.Defects, compareDefinitions(job.Key, a, v))
		}
	}
	ctx.Send(job.ReplyTo, ready)
}

// compareDefinitions explains why two recordings of one key differ.
func compareDefinitions(key string, a, b *stages.Definition) stages.Defect {
	if len(a.Nodes) != len(b.Nodes) {
		return stages.Defect{Key: key, Kind: stages.DefectStructure, Slot: -1, Node: -1,
			Msg: fmt.Sprintf("two calls recorded %d and %d nodes: the body's structure depends on a value that is not in its key", len(a.Nodes), len(b.Nodes))}
	}
	for i := range a.Nodes {
		na, nb := &a.Nodes[i], &b.Nodes[i]
		if na.Kind != nb.Kind || na.Kernel != nb.Kernel || na.BlockNum != nb.BlockNum || na.Tensors.N != nb.Tensors.N || na.Scalars.N != nb.Scalars.N {
			return stages.Defect{Key: key, Kind: stages.DefectStructure, Slot: -1, Node: int32(i),
				Msg: fmt.Sprintf("node %d differs between two calls (kernel %v vs %v): the body's structure depends on a value that is not in its key", i, na.Kernel, nb.Kernel)}
		}
		for j := uint32(0); j < na.Scalars.N; j++ {
			sa, sb := a.Scalars[na.Scalars.Off+j], b.Scalars[nb.Scalars.Off+j]
			if sa != sb && !sa.Boundary && !sb.Boundary {
				return stages.Defect{Key: key, Kind: stages.DefectBakedScalar, Slot: -1, Node: int32(i),
					Msg: fmt.Sprintf("node %d scalar %d is static %d in the Definition but %d in a later call: a value derived from the boundary was baked in; pass it as a boundary scalar", i, j, sa.Value, sb.Value)}
			}
		}
		for j := uint32(0); j < na.Tensors.N; j++ {
			if a.Tensors[na.Tensors.Off+j] != b.Tensors[nb.Tensors.Off+j] {
				return stages.Defect{Key: key, Kind: stages.DefectStructure, Slot: -1, Node: int32(i),
					Msg: fmt.Sprintf("node %d tensor %d is sourced differently in a later call: the body's structure depends on a value that is not in its key", i, j)}
			}
		}
	}
	return stages.Defect{Key: key, Kind: stages.DefectStructure, Slot: -1, Node: -1,
		Msg: "two calls recorded different Definitions (predicates or scalar sources differ)"}
}
