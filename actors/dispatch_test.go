package actors

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Every run scheduled reaches a goroutine, whichever way it goes (a
// spinning worker, a parked one, or a goroutine of its own), with many
// schedulers at once and workers coming and going from their spin.
func TestDispatcherRunsEverything(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the spinning path needs two Ps")
	}
	d := newWarmDispatcher(4, spinPolicyFor(250*time.Microsecond))
	if !d.spins {
		t.Fatal("workers do not spin with two Ps")
	}
	defer d.close()
	const senders, runs = 8, 2000
	var wg sync.WaitGroup
	wg.Add(senders * runs)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for range senders {
		go func() {
			for i := range runs {
				d.Schedule(wg.Done)
				if i%64 == 0 {
					runtime.Gosched() // let workers finish and spin again
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("not every run ran: %d tokens, %d in spin", d.tokens.Load(), len(d.spin))
	}
}

// A run scheduled right after another one finished goes to the worker
// spinning after it: a hop with no thread to wake.
func TestDispatcherHandsToSpinner(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the spinning path needs two Ps")
	}
	d := newWarmDispatcher(2, spinPolicy{For: time.Hour, Preempted: time.Hour}) // spins until the next run or close
	defer d.close()
	ran := make(chan struct{}, 1)
	// Until a worker has run something and spins (a run scheduled before
	// the workers park gets a goroutine of its own).
	deadline := time.Now().Add(time.Minute)
	for d.tokens.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no worker spins after a run")
		}
		d.Schedule(func() { ran <- struct{}{} })
		<-ran
		runtime.Gosched()
	}
	h0 := d.handed.Load()
	d.Schedule(func() { ran <- struct{}{} })
	<-ran
	if n := d.handed.Load() - h0; n != 1 {
		t.Fatalf("%d runs handed to a spinning worker, want 1", n)
	}
}

// close ends the workers, spinning or parked; a run scheduled after it
// still runs.
func TestDispatcherClose(t *testing.T) {
	before := runtime.NumGoroutine()
	d := newWarmDispatcher(3, spinPolicy{For: time.Hour, Preempted: time.Hour})
	ran := make(chan struct{}, 2)
	d.Schedule(func() { ran <- struct{}{} })
	<-ran
	d.close()
	d.Schedule(func() { ran <- struct{}{} })
	<-ran
	deadline := time.Now().Add(time.Minute)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the dispatcher", runtime.NumGoroutine(), before)
		}
		runtime.Gosched()
	}
}

// A spinner that finds its core was taken (a gap between two looks) stops,
// and no worker spins for the quiet period after.
func TestDispatcherQuietWhenPreempted(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the spinning path needs two Ps")
	}
	// Every gap is a preemption.
	d := newWarmDispatcher(0, spinPolicy{For: time.Hour, Preempted: time.Nanosecond, Quiet: time.Hour})
	defer d.close()
	if fn := d.spinning(); fn != nil {
		t.Fatal("a spinner got a run nobody scheduled")
	}
	if q := d.quietUntil.Load(); q <= time.Now().UnixNano() {
		t.Fatalf("quiet until %d, not after now", q)
	}
	if fn := d.spinning(); fn != nil || d.tokens.Load() != 0 {
		t.Fatalf("a worker spins in the quiet period: %d tokens", d.tokens.Load())
	}
}

// A run that finds no spinner while one spins (more runs than spinners:
// work is queued on another P) is counted, and stops the spinner, which
// would keep its P from stealing that work.
func TestDispatcherSpinnerYieldsToMissedRuns(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the spinning path needs two Ps")
	}
	// Counted: a spinner registered, no token free.
	d0 := newWarmDispatcher(0, spinPolicy{})
	d0.spinners.Store(1)
	ran := make(chan struct{})
	d0.Schedule(func() { close(ran) }) // no worker: a goroutine of its own
	<-ran
	if n := d0.missed.Load(); n != 1 {
		t.Fatalf("missed %d, want 1", n)
	}

	d := newWarmDispatcher(0, spinPolicy{For: time.Hour, Preempted: time.Hour})
	defer d.close()
	out := make(chan func(), 1)
	go func() { out <- d.spinning() }()
	deadline := time.Now().Add(time.Minute)
	for d.tokens.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the spinner never spun")
		}
		runtime.Gosched()
	}
	d.missed.Add(1) // as Schedule does when it finds no token
	select {
	case fn := <-out:
		if fn != nil {
			t.Fatal("the spinner got a run nobody scheduled")
		}
	case <-time.After(time.Minute):
		t.Fatal("the spinner kept spinning after a missed run")
	}
	if n := d.tokens.Load(); n != 0 {
		t.Fatalf("%d tokens left after the spinner stopped", n)
	}
}
