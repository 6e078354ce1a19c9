package actors

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
)

// TestChaos: 4 ranks, 64 keys, 200 passes, two of them in flight per rank,
// with recorder panics and device refusals injected at random (seeded, so a
// failure can be replayed with its seed). Every pass ends within its
// deadline with a result or an error that names what failed; no goroutine
// outlives the runtime; the runtime serves a clean pass at the end.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("200 passes")
	}
	const (
		seed   = 20261130
		ranks  = 4
		passes = 200
		names  = 16 // orchestration identities: each brings 64 new keys to record
	)
	before := runtime.NumGoroutine()

	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0))
	chance := func(p float64) bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64() < p
	}
	var injecting sync.Mutex
	on := true
	enabled := func() bool { injecting.Lock(); defer injecting.Unlock(); return on }
	hook := func(job *mailbox.RecordJob) {
		if enabled() && chance(0.05) {
			panic(fmt.Sprintf("chaos: recorder panic on %s", job.Key))
		}
	}
	sys := NewActorSystem(nil)
	rt, err := start(sys, Config{Recorders: 4}, hook)
	if err != nil {
		t.Fatal(err)
	}
	rt.imageHook = func(img *stages.RunImage) {
		if enabled() && chance(0.1) {
			// A view on a root the run does not have: the device refuses
			// the image, and serves the next one.
			switch nb, na := img.NumBound(), len(img.Args); {
			case nb > 0:
				a := img.BoundArg(nb - 1)
				a.Root = 1 << 30
				img.SetBoundArg(nb-1, a)
			case na > 0:
				img.Args[na-1].View.Root = 1 << 30
			}
		}
	}
	orchs := make([]*Orchestration, names)
	for i := range orchs {
		orchs[i] = keysModel{keys: 64, calls: 1}.orchestration(fmt.Sprintf("chaos-%d", i))
	}

	var wg sync.WaitGroup
	errs := make(chan error, passes)
	ok, failed := make([]int, ranks), make([]int, ranks)
	for rank := 0; rank < ranks; rank++ {
		for worker := 0; worker < 2; worker++ { // two callers per rank: passes overlap and queue
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := worker; i < passes/ranks; i += 2 {
					round := rank*passes + i
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					res, err := rt.Pass(ctx, orchs[(round/3)%names], rank, i)
					cancel()
					mu.Lock()
					switch {
					case err == nil && res != nil && res.Device != nil:
						ok[rank]++
					case err != nil && clearChaosError(err):
						failed[rank]++
					default:
						errs <- fmt.Errorf("rank %d pass %d: result %v, error %v", rank, i, res != nil, err)
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("passes per rank: ok %v, failed with an injected fault %v; recorder restarts %d", ok, failed, rt.Stats.Restarts.Load())
	total := 0
	for r := range ok {
		total += ok[r] + failed[r]
	}
	if total != passes {
		t.Fatalf("%d passes ended, want %d", total, passes)
	}

	injecting.Lock()
	on = false
	injecting.Unlock()
	clean := keysModel{keys: 64, calls: 2}.orchestration("chaos-clean")
	for rank := 0; rank < ranks; rank++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := rt.Pass(ctx, clean, rank, passes)
		cancel()
		if err != nil || len(res.Warnings) != 0 || res.Counts.GraphSubmissions != 128 {
			t.Fatalf("clean pass on rank %d: %v", rank, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sys.Shutdown()
	// Goroutines end asynchronously after Shutdown; poll for the count to
	// come back, with a deadline.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// clearChaosError says whether a failed pass names one of the injected
// faults (a timeout or a lost pass is not one).
func clearChaosError(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrStopped) {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "chaos: recorder panic") || strings.Contains(s, "arena_h2d:") || strings.Contains(s, "device:")
}
