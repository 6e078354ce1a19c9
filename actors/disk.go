package actors

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// diskWriter writes built Definitions into the store on disk, off every
// pass's path: a durable write (two fsynced files, two fsynced
// directories) costs milliseconds, more than recording the Definition did.
// A failed write loses nothing but the chance to skip a recording in a later
// process; it is counted and kept for the report. Puts are written in
// batches (diskstore.Store.PutBatch: one sync of each kind for the batch):
// every put already in the mailbox when the first of them arrives goes in
// with it, which a diskCommit sent to itself marks.
type diskWriter struct {
	disk  *diskstore.Store
	stats *Stats
	errs  *diskErrors
	batch []diskstore.Item
}

// diskCommit writes the puts batched since the last.
type diskCommit struct{}

// diskPut asks for one Definition to be stored.
type diskPut struct {
	def   *stages.Definition
	image []byte
	model string
}

// diskFlush is answered once every earlier diskPut is written: Stop waits
// for it, so a process that ends normally leaves its Definitions behind.
type diskFlush struct{}

func (w *diskWriter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *diskPut:
		if len(w.batch) == 0 {
			ctx.Send(ctx.Self(), &diskCommit{})
		}
		w.batch = append(w.batch, diskstore.Item{Def: m.def, Image: m.image, Model: m.model})
	case *diskCommit:
		w.commit()
	case *diskFlush:
		w.commit()
		ctx.Respond(true)
	}
}

func (w *diskWriter) commit() {
	if len(w.batch) == 0 {
		return
	}
	n, err := w.disk.PutBatch(w.batch)
	w.stats.StoreWritten.Add(int64(n))
	if err != nil {
		w.errs.add(err)
	}
	clear(w.batch)
	w.batch = w.batch[:0]
}

// diskErrors keeps the first few write failures for the report.
type diskErrors struct {
	mu   sync.Mutex
	errs []error
}

func (d *diskErrors) add(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) < 8 {
		d.errs = append(d.errs, err)
	}
}

// FlushStore waits for every Definition built so far to be written to the
// store on disk, and returns the writes that failed (at most 8).
func (rt *Runtime) FlushStore() []error {
	rt.flushDisk()
	rt.diskErrs.mu.Lock()
	defer rt.diskErrs.mu.Unlock()
	return append([]error(nil), rt.diskErrs.errs...)
}

// Preload loads, before any pass asks for them, the Definitions the store
// on disk keeps for orch: every entry of its identity (model, form and the
// model file's content) that the store held when this runtime opened it,
// which is every key an earlier process recorded for it. Each is checked as
// a pass's load is; a bad one is moved aside, counted and reported, and its
// key is recorded when a pass calls it. A pass's Graph call then finds its
// Definition in memory, so a fresh process's first pass neither records
// nor reads the disk: a service pays for its Definitions while it starts,
// not in its first step. The first pass that uses a preloaded Definition
// uploads it and reports it among its loaded_definitions.
//
// Preload returns what it loaded when every load has ended, or ctx's error
// (the loads then end on their own, their Definitions kept), or ErrStopped.
// Without a store on disk, or with Config.NoRetain (nothing is kept across
// passes), it loads nothing. info names the preload's span; its store_load
// spans are that span's children.
func (rt *Runtime) Preload(ctx context.Context, orch *Orchestration, info trace.RunInfo) (stages.StoreLoad, error) {
	if orch == nil {
		return stages.StoreLoad{}, fmt.Errorf("preload: %w: nil orchestration", ErrInvalidPass)
	}
	if err := ctx.Err(); err != nil {
		return stages.StoreLoad{}, fmt.Errorf("preload of %q: %w", orch.Name, err)
	}
	select {
	case <-rt.stopped:
		return stages.StoreLoad{}, fmt.Errorf("preload of %q: %w", orch.Name, ErrStopped)
	default:
	}
	if rt.disk == nil || rt.cfg.NoRetain {
		return stages.StoreLoad{}, nil
	}
	ctx, span := rt.tracer.StartPreload(ctx, info)
	defer span.End()
	done := make(chan stages.StoreLoad, 1)
	rt.sys.Root.Send(rt.store, &prefetch{model: orch.Name, trace: span.Carrier(), done: done})
	var err error
	select {
	case l := <-done:
		return l, nil
	case <-ctx.Done():
		err = fmt.Errorf("preload of %q: %w", orch.Name, ctx.Err())
	case <-rt.stopped:
		err = fmt.Errorf("preload of %q: %w", orch.Name, ErrStopped)
	}
	span.Fail(err)
	return stages.StoreLoad{}, err
}

// Disk is the Definition store on disk, nil when there is none.
func (rt *Runtime) Disk() *diskstore.Store { return rt.disk }

// storeDisk is the store actor's side of the store on disk: look there on
// a miss before recording, write there after a build. Its zero value (no
// store on disk) does neither.
type storeDisk struct {
	disk   *diskstore.Store
	writer *actor.PID
	tracer *trace.Tracer
	// rejected is, per store key, the bad entries found on disk, reported
	// with the recording that replaces them.
	rejected map[uint64][]string
}

// diskLoaded is a load from the store on disk, back at the store: the
// Definition (nil on a miss or a rejection) and what the load did.
type diskLoaded struct {
	key      uint64 // the store key (= full_key: only retained keys are on disk)
	def      *mailbox.Definition
	load     stages.StoreLoad
	rejected string // why the entry on disk was refused, if it was
}

// diskLoad is what a load needs: the entry's full_key and the Graph key,
// the orchestration identity it must be, and the span to report under.
type diskLoad struct {
	fullKey uint64
	key     string
	model   string
	trace   trace.Carrier
}

func loadOf(job *mailbox.RecordJob) diskLoad {
	return diskLoad{fullKey: job.FullKey, key: job.Key, model: job.Model, trace: job.Trace}
}

// startLoad looks for job's Definition on disk and reports whether it
// found it: then it loads it off the store's turn, and the answer comes
// back to the store as a *diskLoaded; on a miss (or an entry it cannot
// open) the store goes on at once, as it would without a store on disk.
// The store marks the key in flight first, so later requests for it wait
// for the load. Loads of distinct keys run at once, and with the
// orchestration that asks for them; each is a few system calls, a hash and
// a scan of the image. Without retention store keys are salted per pass,
// and nothing is looked up or kept on disk.
func (sd *storeDisk) startLoad(ctx actor.Context, job *mailbox.RecordJob, stats *Stats) bool {
	if sd.disk == nil || job.StoreKey != job.FullKey {
		return false
	}
	l := loadOf(job)
	span := sd.startSpan(l)
	t0 := trace.Now()
	found, err := sd.disk.Find(job.FullKey)
	if found == nil {
		span.Finish(0, err)
		if err != nil {
			sd.reject(job, err, stats)
		}
		return false
	}
	findNs := trace.Now() - t0
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() { root.Send(self, sd.load(l, found, span, findNs, stats)) }()
	return true
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

// preloadWait is one prefetch's loads not yet back at the store.
type preloadWait struct {
	pending int
	res     stages.StoreLoad
	done    chan stages.StoreLoad
}

// prefetch starts the loads of m's entries that are neither in memory nor
// in flight, each marked in flight with no request waiting yet: a request
// that comes meanwhile waits for the load, as for any other. Each load
// (find, read, check) runs off the store's turn.
func (s *store) prefetch(ctx actor.Context, m *prefetch) {
	sd := &s.disk
	w := &preloadWait{done: m.done}
	if sd.disk != nil {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		for _, e := range sd.disk.KnownFor(m.model, maxPrefetch) {
			fk, err := strconv.ParseUint(e.FullKey, 16, 64)
			if err != nil {
				continue // KnownFor holds only entries named by their full_key
			}
			if _, ok := s.defs[fk]; ok {
				continue
			}
			if _, ok := s.inflight[fk]; ok {
				continue
			}
			s.inflight[fk] = []*mailbox.RecordJob{}
			s.preloading[fk] = w
			w.pending++
			l := diskLoad{fullKey: fk, key: e.Key, model: m.model, trace: m.trace}
			go func() { root.Send(self, sd.find(l, s.stats)) }()
		}
	}
	if w.pending == 0 {
		w.done <- w.res
	}
}

// find finds and loads one entry off the store's turn.
func (sd *storeDisk) find(l diskLoad, stats *Stats) *diskLoaded {
	span := sd.startSpan(l)
	t0 := trace.Now()
	found, err := sd.disk.Find(l.fullKey)
	if found == nil {
		return failed(l, span, err, stats)
	}
	return sd.load(l, found, span, trace.Now()-t0, stats)
}

// failed ends a load that found nothing to use: a miss (err nil), or an
// entry rejected (moved aside) or unreadable, which is recorded again.
func failed(l diskLoad, span trace.StoreLoadSpan, err error, stats *Stats) *diskLoaded {
	span.Finish(0, err)
	m := &diskLoaded{key: l.fullKey}
	if err != nil {
		stats.StoreRejected.Add(1)
		m.rejected = rejection(l.key, err)
	}
	return m
}

func (sd *storeDisk) startSpan(l diskLoad) trace.StoreLoadSpan {
	_, span := sd.tracer.StartStoreLoad(l.trace.Context(context.Background()), trace.StoreLoadInfo{Key: l.key, FullKey: l.fullKey, Actor: "store"})
	return span
}

// load loads a found entry's Definition. Its store_load time is the find's
// (findNs) and the load's, not the wait between them.
func (sd *storeDisk) load(l diskLoad, found *diskstore.Found, span trace.StoreLoadSpan, findNs int64, stats *Stats) *diskLoaded {
	t0 := trace.Now()
	ld, err := found.Load(l.model)
	ns := findNs + trace.Now() - t0
	if ld == nil {
		return failed(l, span, err, stats)
	}
	span.Finish(int64(len(ld.Image)), nil)
	stats.Loaded.Add(1)
	// ld.Def is the host's part of the Definition (no tensor, scalar, fanin
	// or root pool): the device reads the rest at its first launch.
	d := &mailbox.Definition{Def: ld.Def, Image: ld.Image, Hash: ld.Def.ContentHash, Written: ld.Written}
	return &diskLoaded{key: l.fullKey, def: d, load: stages.StoreLoad{Loaded: 1, Bytes: int64(len(ld.Image)), Ns: ns}}
}

// reject counts an entry that could not be used and keeps why for the
// answer to the recording that replaces it.
func (sd *storeDisk) reject(job *mailbox.RecordJob, err error, stats *Stats) {
	stats.StoreRejected.Add(1)
	sd.rejected[job.StoreKey] = append(sd.rejected[job.StoreKey], rejection(job.Key, err))
}

func rejection(key string, err error) string {
	return fmt.Sprintf("graph %q: %v", key, err)
}

// diskLoaded takes a load's answer. A Definition is published to every
// request waiting for its key; one preloaded that no request waits for yet
// is kept, and the load is reported with the first request that comes. Its
// entry is unpinned at once: the Definition is in memory, and a preload
// may load keys no pass of this process calls, which must not hold the
// store over its limit by keeping eviction away from them. A miss or a rejection goes
// on as a miss for the first request waiting, if any; the rejection is
// reported with the recording that replaces the entry.
func (s *store) diskLoaded(ctx actor.Context, m *diskLoaded) {
	k := m.key
	waiters := s.inflight[k]
	if w := s.preloading[k]; w != nil {
		delete(s.preloading, k)
		w.add(m)
	}
	if m.def != nil {
		if len(waiters) == 0 {
			s.loadNotes[k] = m.load
			s.disk.disk.Unpin(k)
		}
		s.publish(ctx, k, m.def, func(r *mailbox.DefinitionReady) { r.Store = m.load })
		return
	}
	if m.rejected != "" {
		s.disk.rejected[k] = append(s.disk.rejected[k], m.rejected)
	}
	if len(waiters) == 0 {
		delete(s.inflight, k)
		s.askVerifies(ctx, k)
		return
	}
	s.missed(ctx, waiters[0])
}

// add counts one of the preload's loads, and answers once the last is in.
func (w *preloadWait) add(m *diskLoaded) {
	w.res.Add(m.load)
	if m.rejected != "" {
		w.res.Rejected = append(w.res.Rejected, m.rejected)
	}
	if w.pending--; w.pending == 0 {
		w.done <- w.res
	}
}

// store sends a built Definition to the writer.
func (sd *storeDisk) store(ctx actor.Context, job *mailbox.RecordJob, d *mailbox.Definition) {
	if sd.disk == nil || job.StoreKey != job.FullKey {
		return
	}
	ctx.Send(sd.writer, &diskPut{def: d.Def, image: d.Image, model: job.Model})
}

func (sd *storeDisk) takeRejected(key uint64) []string {
	r := sd.rejected[key]
	delete(sd.rejected, key)
	return r
}

// openDisk opens the store on disk Config.StoreDir names, if any.
func (rt *Runtime) openDisk() error {
	if rt.cfg.StoreDir == "" || rt.cfg.StoreDir == "off" {
		return nil
	}
	d, err := diskstore.Open(rt.cfg.StoreDir, rt.cfg.StoreMax)
	if err != nil {
		return err
	}
	rt.disk = d
	return nil
}

// spawnDisk starts the writer, before the store that sends to it.
func (rt *Runtime) spawnDisk(ctx actor.Context) {
	if rt.disk == nil {
		return
	}
	rt.diskWriter = ctx.Spawn(rt.Mailboxes.Props("store-writer", 0, func() actor.Actor {
		return &diskWriter{disk: rt.disk, stats: &rt.Stats, errs: &rt.diskErrs}
	}))
}

// flushDisk waits for every write asked for so far. A Definition is asked
// to be written before its answer leaves the store, so after a pass's
// result every one it built is on its way to disk.
func (rt *Runtime) flushDisk() {
	if rt.diskWriter == nil {
		return
	}
	if _, err := rt.sys.Root.RequestFuture(rt.diskWriter, &diskFlush{}, time.Minute).Result(); err != nil {
		rt.diskErrs.add(fmt.Errorf("definition store: waiting for the writes: %w", err))
	}
}

func (rt *Runtime) closeDisk() {
	if rt.disk != nil {
		_ = rt.disk.Close()
	}
}
