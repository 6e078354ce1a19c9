package actors

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// warmDispatcher runs actors' mailboxes on a few long-lived goroutines
// instead of a new goroutine per mailbox run (protoactor's default). A new
// goroutine starts on a small stack, and a pass's turn on the submission
// (the model interpreter's recursion, a run image's encoding)
// grows it by copying, every time: about 5% of a warm DSv4 pass's CPU went
// to runtime.newstack and newproc. A worker keeps its grown stack from one
// run to the next.
//
// With Config.SpinFor, a worker that finishes a run spins for a moment
// before it parks, and a run scheduled meanwhile goes to it. Waking a
// parked worker readies a goroutine while a P is idle, so the Go scheduler
// wakes an OS thread (a futex call, and on a VM an interrupt to the other
// core) and that thread hunts for work beside the running actor. On a warm
// DSv4 pass that was 20-40 µs at the handoff from host_orch to the replay
// (all of graph_upload, until the replay ran on its sender's goroutine), and
// host_orch ran slower than the same code on one
// goroutine; with a worker spinning, both went while the other core was
// free, and host_orch got slower still while the VM's host shared it (so
// spinning is off by default). Spinning takes a core, so it stops when the
// machine is oversubscribed, and when runs outnumber
// spinners (a cold pass's recordings): a spinner's P then takes the spinner
// back from the global queue before it would steal the runs queued on the
// other P.
//
// A run is handed to a spinning worker, else to a parked one; when none is
// idle (every worker busy, or the runtime stopped) it gets a goroutine of
// its own, as before, so a mailbox never waits for a worker. The mailbox
// guarantees one run at a time per actor, whichever goroutine carries it.
type warmDispatcher struct {
	work chan func() // parked workers receive here
	// spin carries runs to spinning workers. tokens counts the spinning
	// workers no run has claimed: Schedule takes one before it sends, a
	// worker gives one back to stop spinning, and a worker that cannot
	// (every token claimed) receives the run that is on its way. So
	// tokens + len(spin) is the number of spinning workers, and no run is
	// left in spin with nobody to take it.
	spin     chan func()
	tokens   atomic.Int32
	spinners atomic.Int32
	// spins is false with one P: a spinning worker would hold the only
	// processor, and a handoff there wakes no thread anyway.
	spins  bool
	policy spinPolicy
	// quietUntil (Unix ns): no worker spins before it.
	quietUntil atomic.Int64
	// missed counts the runs that found no spinner: more runs than
	// spinners (a cold pass's recordings), where a spinner would hold a P
	// the scheduler should give to the goroutines waiting elsewhere.
	missed atomic.Uint64
	// handed counts the runs handed to a spinning worker.
	handed atomic.Uint64
	stop   chan struct{}
	once   sync.Once
}

// dispatchThroughput is protoactor's default: messages a run processes
// before it yields.
const dispatchThroughput = 300

// maxSpinners bounds the workers spinning at once: a pass's messages follow
// one another, so one spinner takes the next run while the other waits out
// the submission's turn for its handoff; more would only take the cores
// other work needs.
const maxSpinners = 2

// spinPolicy is how workers spin: for how long after a run (For, 0: never),
// what gap between two looks of a spinner says the OS took its core
// (Preempted), and how long workers then park at once (Quiet).
type spinPolicy struct{ For, Preempted, Quiet time.Duration }

// spinYield is how long a spinner polls before it lets the goroutines
// queued on its P run.
const spinYield = 20 * time.Microsecond

// spinPolicyFor is Config.SpinFor's policy. An OS preemption takes a core
// for a scheduler slice (ms); a shorter gap (an interrupt, a VM exit: 20 µs
// gaps were common on a quiet 2-core VM) is not one and must not stop
// spinning.
func spinPolicyFor(d time.Duration) spinPolicy {
	return spinPolicy{For: d, Preempted: 200 * time.Microsecond, Quiet: 20 * time.Millisecond}
}

func newWarmDispatcher(workers int, policy spinPolicy) *warmDispatcher {
	d := &warmDispatcher{
		work: make(chan func()), spin: make(chan func(), workers), stop: make(chan struct{}),
		policy: policy, spins: policy.For > 0 && runtime.GOMAXPROCS(0) > 1,
	}
	for range workers {
		go d.worker()
	}
	return d
}

func (d *warmDispatcher) worker() {
	for {
		select {
		case fn := <-d.work:
			for fn != nil {
				fn()
				fn = d.spinning()
			}
		case <-d.stop:
			return
		}
	}
}

// spinning waits a moment for a run; nil when none came, or when enough
// workers spin already. It yields once first, so that what the last run
// readied on this P (a caller woken by its answer) goes first, then polls,
// yielding only every spinYield: runtime.Gosched puts the spinner on the
// global queue and wakes an idle P's thread, the cost a spinner is there
// to save, and the spinner may then wait there behind a long run while the
// run it claimed waits for it.
func (d *warmDispatcher) spinning() func() {
	if !d.spins || d.stopped() {
		return nil
	}
	if d.spinners.Add(1) > maxSpinners {
		d.spinners.Add(-1)
		return nil
	}
	defer d.spinners.Add(-1)
	if time.Now().UnixNano() < d.quietUntil.Load() {
		return nil
	}
	runtime.Gosched()
	last := time.Now()
	yielded := last
	missed := d.missed.Load()
	d.tokens.Add(1)
	deadline := last.Add(d.policy.For)
	for i := 1; ; i++ {
		select {
		case fn := <-d.spin:
			return fn
		default:
		}
		if i&63 != 0 {
			continue
		}
		now := time.Now()
		preempted := now.Sub(last) > d.policy.Preempted
		if preempted {
			// The OS ran something else on this core: the machine is
			// oversubscribed, and a spinner there takes time from the
			// threads doing work. Park, and spin no more for a while.
			d.quietUntil.Store(now.Add(d.policy.Quiet).UnixNano())
		}
		if now.Sub(yielded) > spinYield {
			// Goroutines queued on this P (a run that found every
			// worker busy, a recording's) go first; with both Ps
			// busy this wakes no thread.
			runtime.Gosched()
			now = time.Now()
			yielded = now
		}
		last = now
		// A run that found no spinner while this one spun: work is
		// waiting on another P's queue, which a spinner here would keep
		// this P from stealing.
		busy := d.missed.Load() != missed
		if preempted || busy || now.After(deadline) || d.stopped() {
			if d.claim() {
				return nil // our token back: nobody is sending to us
			}
			return <-d.spin // a Schedule took our token; its run is on its way
		}
	}
}

func (d *warmDispatcher) stopped() bool {
	select {
	case <-d.stop:
		return true
	default:
		return false
	}
}

// claim takes a spinning worker's token.
func (d *warmDispatcher) claim() bool {
	for {
		n := d.tokens.Load()
		if n <= 0 {
			return false
		}
		if d.tokens.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Schedule implements actor.Dispatcher.
func (d *warmDispatcher) Schedule(fn func()) {
	if d.claim() {
		d.spin <- fn // never blocks: at most one run per spinning worker
		d.handed.Add(1)
		return
	}
	if d.spinners.Load() > 0 {
		d.missed.Add(1)
	}
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

// dispatchWorkers is the workers per runtime: a rank's submission,
// uploader and device, and the store, with room to spare; more runs at once
// get goroutines of their own.
const dispatchWorkers = 8

// props is an actor's props with an instrumented mailbox (mailbox.Registry)
// on the runtime's warm dispatcher.
func (rt *Runtime) props(name string, bound int, producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	return rt.Mailboxes.Props(name, bound, producer, append(opts, actor.WithDispatcher(rt.dispatch))...)
}

// inlineProps is an actor's props with an instrumented unbounded mailbox
// whose turns run on the goroutine that posts to it (protoactor's
// synchronized dispatcher): for an actor whose every turn is the short
// tail of its sender's, which a worker's wake-up would only delay.
func (rt *Runtime) inlineProps(name string, producer actor.Producer) *actor.Props {
	return rt.Mailboxes.Props(name, 0, producer, actor.WithDispatcher(actor.NewSynchronizedDispatcher(dispatchThroughput)))
}
