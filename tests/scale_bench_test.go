package tests

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/internal/benchunit"
	"github.com/hbg-dev/hbg/stages"
)

// The scaling benchmarks (issue 28): each runs one kind of work at sizes a
// factor of 4 or more apart and reports its cost per unit of that work
// (ns/<unit> of wall, B/<unit> allocated), so that a cost that grows faster
// than the work shows as a per-unit cost that grows with the size.
// BENCHMARKS.md tabulates them and tools/benchplot draws them.

// keysOrch is one small block called with n distinct keys, one call each
// ("k0".."k{n-1}"): one task per body, reading its row of x and writing its
// row of y.
func keysOrch(n int) *actors.Orchestration {
	entry := []stages.Root{
		{Name: "x", Kind: stages.RootEntry, DType: stages.FP32, Shape: []int64{int64(n), 16}, Elems: int64(n) * 16},
		{Name: "y", Kind: stages.RootEntryOutput, DType: stages.FP32, Shape: []int64{int64(n), 16}, Elems: int64(n) * 16},
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	body := func(o stages.Submitter, b *stages.Boundary) error {
		o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 0, -1}, BlockNum: 1,
			Args: []stages.Arg{b.Tensors[0], b.Tensors[1]}, Scalars: []stages.Scalar{b.Scalars[0]}})
		return nil
	}
	return &actors.Orchestration{
		Name:    fmt.Sprint("keys-", n),
		Entry:   entry,
		Kernels: []stages.Kernel{{Name: "row", Core: stages.KindAIV, Code: "row"}},
		Run: func(o stages.Submitter) error {
			bw, _ := o.(stages.BoundaryWriter)
			call := stages.GraphCall{Scalars: []uint64{0}, Body: body}
			var own [2]stages.Arg
			for i := range keys {
				b := own[:]
				if bw != nil {
					b = bw.GraphBoundary(2)
				}
				b[0] = stages.Arg{Tag: stages.TagInput, View: stages.NewView(0, int64(i)*16, stages.FP32, 16)}
				b[1] = stages.Arg{Tag: stages.TagInOut, View: stages.NewView(1, int64(i)*16, stages.FP32, 16)}
				call.Key, call.Boundary, call.Scalars[0] = keys[i], b, uint64(i)
				o.Graph(&call)
			}
			return nil
		},
	}
}

// tasksOrch is n ordinary tasks over a ring of 256 roots: task i reads
// root i-1 and updates root i, so each has one dependency and every root
// one writer in the TensorMap at a time (the common case of a decode
// step's buffers).
func tasksOrch(n int) *actors.Orchestration {
	const ring = 256
	entry := make([]stages.Root, ring)
	for i := range entry {
		entry[i] = stages.Root{Name: fmt.Sprint("r", i), Kind: stages.RootEntryOutput, DType: stages.FP32, Shape: []int64{16}, Elems: 16}
	}
	return &actors.Orchestration{
		Name:    fmt.Sprint("tasks-", n),
		Entry:   entry,
		Kernels: []stages.Kernel{{Name: "step", Core: stages.KindAIV, Code: "step"}},
		Run: func(o stages.Submitter) error {
			t := stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 0, -1}, BlockNum: 1, Args: make([]stages.Arg, 2)}
			for i := 0; i < n; i++ {
				t.Args[0] = stages.Arg{Tag: stages.TagInput, View: stages.NewView(stages.RootID((i+ring-1)%ring), 0, stages.FP32, 16)}
				t.Args[1] = stages.Arg{Tag: stages.TagInOut, View: stages.NewView(stages.RootID(i%ring), 0, stages.FP32, 16)}
				o.Submit(&t)
			}
			return nil
		},
	}
}

func memNow() *runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return &m
}

// BenchmarkScaleKeys is one warm pass of n distinct keys (Definitions kept,
// the device skipped), per Graph call: the case that was quadratic (every
// call scanned the pass's Definitions), 10^2 to 10^5 keys.
func BenchmarkScaleKeys(b *testing.B) {
	for _, n := range []int{100, 1000, 4000, 16000, 64000, 100000} {
		b.Run(fmt.Sprint("keys=", n), func(b *testing.B) {
			rt := startRuntime(b, actors.Config{SkipDevice: true, PassTimeout: 10 * time.Minute})
			orch := keysOrch(n)
			ctx := context.Background()
			res, err := rt.Pass(ctx, orch, 0, 0)
			if err != nil {
				b.Fatal(err)
			}
			if res.Pass.BuiltDefinitions != n {
				b.Fatalf("cold pass built %d Definitions, want %d", res.Pass.BuiltDefinitions, n)
			}
			round := 1
			u := benchunit.Start(b)
			for b.Loop() {
				res, err := rt.Pass(ctx, orch, 0, round)
				if err != nil {
					b.Fatal(err)
				}
				if res.Counts.GraphSubmissions != n || res.Pass.BuiltDefinitions != 0 {
					b.Fatalf("warm pass: %+v, built %d", res.Counts, res.Pass.BuiltDefinitions)
				}
				round++
			}
			u.Report(n, "key")
		})
	}
}

// BenchmarkScaleKeysCold is the first pass of n new keys on a fresh
// runtime, per key: each is recorded, built and uploaded; with a store on
// disk (store) each is also written there, and the pass's time then
// includes waiting for the writes (Runtime.FlushStore), as a process that
// ends after its pass waits. The store's case must cost at most twice the
// other's. store-shm is the store on tmpfs (/dev/shm), where files cost no
// disk: the part of the store's cost that is hbg's code.
func BenchmarkScaleKeysCold(b *testing.B) {
	for _, where := range []string{"mem", "store", "store-shm"} {
		store := where != "mem"
		shm := "/dev/shm"
		if st, err := os.Stat(shm); where == "store-shm" && (err != nil || !st.IsDir()) {
			continue
		}
		for _, n := range []int{40, 160, 640, 2560, 10240} {
			b.Run(fmt.Sprint(where, "/keys=", n), func(b *testing.B) {
				orch := keysOrch(n)
				var cpu, passNs int64
				var heap uint64
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					cfg := actors.Config{SkipDevice: true, PassTimeout: 10 * time.Minute}
					switch where {
					case "store":
						cfg.StoreDir = b.TempDir()
					case "store-shm":
						// The same store in memory (tmpfs): what the
						// store's code costs without the disk's.
						dir, err := os.MkdirTemp(shm, "hbg-bench-")
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { os.RemoveAll(dir) })
						cfg.StoreDir = dir
					}
					sys := actors.NewActorSystem(nil)
					rt, err := actors.Start(sys, cfg)
					if err != nil {
						b.Fatal(err)
					}
					runtime.GC()
					if i == 0 {
						b.ResetTimer()
					}
					h0 := memNow().TotalAlloc
					b.StartTimer()
					c0, t0 := benchunit.CPUNs(), time.Now()
					res, err := rt.Pass(context.Background(), orch, 0, 0)
					passNs += time.Since(t0).Nanoseconds()
					if err != nil {
						b.Fatal(err)
					}
					if errs := rt.FlushStore(); len(errs) > 0 {
						b.Fatal(errs)
					}
					cpu += benchunit.CPUNs() - c0
					b.StopTimer()
					heap += memNow().TotalAlloc - h0
					if res.Pass.BuiltDefinitions != n {
						b.Fatalf("built %d, want %d", res.Pass.BuiltDefinitions, n)
					}
					if store && rt.Stats.StoreWritten.Load() != int64(n) {
						b.Fatalf("stored %d, want %d", rt.Stats.StoreWritten.Load(), n)
					}
					rt.Stop(context.Background())
					sys.Shutdown()
					b.StartTimer()
				}
				// The timed parts' CPU time and allocations only (the
				// runtime's start and stop are not the pass's).
				benchunit.ReportTotals(b, n, "key", cpu, heap)
				// The pass alone, before the wait for the writes (which
				// go on behind it, on the writer actor).
				b.ReportMetric(float64(passNs)/float64(b.N)/float64(n), "pass-ns/key")
			})
		}
	}
}

// BenchmarkScaleTasks is one pass of n ordinary tasks (the device skipped),
// per task: submission, the TensorMap, the run image and its copy, 10^3 to
// 10^6 tasks.
func BenchmarkScaleTasks(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000, 64000, 256000, 1024000} {
		b.Run(fmt.Sprint("tasks=", n), func(b *testing.B) {
			rt := startRuntime(b, actors.Config{SkipDevice: true, PassTimeout: 10 * time.Minute})
			orch := tasksOrch(n)
			ctx := context.Background()
			if _, err := rt.Pass(ctx, orch, 0, 0); err != nil {
				b.Fatal(err)
			}
			round := 1
			u := benchunit.Start(b)
			for b.Loop() {
				res, err := rt.Pass(ctx, orch, 0, round)
				if err != nil {
					b.Fatal(err)
				}
				if res.Counts.OrdinaryTasks != n {
					b.Fatalf("%d ordinary tasks, want %d", res.Counts.OrdinaryTasks, n)
				}
				round++
			}
			u.Report(n, "task")
		})
	}
}

// BenchmarkScaleRanks is a warm DSv4 full pass on each of r ranks of one
// process at once (the device skipped), per rank-pass: 1 to 64 ranks on
// this machine's two cores, so the wall per rank-pass is throughput.
func BenchmarkScaleRanks(b *testing.B) {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	for _, r := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprint("ranks=", r), func(b *testing.B) {
			rt := startRuntime(b, actors.Config{SkipDevice: true})
			ctx := context.Background()
			round := 0
			all := func() {
				ps := make([]*actors.Pending, r)
				for k := range ps {
					p, err := rt.Ask(ctx, orch, k, round)
					if err != nil {
						b.Fatal(err)
					}
					ps[k] = p
				}
				for _, p := range ps {
					if _, err := p.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				round++
			}
			all() // cold: every rank records (each its own Definitions' uploads)
			u := benchunit.Start(b)
			for b.Loop() {
				all()
			}
			u.Report(r, "rank-pass")
		})
	}
}
