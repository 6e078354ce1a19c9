package actors

import (
	"context"
	"fmt"
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
// process; it is counted and kept for the report.
type diskWriter struct {
	disk  *diskstore.Store
	stats *Stats
	errs  *diskErrors
}

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
		if err := w.disk.Put(m.def, m.image, m.model); err != nil {
			w.errs.add(err)
			return
		}
		w.stats.StoreWritten.Add(1)
	case *diskFlush:
		ctx.Respond(true)
	}
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
	job      *mailbox.RecordJob
	def      *mailbox.Definition
	load     stages.StoreLoad
	rejected string // why the entry on disk was refused, if it was
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
	_, span := sd.tracer.StartStoreLoad(job.Trace.Context(context.Background()), trace.StoreLoadInfo{Key: job.Key, FullKey: job.FullKey, Actor: "store"})
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
	go func() { root.Send(self, sd.load(job, found, span, findNs, stats)) }()
	return true
}

// load loads a found entry's Definition. Its store_load time is the find's
// (findNs) and the load's, not the wait between them.
func (sd *storeDisk) load(job *mailbox.RecordJob, found *diskstore.Found, span trace.StoreLoadSpan, findNs int64, stats *Stats) *diskLoaded {
	t0 := trace.Now()
	l, err := found.Load(job.Model)
	ns := findNs + trace.Now() - t0
	if l == nil {
		span.Finish(0, err)
		m := &diskLoaded{job: job}
		if err != nil {
			// Rejected (moved aside) or unreadable: recorded again.
			stats.StoreRejected.Add(1)
			m.rejected = rejection(job, err)
		}
		return m
	}
	span.Finish(int64(len(l.Image)), nil)
	stats.Loaded.Add(1)
	// l.Def is the host's part of the Definition (no tensor, scalar, fanin
	// or root pool): the device reads the rest at its first launch.
	d := &mailbox.Definition{Def: l.Def, Image: l.Image, Hash: l.Def.ContentHash, Written: l.Written}
	return &diskLoaded{job: job, def: d, load: stages.StoreLoad{Loaded: 1, Bytes: int64(len(l.Image)), Ns: ns}}
}

// reject counts an entry that could not be used and keeps why for the
// answer to the recording that replaces it.
func (sd *storeDisk) reject(job *mailbox.RecordJob, err error, stats *Stats) {
	stats.StoreRejected.Add(1)
	sd.rejected[job.StoreKey] = append(sd.rejected[job.StoreKey], rejection(job, err))
}

func rejection(job *mailbox.RecordJob, err error) string {
	return fmt.Sprintf("graph %q: %v", job.Key, err)
}

// diskLoaded takes a load's answer: a Definition is published to every
// request waiting for its key; a miss or a rejection goes on as a miss.
func (s *store) diskLoaded(ctx actor.Context, m *diskLoaded) {
	if m.def != nil {
		s.publish(ctx, m.job, m.def, func(r *mailbox.DefinitionReady) { r.Store = m.load })
		return
	}
	if m.rejected != "" {
		k := m.job.StoreKey
		s.disk.rejected[k] = append(s.disk.rejected[k], m.rejected)
	}
	s.missed(ctx, m.job)
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
