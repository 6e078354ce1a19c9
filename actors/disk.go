package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/stages"
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

// StoreErrors returns the store's write failures so far (at most 8).
func (rt *Runtime) StoreErrors() []error {
	rt.diskErrs.mu.Lock()
	defer rt.diskErrs.mu.Unlock()
	return append([]error(nil), rt.diskErrs.errs...)
}

// Disk is the Definition store on disk, nil when there is none.
func (rt *Runtime) Disk() *diskstore.Store { return rt.disk }
