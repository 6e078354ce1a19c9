package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// warmDispatcher runs actors' mailboxes on a few long-lived goroutines
// instead of a new goroutine per mailbox run (protoactor's default). A new
// goroutine starts on a small stack, and a pass's turn on the submission
// (the model interpreter's recursion, a run image's encoding on the replay)
// grows it by copying, every time: about 5% of a warm DSv4 pass's CPU went
// to runtime.newstack and newproc. A worker keeps its grown stack from one
// run to the next.
//
// A run is handed to an idle worker; when none is idle (every worker busy,
// or the runtime stopped) it gets a goroutine of its own, as before, so a
// mailbox never waits for a worker. The mailbox guarantees one run at a
// time per actor, whichever goroutine carries it.
type warmDispatcher struct {
	work chan func()
	stop chan struct{}
	once sync.Once
}

// dispatchThroughput is protoactor's default: messages a run processes
// before it yields.
const dispatchThroughput = 300

func newWarmDispatcher(workers int) *warmDispatcher {
	d := &warmDispatcher{work: make(chan func()), stop: make(chan struct{})}
	for range workers {
		go d.worker()
	}
	return d
}

func (d *warmDispatcher) worker() {
	for {
		select {
		case fn := <-d.work:
			fn()
		case <-d.stop:
			return
		}
	}
}

// Schedule implements actor.Dispatcher.
func (d *warmDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go fn()
	}
}

// Throughput implements actor.Dispatcher.
func (d *warmDispatcher) Throughput() int { return dispatchThroughput }

// close ends the workers as they finish what they run; later runs get
// goroutines of their own.
func (d *warmDispatcher) close() { d.once.Do(func() { close(d.stop) }) }

// dispatchWorkers is the workers per runtime: a rank's submission, replay,
// uploader and device, and the store, with room to spare; more runs at once
// get goroutines of their own.
const dispatchWorkers = 8

// props is an actor's props with an instrumented mailbox (mailbox.Registry)
// on the runtime's warm dispatcher.
func (rt *Runtime) props(name string, bound int, producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	return rt.Mailboxes.Props(name, bound, producer, append(opts, actor.WithDispatcher(rt.dispatch))...)
}
