package actors

import (
	"context"
	"fmt"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// The store actor's side of the store on disk: the loads the stage asks
// for, run off the store's turn, and the preloads (Runtime.Preload).

// diskLoaded is a load from the store on disk, back at the store: the
// Definition (nil on a miss or a rejection) and what the load did.
type diskLoaded struct {
	key      uint64 // the store key (= full_key: only retained keys are on disk)
	def      *mailbox.Definition
	load     stages.StoreLoad
	rejected error // why the entry on disk was refused, if it was
}

// diskLoad is what a load needs: the entry's full_key and the Graph key,
// the orchestration identity it must be, and the span to report under.
type diskLoad struct {
	fullKey uint64
	key     string
	model   string
	trace   trace.Carrier
}

// prefetch asks the store to load the Definitions on disk of one
// orchestration identity (model) before any Graph call asks for them
// (Runtime.Preload): the entries of that identity this process read when it
// opened the store (diskstore.Store.KnownFor), the keys an earlier process
// recorded for the same model, form and file. done gets what the loads did
// once every one has ended.
type prefetch struct {
	model string
	trace trace.Carrier // the preload span
	done  chan stages.StoreLoad
}

// maxPrefetch bounds one orchestration's preload.
const maxPrefetch = 1024

// load does a StoreLoadKey. A request's load looks on disk at once (an
// open, a lock and a stat): a miss, or an entry it cannot open, answers
// within the turn, as it would without a store on disk; a hit loads off the
// store's turn and comes back as a *diskLoaded. Loads of distinct keys run
// at once, and with the orchestration that asks for them. A preload's load
// runs off the turn whole.
func (s *store) load(ctx actor.Context, a stages.StoreAction[*mailbox.RecordJob]) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	if a.Job == nil {
		p := s.preloads[a.Preload]
		l := diskLoad{fullKey: a.Key, key: a.GraphKey, model: p.model, trace: p.trace}
		go func() { root.Send(self, s.find(l)) }()
		return
	}
	j := a.Job
	l := diskLoad{fullKey: j.FullKey, key: j.Key, model: j.Model, trace: j.Trace}
	span := s.startSpan(l)
	t0 := trace.Now()
	found, err := s.disk.Find(j.FullKey)
	if found == nil {
		m := failed(l, span, err)
		s.st.LoadDone(m.key, nil, m.load, m.rejected)
		return
	}
	findNs := trace.Now() - t0
	go func() { root.Send(self, s.loadFound(l, found, span, findNs)) }()
}

// prefetch starts a preload of m's entries (stages.Store.Preload).
func (s *store) prefetch(m *prefetch) {
	var es []stages.PreloadEntry
	if s.disk != nil {
		for _, e := range s.disk.KnownFor(m.model, maxPrefetch) {
			fk, err := strconv.ParseUint(e.FullKey, 16, 64)
			if err != nil {
				continue // KnownFor holds only entries named by their full_key
			}
			es = append(es, stages.PreloadEntry{FullKey: fk, Key: e.Key})
		}
	}
	// The stage answers within Preload when there is nothing to load:
	// the preload is known before its actions are done.
	s.preloads[s.st.Preload(es)] = m
}

// find finds and loads one entry off the store's turn.
func (s *store) find(l diskLoad) *diskLoaded {
	span := s.startSpan(l)
	t0 := trace.Now()
	found, err := s.disk.Find(l.fullKey)
	if found == nil {
		return failed(l, span, err)
	}
	return s.loadFound(l, found, span, trace.Now()-t0)
}

// failed ends a load that found nothing to use: a miss (err nil), or an
// entry rejected (moved aside) or unreadable, which is recorded again.
func failed(l diskLoad, span trace.StoreLoadSpan, err error) *diskLoaded {
	span.Finish(0, err)
	m := &diskLoaded{key: l.fullKey}
	if err != nil {
		m.rejected = fmt.Errorf("graph %q: %w", l.key, err)
	}
	return m
}

func (s *store) startSpan(l diskLoad) trace.StoreLoadSpan {
	_, span := s.tracer.StartStoreLoad(l.trace.Context(context.Background()), trace.StoreLoadInfo{Key: l.key, FullKey: l.fullKey, Actor: "store"})
	return span
}

// loadFound loads a found entry's Definition. Its store_load time is the
// find's (findNs) and the load's, not the wait between them.
func (s *store) loadFound(l diskLoad, found *diskstore.Found, span trace.StoreLoadSpan, findNs int64) *diskLoaded {
	t0 := trace.Now()
	ld, err := found.Load(l.model)
	ns := findNs + trace.Now() - t0
	if ld == nil {
		return failed(l, span, err)
	}
	// ld.Def is the host's part of the Definition (no tensor, scalar, fanin
	// or root pool): the device reads the rest at its first launch.
	d := &mailbox.Definition{Def: ld.Def, Image: ld.Image, Hash: ld.Def.ContentHash, Written: ld.Written, Signature: ld.Signature}
	if ld.Def.Nested() {
		// Its children are entries of their own: every one found and
		// checked, or the parent is refused whole and recorded again.
		var err error
		if d, err = s.assemble(ld.Image, l.model, 0); err != nil {
			return failed(l, span, err)
		}
		ns = findNs + trace.Now() - t0
	}
	span.Finish(int64(len(ld.Image)), nil)
	return &diskLoaded{key: l.fullKey, def: d, load: stages.StoreLoad{Loaded: 1, Bytes: int64(len(ld.Image)), Ns: ns}}
}

// quarantine moves aside the entry on disk of a Definition the device
// refused (stages.Store.Refused).
func (s *store) quarantine(a stages.StoreAction[*mailbox.RecordJob]) {
	if s.disk != nil {
		s.disk.Quarantine(a.Key, a.Err.Error())
	}
}

// assemble loads a nested Definition's children from the store on disk
// (each its own entry, nested itself or not) and flattens it over them
// (stages.AssembleNested). The children's pins are released once their
// bytes are in the flattening.
func (s *store) assemble(own []byte, model string, depth int) (*mailbox.Definition, error) {
	if depth > 8 {
		return nil, fmt.Errorf("%w: nested more than 8 deep", stages.ErrChild)
	}
	return stages.AssembleNested(own, func(c stages.Child) (*stages.Published, error) {
		found, err := s.disk.Find(c.FullKey)
		if found == nil {
			if err == nil {
				err = fmt.Errorf("not in the store")
			}
			return nil, err
		}
		ld, err := found.Load(model)
		if ld == nil {
			return nil, err
		}
		defer s.disk.Unpin(c.FullKey)
		if !ld.Def.Nested() {
			return &stages.Published{Def: ld.Def, Image: ld.Image, Hash: ld.Def.ContentHash, Written: ld.Written}, nil
		}
		return s.assemble(ld.Image, model, depth+1)
	}, !s.fullEdges)
}
