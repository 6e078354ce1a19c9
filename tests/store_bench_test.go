package tests

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/internal/benchunit"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// BenchmarkPassColdStore is DSv4 full's first pass on a fresh runtime, as
// a fresh process runs it: with an empty store on disk (it records, builds
// and uploads every Definition; the writes to disk go on behind it) and
// with a store an earlier runtime filled (it loads, verifies and uploads
// them). Each pass runs on a runtime of its own, started untimed, with the
// earlier ones' garbage collected.
func BenchmarkPassColdStore(b *testing.B) {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	for _, c := range storeCases(b, orch) {
		b.Run(c.name, func(b *testing.B) {
			var passes []trace.Pass
			var cpu, pre, faults int64
			for b.Loop() {
				b.StopTimer()
				sys := actors.NewActorSystem(nil)
				rt, err := actors.Start(sys, actors.Config{SkipDevice: true, StoreDir: c.dir()})
				if err != nil {
					b.Fatal(err)
				}
				pre += preload(b, rt, orch, c)
				// A fresh process carries no earlier runtime's garbage:
				// collect it here, or its marking lands in the timed pass.
				runtime.GC()
				b.StartTimer()
				c0, f0 := benchunit.CPUNs(), minorFaults()
				res, err := rt.Pass(context.Background(), orch, 0, 0)
				cpu += benchunit.CPUNs() - c0
				faults += minorFaults() - f0
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if c.name != "empty" && (res.Pass.LoadedDefinitions != 8 || res.Pass.BuiltDefinitions != 0) {
					b.Fatalf("loaded %d, built %d; want 8 and 0", res.Pass.LoadedDefinitions, res.Pass.BuiltDefinitions)
				}
				passes = append(passes, res.Pass)
				rt.Stop(context.Background())
				sys.Shutdown()
				b.StartTimer()
			}
			reportPhases(b, passes)
			b.ReportMetric(float64(cpu)/float64(b.N)/1e3, "cpu-µs/op")
			b.ReportMetric(float64(pre)/float64(b.N)/1e3, "preload-µs")
			b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
		})
	}
}

// BenchmarkStartPassColdStore is BenchmarkPassColdStore with the runtime's
// start in the timed region: opening the store on disk scans its index
// (every entry read, to measure the store), and a load then uses an entry
// that scan read while its file is unchanged, so the start is where part
// of a populated store's cost can hide. ns/op is start and pass; start-µs
// the start alone.
func BenchmarkStartPassColdStore(b *testing.B) {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	for _, c := range storeCases(b, orch) {
		b.Run(c.name, func(b *testing.B) {
			var start int64
			for b.Loop() {
				b.StopTimer()
				dir := c.dir()
				sys := actors.NewActorSystem(nil)
				runtime.GC()
				b.StartTimer()
				t0 := time.Now()
				rt, err := actors.Start(sys, actors.Config{SkipDevice: true, StoreDir: dir})
				if err != nil {
					b.Fatal(err)
				}
				start += time.Since(t0).Nanoseconds()
				preload(b, rt, orch, c)
				res, err := rt.Pass(context.Background(), orch, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if c.name != "empty" && res.Pass.LoadedDefinitions != 8 {
					b.Fatalf("loaded %d, want 8", res.Pass.LoadedDefinitions)
				}
				rt.Stop(context.Background())
				sys.Shutdown()
				b.StartTimer()
			}
			b.ReportMetric(float64(start)/float64(b.N)/1e3, "start-µs")
		})
	}
}

// preload preloads orch's Definitions when c says so, and returns its wall
// time in ns.
func preload(b *testing.B, rt *actors.Runtime, orch *actors.Orchestration, c storeCase) int64 {
	if !c.preload {
		return 0
	}
	t0 := time.Now()
	l, err := rt.Preload(context.Background(), orch, trace.RunInfo{})
	if err != nil || l.Loaded != 8 {
		b.Fatalf("preload: %+v, %v; want 8 loaded", l, err)
	}
	return time.Since(t0).Nanoseconds()
}

// minorFaults is the page faults this process has taken that needed no
// disk: on this project's VM each costs about 12 µs (BenchmarkMachineFirstTouch),
// so they are where a cold pass's wall time goes beyond its CPU time.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

// BenchmarkStoreLoad loads DSv4 full's 8 Definitions from a store on disk
// (page cache warm), as a process loads them a second time: pin the entry
// (its file unchanged since this process read it, so not read again), check
// it, read, verify and decode the image. MB/s is image bytes; ns/B, the
// load cost per Definition byte.
func BenchmarkStoreLoad(b *testing.B) {
	m := loadDSv4(b)
	images := definitionsOf(b, m, "full")
	s, err := diskstore.Open(b.TempDir(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var keys []uint64
	total := 0
	for _, img := range images {
		d, err := stages.DecodeDefinition(img)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Put(d, img, "dsv4/full"); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, d.FullKey)
		total += len(img)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	c0 := benchunit.CPUNs()
	for b.Loop() {
		for _, k := range keys {
			l, err := s.Load(k, "dsv4/full")
			if err != nil || l == nil {
				b.Fatal(err)
			}
			s.Unpin(k)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/B")
	b.ReportMetric(float64(benchunit.CPUNs()-c0)/float64(b.N)/float64(total), "cpu-ns/B")
	b.ReportMetric(float64(total), "image-bytes")
}

type storeCase struct {
	name string
	dir  func() string // the store's directory for one pass
	// preload: the runtime preloads the Definitions (Runtime.Preload)
	// before the pass, as hbgrun does at its start.
	preload bool
}

// storeCases are the two stores a cold pass starts with: an empty one
// (each case's call a new one), and one an earlier runtime filled with
// orch's 8 Definitions.
func storeCases(b *testing.B, orch *actors.Orchestration) []storeCase {
	populated := b.TempDir()
	fill := startRuntime(b, actors.Config{SkipDevice: true, StoreDir: populated})
	if res, err := fill.Pass(context.Background(), orch, 0, 0); err != nil || res.Pass.BuiltDefinitions != 8 {
		b.Fatalf("filling the store: %v", err)
	}
	fill.Stop(context.Background()) // flushes the writes
	return []storeCase{
		{"empty", func() string { return b.TempDir() }, false},
		{"populated", func() string { return populated }, false},
		{"preloaded", func() string { return populated }, true},
	}
}
