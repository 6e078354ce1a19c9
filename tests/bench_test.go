package tests

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/internal/benchunit"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// BenchmarkPassWarm is one warm DSv4 pass per form, Definitions kept, the
// device skipped (its simulation has a benchmark of its own): the control
// plane, host_orch + graph_upload + arena_h2d, through the actors. Medians
// of the phases are reported as metrics, and the process's CPU time per
// pass (cpu-µs/op: every actor, the garbage collector), which a loaded
// machine inflates less than the wall clock.
func BenchmarkPassWarm(b *testing.B) {
	m := loadDSv4(b)
	// full-spin: the same with workers spinning before they park
	// (Config.SpinFor), which pays or not with the machine. full-evicted:
	// the same with the caches emptied before each pass (evictCaches,
	// untimed), as a full pass finds them after another form's pass in
	// `hbgrun compare`'s default order.
	for _, form := range []string{"eager", "pair", "blocks", "full", "step", "full-spin", "full-evicted"} {
		b.Run(form, func(b *testing.B) {
			cfg := actors.Config{SkipDevice: true}
			evict := form == "full-evicted"
			switch form {
			case "full-spin":
				form, cfg.SpinFor = "full", 250*time.Microsecond
			case "full-evicted":
				form = "full"
			}
			rt := startRuntime(b, cfg)
			orch := orchestration(m, form)
			ctx := context.Background()
			if _, err := rt.Pass(ctx, orch, 0, 0); err != nil {
				b.Fatal(err)
			}
			var passes []trace.Pass
			var walls []time.Duration
			round := 1
			b.ReportAllocs()
			c0 := benchunit.CPUNs()
			for b.Loop() {
				if evict {
					b.StopTimer()
					evictCaches()
					b.StartTimer()
				}
				t0 := time.Now()
				res, err := rt.Pass(ctx, orch, 0, round)
				walls = append(walls, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				passes = append(passes, res.Pass)
				round++
			}
			if !evict { // the sweeps' CPU is not the passes'
				b.ReportMetric(float64(benchunit.CPUNs()-c0)/float64(b.N)/1e3, "cpu-µs/op")
			}
			// The caller's wall per pass, median: ns/op is a mean, which
			// a few passes preempted by other processes move.
			slices.Sort(walls)
			b.ReportMetric(float64(walls[len(walls)/2].Nanoseconds())/1e3, "pass-µs")
			reportPhases(b, passes)
		})
	}
}

// BenchmarkPassCold is a DSv4 pass on a fresh runtime: it records, builds
// and uploads every Definition.
func BenchmarkPassCold(b *testing.B) {
	m := loadDSv4(b)
	for _, form := range []string{"pair", "blocks", "full", "step"} {
		b.Run(form, func(b *testing.B) {
			orch := orchestration(m, form)
			var passes []trace.Pass
			var cpu int64
			for b.Loop() {
				b.StopTimer()
				sys := actors.NewActorSystem(nil)
				rt, err := actors.Start(sys, actors.Config{SkipDevice: true})
				if err != nil {
					b.Fatal(err)
				}
				// A fresh process has no garbage: collect what the earlier
				// iterations' runtimes left (each ~5 MB), or its marking
				// lands in this timed pass.
				runtime.GC()
				b.StartTimer()
				c0 := benchunit.CPUNs()
				res, err := rt.Pass(context.Background(), orch, 0, 0)
				cpu += benchunit.CPUNs() - c0
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				passes = append(passes, res.Pass)
				rt.Stop(context.Background())
				sys.Shutdown()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu)/float64(b.N)/1e3, "cpu-µs/op")
			reportPhases(b, passes)
		})
	}
}

func reportPhases(b *testing.B, passes []trace.Pass) {
	for i := range passes {
		passes[i].Round, passes[i].Cold = 1, false // one class for the summary
	}
	t := trace.Summarize(passes)
	b.ReportMetric(float64(t.Warm.Phases[trace.PhaseHostOrch].MedianNs)/1e3, "host_orch-µs")
	b.ReportMetric(float64(t.Warm.Phases[trace.PhaseGraphUpload].MedianNs)/1e3, "graph_upload-µs")
	b.ReportMetric(float64(t.Warm.Phases[trace.PhaseArenaH2D].MedianNs)/1e3, "arena_h2d-µs")
	b.ReportMetric(float64(t.Warm.ControlPlane.MedianNs)/1e3, "control-µs")
}

// BenchmarkUploadFull uploads DSv4's 8 full-form Definitions to a fresh
// device: each image is copied, decoded and verified (content hash, bounds,
// topology) and kept as a shared device object.
func BenchmarkUploadFull(b *testing.B) {
	m := loadDSv4(b)
	images := definitionsOf(b, m, "full")
	if len(images) != 8 {
		b.Fatalf("%d Definitions, want 8", len(images))
	}
	total := 0
	for _, img := range images {
		total += len(img)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		dev := npu.New(npu.Config{})
		dev.RegisterEntry(m.EntryRoots())
		dev.RegisterKernels(m.Kernels())
		b.StartTimer()
		for _, img := range images {
			if _, err := dev.Upload(img); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(total), "image-bytes")
}

// BenchmarkRunOverlap is `hbgrun run --rounds 50` of DSv4's full form with
// the device on, one rank: passes/s with passes overlapped (the default, two
// in flight) and with host and device taking turns (in-flight=1).
func BenchmarkRunOverlap(b *testing.B) {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	const rounds = 50
	for _, inFlight := range []int{1, 2} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			var idle []int64
			var secs float64
			for b.Loop() {
				b.StopTimer()
				sys := actors.NewActorSystem(nil)
				rt, err := actors.Start(sys, actors.Config{InFlight: inFlight})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 := time.Now()
				passes, err := rt.Run(context.Background(), actors.RunSpec{Orchestration: orch, Rounds: rounds, Ranks: 1})
				secs += time.Since(t0).Seconds()
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for _, p := range passes[1:] {
					idle = append(idle, p.Pass.DeviceIdleNs)
				}
				rt.Stop(context.Background())
				sys.Shutdown()
				b.StartTimer()
			}
			slices.Sort(idle)
			b.ReportMetric(float64(rounds*b.N)/secs, "passes/s")
			b.ReportMetric(float64(idle[len(idle)/2])/1e3, "device_idle-µs")
		})
	}
}

// BenchmarkSoakWarm is 10,000 warm DSv4 full passes (device skipped) on one
// runtime: the heap and the goroutine count after them must be those after
// the first 100 (flat), else it fails. Not run by CI (benchmarks are not):
// go test -run '^$' -bench SoakWarm -benchtime 1x ./tests
func BenchmarkSoakWarm(b *testing.B) {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	const passes, settle = 10_000, 100
	measure := func() (uint64, int) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, runtime.NumGoroutine()
	}
	for b.Loop() {
		rt := startRuntime(b, actors.Config{SkipDevice: true})
		var heap0 uint64
		var gor0 int
		for r := 0; r < passes; r++ {
			if _, err := rt.Pass(context.Background(), orch, 0, r); err != nil {
				b.Fatal(err)
			}
			if r == settle {
				heap0, gor0 = measure()
			}
		}
		heap1, gor1 := measure()
		b.ReportMetric(float64(heap0)/(1<<20), "heap-MiB@100")
		b.ReportMetric(float64(heap1)/(1<<20), "heap-MiB@10000")
		b.ReportMetric(float64(gor1-gor0), "goroutines-delta")
		// Flat: less than one run image (~40 KiB) of growth per 100 passes
		// would still be 4 MiB over 10,000; allow 1 MiB.
		if heap1 > heap0+1<<20 || gor1 > gor0 {
			b.Fatalf("not flat: heap %d -> %d bytes, goroutines %d -> %d", heap0, heap1, gor0, gor1)
		}
	}
}

// BenchmarkRecordDSv4 records and builds DSv4 full's 8 Definitions (1679
// nodes) as the recorder actors do (stages.Recorder.RecordBody, then
// Publish), in line on one goroutine: warm on one recorder used again,
// cold on a fresh prewarmed recorder per Definition (newRecorder's
// Reserve), as a fresh runtime's recorders are.
func BenchmarkRecordDSv4(b *testing.B) {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	h := stages.NewHost(0, stages.PassConfig{SkipDevice: true})
	h.Begin(orch.Name, orch.Entry, len(orch.Kernels), 0)
	if err := orch.Run(hostSubmitter{h}); err != nil {
		b.Fatal(err)
	}
	var jobs []stages.RecordRequest
	for _, j := range h.TakeJobs() {
		if !j.Verify {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) != 8 {
		b.Fatalf("%d jobs, want 8", len(jobs))
	}
	record := func(b *testing.B, rec *stages.Recorder, j *stages.RecordRequest) int {
		if err := rec.RecordBody(j.Key, j.FullKey, j.Boundary, j.Roots, j.Scalars, j.ExtDeps, j.Body); err != nil {
			b.Fatal(err)
		}
		rec.Publish()
		return rec.Nodes()
	}
	for _, cold := range []bool{false, true} {
		name := "warm"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			var rec stages.Recorder
			rec.Reserve(320)
			nodes := 0
			b.ReportAllocs()
			c0 := benchunit.CPUNs()
			for b.Loop() {
				for i := range jobs {
					if cold {
						rec = stages.Recorder{}
						rec.Reserve(320)
					}
					nodes += record(b, &rec, &jobs[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(nodes), "ns/node")
			b.ReportMetric(float64(benchunit.CPUNs()-c0)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}
