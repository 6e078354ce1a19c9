package stages

import (
	"errors"
	"fmt"
)

// This file is the Definition store's logic as a pure state machine, in the
// manner of the pass (pass.go) and of etcd raft's RawNode: events in (a
// request, a recording built, a load from the store on disk done, a fetch
// from the cluster answered, a recorder lost, the device refusing a
// Definition), actions out (dispatch a job to a recorder, load, fetch,
// answer, write, tell the cluster, unpin, quarantine). The store actor
// (actors/store.go) owns one and does what it asks: the sends, the disk and
// the peers. The store holds, per store key, at most one recording in
// flight (every distinct key records; a second asker waits for the first),
// and jobs beyond the recorder pool wait in its queue, in order, never
// demoted.

// StoreJob is what the store needs of a request: the shell's job type
// (mailbox.RecordJob) gives its record request.
type StoreJob interface {
	comparable
	Request() *RecordRequest
}

// StoreConfig says where the store may look besides its memory.
type StoreConfig struct {
	// Disk: a store on disk (loads and writes).
	Disk bool
	// Peers: a cluster to ask before recording.
	Peers bool
}

// StoreActionKind names what a Store asks its actor to do.
type StoreActionKind uint8

const (
	// StoreDispatch: send Job to Recorder.
	StoreDispatch StoreActionKind = iota + 1
	// StoreLoadKey: look for Key's Definition on disk (Job is the request
	// that asks, or nil for preload Preload's; GraphKey names it) and
	// answer with LoadDone.
	StoreLoadKey
	// StoreFetch: ask the cluster for Job's Definition; answer with
	// FetchDone.
	StoreFetch
	// StoreAnswer: send Outcome to Job's asker.
	StoreAnswer
	// StoreWrite: write Def to disk for Job's orchestration.
	StoreWrite
	// StoreRecorded: tell the cluster that Job's recording ended here
	// (Def nil: it failed), after a fetch that answered "record".
	StoreRecorded
	// StoreUnpin: release the disk's pin on Key (loaded ahead of any
	// request: in memory now, eviction may take its files).
	StoreUnpin
	// StorePreloaded: preload Preload has every load back (Load).
	StorePreloaded
	// StoreQuarantine: move Key's entry on disk aside (Err says why).
	StoreQuarantine
)

var storeActionNames = [...]string{"", "dispatch", "load", "fetch", "answer", "write", "recorded", "unpin", "preloaded", "quarantine"}

func (k StoreActionKind) String() string { return storeActionNames[k] }

// StoreAction is one thing for the store actor to do.
type StoreAction[J StoreJob] struct {
	Kind     StoreActionKind
	Job      J
	Recorder string
	Key      uint64
	GraphKey string
	Outcome  Outcome
	Def      *Published
	Preload  int
	Load     StoreLoad
	Err      error
}

// Recording is a recorder's result for one job: its Definition built, or
// why there is none.
type Recording struct {
	Def      *Published
	Defects  []Defect
	Nodes    int
	Err      error
	Panicked bool
	RecordNs int64
	BuildNs  int64
}

// PreloadEntry names one entry on disk to load ahead of any request.
type PreloadEntry struct {
	FullKey uint64
	Key     string
}

// StoreStats are the store's lifetime counts.
type StoreStats struct {
	Recorded, RecordedNodes, MaxQueued   int64
	Loaded, Rejected                     int64
	Fetched, FetchedBytes, FetchRejected int64
	// Refused counts Definitions the device refused that came from the
	// disk or the cluster (each forgotten, moved aside and recorded again).
	Refused int64
}

// ErrDeviceRefused marks a Definition from the store on disk or the cluster
// that the device could not read: it is moved aside and recorded again.
var ErrDeviceRefused = errors.New("the device refused the Definition")

// ErrPeerMismatch marks a Definition from the cluster that is not this
// node's recording of the same key: its sender made it, and its own hash and
// decode prove nothing more.
var ErrPeerMismatch = errors.New("a peer's Definition is not this node's recording of it")

// origin is where a Definition in memory came from.
type origin uint8

const (
	fromRecording origin = iota
	fromDisk
	fromPeer
)

type storeKeyState[J StoreJob] struct {
	// inflight: a load, fetch or recording is under way; waiters are the
	// requests for it, the first one's answer carries what it did.
	inflight bool
	waiters  []J
	// verifies wait for the first recording or load to end.
	verifies []J
	def      *Published
	origin   origin
	verified bool
	// preload is the preload the key's load belongs to (0: none);
	// loadNote is what a load ahead of any request did, reported with the
	// first request.
	preload  int
	loadNote *StoreLoad
	// rejected is the bad entries found, reported with the recording that
	// replaces them; fetch is what asking the cluster did before it.
	rejected []error
	fetch    PeerFetch
	// checking is a Definition from the cluster waiting for the recording
	// that checks it (FetchCheck), and checkPeer the node it came from.
	checking  *Published
	checkPeer string
}

type preloadWait struct {
	pending int
	res     StoreLoad
}

// Store is the Definition store's state. It is owned by one actor.
type Store[J StoreJob] struct {
	cfg      StoreConfig
	idle     []string
	busy     map[string]J
	queue    []J
	keys     map[uint64]*storeKeyState[J]
	preloads map[int]*preloadWait
	nextPre  int
	stats    StoreStats
	actions  []StoreAction[J]
}

// NewStore makes an empty store.
func NewStore[J StoreJob](cfg StoreConfig) *Store[J] {
	return &Store[J]{cfg: cfg, busy: map[string]J{}, keys: map[uint64]*storeKeyState[J]{}, preloads: map[int]*preloadWait{}}
}

// Actions returns what to do, in order, and forgets it.
func (s *Store[J]) Actions() []StoreAction[J] {
	a := s.actions
	s.actions = nil
	return a
}

// Stats is the store's counts so far.
func (s *Store[J]) Stats() StoreStats { return s.stats }

// Queued is the jobs waiting for a recorder.
func (s *Store[J]) Queued() int { return len(s.queue) }

func (s *Store[J]) key(k uint64) *storeKeyState[J] {
	e := s.keys[k]
	if e == nil {
		e = &storeKeyState[J]{}
		s.keys[k] = e
	}
	return e
}

// drop removes a key's state once nothing is left in it.
func (s *Store[J]) drop(k uint64) {
	if e := s.keys[k]; e != nil && !e.inflight && e.def == nil && !e.verified && len(e.verifies) == 0 &&
		e.loadNote == nil && len(e.rejected) == 0 && e.fetch.Asked == 0 {
		delete(s.keys, k)
	}
}

func (s *Store[J]) do(a StoreAction[J]) { s.actions = append(s.actions, a) }

func (s *Store[J]) answer(j J, o Outcome) {
	s.do(StoreAction[J]{Kind: StoreAnswer, Job: j, Outcome: o})
}

func outcomeOf(r *RecordRequest) Outcome {
	return Outcome{Pass: r.Pass, StoreKey: r.StoreKey, Verify: r.Verify, Detached: r.Detached}
}

// retained says the key outlives its pass: its full_key, which the disk and
// the cluster can hold (a key salted per pass is this process's alone).
func retained(r *RecordRequest) bool { return r.StoreKey == r.FullKey }

// Recorders adds free recorders to the pool.
func (s *Store[J]) Recorders(ids ...string) {
	s.idle = append(s.idle, ids...)
	s.dispatch()
}

// RecorderLost takes a recorder out of the pool for good; the job it was
// given goes back to the front of the queue.
func (s *Store[J]) RecorderLost(id string) {
	for i, r := range s.idle {
		if r == id {
			s.idle = append(s.idle[:i], s.idle[i+1:]...)
			break
		}
	}
	if j, ok := s.busy[id]; ok {
		delete(s.busy, id)
		s.queue = append([]J{j}, s.queue...)
	}
	s.dispatch()
}

// Request takes a request for a Definition.
func (s *Store[J]) Request(j J) {
	r := j.Request()
	k := r.StoreKey
	e := s.key(k)
	if r.Verify {
		switch {
		case e.inflight:
			e.verifies = append(e.verifies, j)
		case e.verified || e.def == nil:
			// Verified before, or nothing to verify against (the first
			// recording failed, and that failure is reported already).
			o := outcomeOf(r)
			o.Def = e.def
			s.answer(j, o)
			s.drop(k)
		default:
			e.verified = true
			s.enqueue(j)
		}
		return
	}
	if e.def != nil {
		o := outcomeOf(r)
		o.Def = e.def
		if l := e.loadNote; l != nil {
			// Preloaded for this, the first request: it came from disk,
			// in the preload's time.
			o.Store = StoreLoad{Loaded: l.Loaded, Bytes: l.Bytes, Preloaded: l.Loaded}
			e.loadNote = nil
		}
		s.answer(j, o)
		return
	}
	if e.inflight {
		e.waiters = append(e.waiters, j)
		return
	}
	e.inflight = true
	e.waiters = []J{j}
	if s.cfg.Disk && retained(r) {
		s.do(StoreAction[J]{Kind: StoreLoadKey, Job: j, Key: k, GraphKey: r.Key})
		return
	}
	s.missed(j)
}

// missed goes on with a key in neither memory nor the store on disk: ask the
// cluster, else record it.
func (s *Store[J]) missed(j J) {
	if r := j.Request(); s.cfg.Peers && retained(r) {
		s.do(StoreAction[J]{Kind: StoreFetch, Job: j, Key: r.StoreKey})
		return
	}
	s.enqueue(j)
}

func (s *Store[J]) enqueue(j J) {
	s.queue = append(s.queue, j)
	s.stats.MaxQueued = max(s.stats.MaxQueued, int64(len(s.queue)))
	s.dispatch()
}

func (s *Store[J]) dispatch() {
	for len(s.queue) > 0 && len(s.idle) > 0 {
		rec := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		j := s.queue[0]
		var zero J
		s.queue[0] = zero
		s.queue = s.queue[1:]
		s.busy[rec] = j
		s.do(StoreAction[J]{Kind: StoreDispatch, Job: j, Recorder: rec})
	}
}

// publish makes d the key's Definition and answers every request waiting
// for it; the first one's answer carries what getting it did (first).
func (s *Store[J]) publish(k uint64, d *Published, from origin, first func(*Outcome)) {
	e := s.key(k)
	e.def, e.origin = d, from
	waiters := e.waiters
	e.inflight, e.waiters = false, nil
	for i, w := range waiters {
		o := outcomeOf(w.Request())
		o.Def = d
		if i == 0 {
			first(&o)
		}
		s.answer(w, o)
	}
	s.askVerifies(k)
}

// askVerifies takes again the verifications that waited for the key's
// recording or load to end.
func (s *Store[J]) askVerifies(k uint64) {
	e := s.keys[k]
	if e == nil {
		return
	}
	vs := e.verifies
	e.verifies = nil
	for _, v := range vs {
		s.Request(v)
	}
	s.drop(k)
}

// LoadDone takes a load's answer: the Definition (nil on a miss or a
// rejection), what the load did, and why the entry was refused, if it was.
// A Definition is published to every request waiting for its key; one
// preloaded that no request waits for yet is kept (its pin released), and
// the load is reported with the first request that comes. A miss or a
// rejection goes on as a miss for the first request waiting, if any; the
// rejection is reported with the recording that replaces the entry.
func (s *Store[J]) LoadDone(k uint64, d *Published, load StoreLoad, rejected error) {
	e := s.keys[k]
	if e == nil || !e.inflight {
		panic(fmt.Sprintf("stages: a load of key %016x the store did not start", k))
	}
	if d != nil {
		s.stats.Loaded++
	}
	if rejected != nil {
		s.stats.Rejected++
		load.Rejected = append(load.Rejected, rejected)
	}
	if id := e.preload; id != 0 {
		e.preload = 0
		s.preloaded(id, load)
	}
	if d != nil {
		if len(e.waiters) == 0 {
			e.loadNote = &load
			s.do(StoreAction[J]{Kind: StoreUnpin, Key: k})
		}
		s.publish(k, d, fromDisk, func(o *Outcome) { o.Store = load })
		return
	}
	if rejected != nil {
		e.rejected = append(e.rejected, rejected)
	}
	if len(e.waiters) == 0 {
		e.inflight = false
		s.askVerifies(k)
		return
	}
	s.missed(e.waiters[0])
}

// FetchDone takes the cluster's answer for j: a Definition checked by the
// shell (published like a recording: kept in memory and on disk, sent to
// every request waiting), or nil to record it here. f is what asking did.
func (s *Store[J]) FetchDone(j J, d *Published, f PeerFetch) {
	r := j.Request()
	s.stats.FetchRejected += int64(len(f.Rejected))
	if d == nil {
		s.key(r.StoreKey).fetch = f
		s.enqueue(j)
		return
	}
	s.stats.Fetched++
	s.stats.FetchedBytes += f.Bytes
	if s.cfg.Disk {
		s.do(StoreAction[J]{Kind: StoreWrite, Job: j, Key: r.StoreKey, Def: d})
	}
	s.publish(r.StoreKey, d, fromPeer, func(o *Outcome) { o.Fetch = f })
}

// FetchRefused fails j and every request waiting for its key: the
// cluster's answer may not be replayed and this node must not record the
// Definition instead (err says why: a fetched image whose signature did
// not verify, refused by flag). Nothing is kept: a later request asks
// again.
func (s *Store[J]) FetchRefused(j J, err error, f PeerFetch) {
	k := j.Request().StoreKey
	s.stats.FetchRejected += int64(len(f.Rejected))
	e := s.key(k)
	waiters, rejected := e.waiters, e.rejected
	e.inflight, e.waiters, e.rejected = false, nil, nil
	for i, w := range waiters {
		o := outcomeOf(w.Request())
		o.Err = err
		if i == 0 {
			o.Fetch, o.Store.Rejected = f, rejected
		}
		s.answer(w, o)
	}
	s.askVerifies(k)
}

// FetchCheck takes a Definition from the cluster (checked by the shell as
// an image) that must also be this node's own: j is recorded here, and d is
// published as fetched only if the recording's content hash is d's (a
// sender can make an image that decodes, carries its own hash and is wrong:
// extra edges keep the digest). Else the recording is used, and d counted
// and reported as rejected (ErrPeerMismatch), naming peer.
func (s *Store[J]) FetchCheck(j J, d *Published, f PeerFetch, peer string) {
	e := s.key(j.Request().StoreKey)
	e.checking, e.checkPeer, e.fetch = d, peer, f
	s.enqueue(j)
}

// checked ends a FetchCheck with its recording b: true when the fetched
// Definition was published.
func (s *Store[J]) checked(j J, e *storeKeyState[J], b Recording) bool {
	d, peer := e.checking, e.checkPeer
	e.checking, e.checkPeer = nil, ""
	r := j.Request()
	if b.Err == nil && b.Def.Hash == d.Hash {
		f := e.fetch
		e.fetch = PeerFetch{}
		f.Loaded, f.Bytes = 1, int64(len(d.Image))
		s.stats.Fetched++
		s.stats.FetchedBytes += f.Bytes
		if s.cfg.Disk {
			s.do(StoreAction[J]{Kind: StoreWrite, Job: j, Key: r.StoreKey, Def: d})
		}
		// The recording that checked it is this pass's work: it counts in
		// record_node (not as a Definition built).
		s.publish(r.StoreKey, d, fromPeer, func(o *Outcome) { o.Fetch, o.RecordedNodes, o.RecordNs = f, b.Nodes, b.RecordNs })
		return true
	}
	err := fmt.Errorf("graph %q: image from peer %s rejected: %w: content hash %016x", r.Key, peer, ErrPeerMismatch, d.Hash)
	if b.Err == nil {
		err = fmt.Errorf("%w, recorded here %016x", err, b.Def.Hash)
	} else {
		err = fmt.Errorf("%w, and recording it here failed", err)
	}
	s.stats.FetchRejected++
	e.fetch.Rejected = append(e.fetch.Rejected, err)
	e.fetch.Warnings = append(e.fetch.Warnings, err.Error()+"; recorded here")
	return false
}

// Built takes a recorder's result for j: the recorder is free again (its
// next job goes out first), and the recording's Definition, or its failure,
// goes to every request waiting for the key.
func (s *Store[J]) Built(recorder string, j J, b Recording) {
	delete(s.busy, recorder)
	s.idle = append(s.idle, recorder)
	s.dispatch()
	r := j.Request()
	k := r.StoreKey
	o := outcomeOf(r)
	o.Defects, o.RecordedNodes, o.RecordNs, o.BuildNs = b.Defects, b.Nodes, b.RecordNs, b.BuildNs
	o.Err, o.Panicked = b.Err, b.Panicked
	e := s.key(k)
	if r.Verify {
		s.verify(j, e.def, b, o)
		s.drop(k)
		return
	}
	if e.checking != nil && s.checked(j, e, b) {
		return
	}
	if b.Err == nil {
		e.def, e.origin = b.Def, fromRecording
		o.Def = b.Def
		s.stats.Recorded++
		s.stats.RecordedNodes += int64(b.Nodes)
		if s.cfg.Disk && retained(r) {
			s.do(StoreAction[J]{Kind: StoreWrite, Job: j, Key: k, Def: b.Def})
		}
	}
	if s.cfg.Peers && retained(r) {
		s.do(StoreAction[J]{Kind: StoreRecorded, Job: j, Key: k, Def: o.Def})
	}
	rejected, fetch := e.rejected, e.fetch
	e.rejected, e.fetch = nil, PeerFetch{}
	waiters := e.waiters
	e.inflight, e.waiters = false, nil
	for i, w := range waiters {
		wo := o
		wo.Pass = w.Request().Pass
		wo.Recorded = i == 0
		if i == 0 {
			wo.Store.Rejected = rejected
			wo.Fetch = fetch
		} else {
			wo.RecordedNodes, wo.RecordNs, wo.BuildNs = 0, 0, 0
		}
		s.answer(w, wo)
	}
	s.askVerifies(k)
}

// verify compares a later call's recording with the published Definition.
// Both images hold no boundary address or boundary scalar value, so equal
// bodies give equal content hashes; a difference is something the first
// recording baked in: a static scalar derived from a boundary value, or a
// structure that depends on a value outside the key.
func (s *Store[J]) verify(j J, d *Published, b Recording, o Outcome) {
	o.Def = d
	// The first recording reported its own defects; a verification
	// reports only how it differs.
	o.Defects = nil
	if o.Err == nil && d != nil && d.Hash != b.Def.Hash {
		o.Defects = append(o.Defects, DiffDefinitions(j.Request().Key, d, b.Def))
	}
	s.answer(j, o)
}

// DiffDefinitions explains why two recordings of one key differ. Both
// Published hold only the host's part of their Definition (Recorder.Publish,
// DecodeDefinitionHost); their images hold all of it, and a differing pair
// is rare enough to decode.
func DiffDefinitions(key string, d, v *Published) Defect {
	a, errA := DecodeDefinition(d.Image)
	b, errB := DecodeDefinition(v.Image)
	if err := errors.Join(errA, errB); err != nil {
		// A loaded or fetched image is checked in full only by the
		// device; the hashes differ all the same.
		return Defect{Key: key, Kind: DefectStructure, Slot: -1, Node: -1,
			Msg: fmt.Sprintf("two calls recorded different Definitions (%v)", err)}
	}
	return compareDefinitions(key, a, b)
}

// compareDefinitions explains why two recordings of one key differ.
func compareDefinitions(key string, a, b *Definition) Defect {
	if len(a.Nodes) != len(b.Nodes) {
		return Defect{Key: key, Kind: DefectStructure, Slot: -1, Node: -1,
			Msg: fmt.Sprintf("two calls recorded %d and %d nodes: the body's structure depends on a value that is not in its key", len(a.Nodes), len(b.Nodes))}
	}
	for i := range a.Nodes {
		na, nb := &a.Nodes[i], &b.Nodes[i]
		if na.Kind != nb.Kind || na.Kernel != nb.Kernel || na.BlockNum != nb.BlockNum || na.Tensors.N != nb.Tensors.N || na.Scalars.N != nb.Scalars.N {
			return Defect{Key: key, Kind: DefectStructure, Slot: -1, Node: int32(i),
				Msg: fmt.Sprintf("node %d differs between two calls (kernel %v vs %v): the body's structure depends on a value that is not in its key", i, na.Kernel, nb.Kernel)}
		}
		for j := uint32(0); j < na.Scalars.N; j++ {
			sa, sb := a.Scalars[na.Scalars.Off+j], b.Scalars[nb.Scalars.Off+j]
			if sa != sb && !sa.Boundary && !sb.Boundary {
				return Defect{Key: key, Kind: DefectBakedScalar, Slot: -1, Node: int32(i),
					Msg: fmt.Sprintf("node %d scalar %d is static %d in the Definition but %d in a later call: a value derived from the boundary was baked in; pass it as a boundary scalar", i, j, sa.Value, sb.Value)}
			}
		}
		for j := uint32(0); j < na.Tensors.N; j++ {
			if a.Tensors[na.Tensors.Off+j] != b.Tensors[nb.Tensors.Off+j] {
				return Defect{Key: key, Kind: DefectStructure, Slot: -1, Node: int32(i),
					Msg: fmt.Sprintf("node %d tensor %d is sourced differently in a later call: the body's structure depends on a value that is not in its key", i, j)}
			}
		}
	}
	return Defect{Key: key, Kind: DefectStructure, Slot: -1, Node: -1,
		Msg: "two calls recorded different Definitions (predicates or scalar sources differ)"}
}

// Preload starts loading entries on disk ahead of any request, each not in
// memory nor in flight marked in flight with no request waiting yet: a
// request that comes meanwhile waits for the load, as for any other. It
// returns the preload's id; StorePreloaded says when every load is back
// (at once when there is nothing to load).
func (s *Store[J]) Preload(entries []PreloadEntry) int {
	s.nextPre++
	id := s.nextPre
	w := &preloadWait{}
	for _, pe := range entries {
		e := s.key(pe.FullKey)
		if e.def != nil || e.inflight {
			continue
		}
		e.inflight, e.preload = true, id
		w.pending++
		s.do(StoreAction[J]{Kind: StoreLoadKey, Key: pe.FullKey, GraphKey: pe.Key, Preload: id})
	}
	if w.pending == 0 {
		s.do(StoreAction[J]{Kind: StorePreloaded, Preload: id})
		return id
	}
	s.preloads[id] = w
	return id
}

// preloaded counts one of a preload's loads, and says so once the last is in.
func (s *Store[J]) preloaded(id int, l StoreLoad) {
	w := s.preloads[id]
	w.res.Add(l)
	if w.pending--; w.pending == 0 {
		delete(s.preloads, id)
		s.do(StoreAction[J]{Kind: StorePreloaded, Preload: id, Load: w.res})
	}
}

// Forget drops Definitions a pass no longer needs (store keys salted per
// pass, which nothing else would reuse).
func (s *Store[J]) Forget(keys []uint64) {
	for _, k := range keys {
		if e := s.keys[k]; e != nil {
			e.def, e.verified = nil, false
			s.drop(k)
		}
	}
}

// Refused takes the device's refusal of the Definition with content hash
// hash under key k. One that came from the store on disk or the cluster is
// forgotten (the next request records it), its entry on disk moved aside,
// and the refusal counted and reported with the recording that replaces
// it, as a rejection on load is; it reports whether it was. One recorded
// here stays: recording it again would give the same image.
func (s *Store[J]) Refused(k, hash uint64, err error) bool {
	e := s.keys[k]
	if e == nil || e.def == nil || e.def.Hash != hash || e.origin == fromRecording {
		return false
	}
	key := e.def.Def.Key
	e.def, e.verified = nil, false
	s.stats.Refused++
	s.stats.Rejected++
	rej := fmt.Errorf("graph %q: Definition %016x: %w: %w", key, hash, ErrDeviceRefused, err)
	e.rejected = append(e.rejected, rej)
	if s.cfg.Disk {
		s.do(StoreAction[J]{Kind: StoreQuarantine, Key: k, GraphKey: key, Err: rej})
	}
	// The device refuses one image a launch: every other one held from
	// the disk or the cluster is as suspect (one bad writer, one bad
	// batch), so it is dropped and loaded again, now checked in full
	// (the disk's strict loads), and the rerun that follows records every
	// bad one at once instead of one a run.
	for k2, e2 := range s.keys {
		if k2 != k && e2.def != nil && e2.origin != fromRecording && !e2.inflight {
			e2.def, e2.verified = nil, false
			s.drop(k2)
		}
	}
	return true
}
