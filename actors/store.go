package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// store is the Definition store actor: a thin shell over stages.Store,
// which owns the keyed in-flight map (at most one recording per key, every
// distinct key records), the queue of jobs beyond the recorder pool and
// every decision about them. The shell feeds it the messages that come in
// and does what it asks: sends to the recorders and the askers, the loads
// and writes of the store on disk (storedisk.go), the cluster's fetches
// (fetch.go). It outlives runs.
type store struct {
	st        *stages.Store[*mailbox.RecordJob]
	recorders map[string]*actor.PID
	stats     *Stats
	disk      *diskstore.Store // nil without a store on disk
	writer    *actor.PID
	tracer    *trace.Tracer
	peers     DefinitionSource
	// preloads is, per preload the stage started, its request.
	preloads map[int]*prefetch
	// fetching is, per request asked of the cluster, its peer_fetch span;
	// checking, per fetched image being checked, its span (fetch.go).
	fetching map[*mailbox.RecordJob]fetchSpan
	checking map[*mailbox.RecordJob]checkSpan
	// fullEdges: Definitions ship every edge (Config.FullEdges), so a
	// nested one loaded from disk is flattened unreduced.
	fullEdges bool
}

func newStore(rt *Runtime) *store {
	return &store{
		st:        stages.NewStore[*mailbox.RecordJob](stages.StoreConfig{Disk: rt.disk != nil, Peers: rt.cfg.Peers != nil}),
		recorders: map[string]*actor.PID{},
		stats:     &rt.Stats,
		disk:      rt.disk,
		writer:    rt.diskWriter,
		tracer:    rt.tracer,
		peers:     rt.cfg.Peers,
		preloads:  map[int]*prefetch{},
		fetching:  map[*mailbox.RecordJob]fetchSpan{},
		checking:  map[*mailbox.RecordJob]checkSpan{},
		fullEdges: rt.cfg.FullEdges,
	}
}

// storeReady registers the recorder pool with the store.
type storeReady struct{ recorders []*actor.PID }

// forgetDefinitions drops a pass's Definitions when they are not retained
// (their store keys are salted per pass, so nothing else would reuse them).
type forgetDefinitions struct{ keys []uint64 }

// definitionRefused is the device refusing a Definition at a launch (the
// replay actor's report): one that came from disk or the cluster is moved
// aside and recorded again at its next request.
type definitionRefused struct {
	key, hash uint64
	err       error
}

func (s *store) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *storeReady:
		ids := make([]string, len(m.recorders))
		for i, r := range m.recorders {
			ctx.Watch(r)
			s.recorders[r.Id] = r
			ids[i] = r.Id
		}
		s.st.Recorders(ids...)
	case *actor.Terminated:
		// Only at shutdown (recorders restart without a budget), but a job
		// is never left with an actor that is not there.
		delete(s.recorders, m.Who.Id)
		s.st.RecorderLost(m.Who.Id)
	case *mailbox.RecordJob:
		s.st.Request(m)
	case *mailbox.Built:
		s.checkedSpan(m.Job, m)
		s.st.Built(m.Recorder.Id, m.Job, m.Recording)
	case *fetched:
		s.fetchDone(m)
	case *diskLoaded:
		s.st.LoadDone(m.key, m.def, m.load, m.rejected)
	case *prefetch:
		s.prefetch(m)
	case *forgetDefinitions:
		s.st.Forget(m.keys)
	case *definitionRefused:
		s.st.Refused(m.key, m.hash, m.err)
	}
	s.act(ctx)
}

// act does what the stage asks, until it asks nothing more (a load that
// misses at once answers within the turn).
func (s *store) act(ctx actor.Context) {
	for {
		acts := s.st.Actions()
		if len(acts) == 0 {
			return
		}
		// The counts first: a caller that has its answer finds them.
		s.syncStats()
		for _, a := range acts {
			s.do(ctx, a)
		}
	}
}

func (s *store) do(ctx actor.Context, a stages.StoreAction[*mailbox.RecordJob]) {
	switch a.Kind {
	case stages.StoreDispatch:
		ctx.Send(s.recorders[a.Recorder], a.Job)
	case stages.StoreAnswer:
		ctx.Send(a.Job.ReplyTo, &mailbox.DefinitionReady{Outcome: a.Outcome, Trace: a.Job.Trace})
	case stages.StoreLoadKey:
		s.load(ctx, a)
	case stages.StoreFetch:
		s.fetch(ctx, a.Job)
	case stages.StoreWrite:
		// A nested Definition is kept as parts: each child an entry of
		// its own (found by its full_key, checked by its content hash),
		// before the parent's own image that refers to them.
		for _, p := range a.Def.Parts() {
			img, h := p.OwnImage()
			def := p.Def
			if h != def.ContentHash {
				d := *def
				d.ContentHash = h
				def = &d
			}
			var sig []byte
			if p == a.Def {
				// A fetched image's signature covers it alone: a fetched
				// Definition is a flattening, its own only part.
				sig = a.Def.Signature
			}
			ctx.Send(s.writer, &diskPut{def: def, image: img, model: a.Job.Model, sig: sig})
		}
	case stages.StoreRecorded:
		var image []byte
		if a.Def != nil {
			image = a.Def.Image
		}
		s.peers.Recorded(fetchRequest(a.Job, a.Job.Trace), image)
	case stages.StoreUnpin:
		s.disk.Unpin(a.Key)
	case stages.StorePreloaded:
		if p := s.preloads[a.Preload]; p != nil {
			delete(s.preloads, a.Preload)
			p.done <- a.Load
		}
	case stages.StoreQuarantine:
		s.quarantine(a)
	}
}

// syncStats publishes the stage's counts in the runtime's Stats, which
// callers read from other goroutines.
func (s *store) syncStats() {
	c := s.st.Stats()
	s.stats.Recorded.Store(c.Recorded)
	s.stats.RecordedNodes.Store(c.RecordedNodes)
	s.stats.MaxQueued.Store(c.MaxQueued)
	s.stats.Loaded.Store(c.Loaded)
	s.stats.StoreRejected.Store(c.Rejected)
	s.stats.Fetched.Store(c.Fetched)
	s.stats.FetchedBytes.Store(c.FetchedBytes)
	s.stats.FetchRejected.Store(c.FetchRejected)
	s.stats.DeviceRefused.Store(c.Refused)
}
