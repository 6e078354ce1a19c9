package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/diskstore"
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
	sig   []byte
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
		w.batch = append(w.batch, diskstore.Item{Def: m.def, Image: m.image, Model: m.model, Signature: m.sig})
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
