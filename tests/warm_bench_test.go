package tests

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/benchunit"
	"github.com/hbg-dev/hbg/trace"
)

// BenchmarkPassWarmQwen3 is BenchmarkPassWarm for Qwen3-14B's graph form:
// one warm pass, Definitions kept, the device skipped, its control plane
// (control-µs, the median over the passes) through the actors. Issue 28's
// target is 50 µs.
func BenchmarkPassWarmQwen3(b *testing.B) {
	m, err := config.Load(qwen3)
	if err != nil {
		b.Fatal(err)
	}
	orch := orchestration(m, "graph")
	rt := startRuntime(b, actors.Config{SkipDevice: true})
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
		t0 := time.Now()
		res, err := rt.Pass(ctx, orch, 0, round)
		walls = append(walls, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if res.Pass.BuiltDefinitions != 0 {
			b.Fatalf("warm pass %d built %d Definitions", round, res.Pass.BuiltDefinitions)
		}
		passes = append(passes, res.Pass)
		round++
	}
	b.ReportMetric(float64(benchunit.CPUNs()-c0)/float64(b.N)/1e3, "cpu-µs/op")
	slices.Sort(walls)
	b.ReportMetric(float64(walls[len(walls)/2].Nanoseconds())/1e3, "pass-µs")
	reportPhases(b, passes)
}

// BenchmarkPassWarmQwen3Step is BenchmarkPassWarmQwen3 for Qwen3's step
// form: the whole step one Graph of the layer Graphs, one host submission.
func BenchmarkPassWarmQwen3Step(b *testing.B) {
	m, err := config.Load(qwen3)
	if err != nil {
		b.Fatal(err)
	}
	orch := orchestration(m, "step")
	rt := startRuntime(b, actors.Config{SkipDevice: true})
	ctx := context.Background()
	if _, err := rt.Pass(ctx, orch, 0, 0); err != nil {
		b.Fatal(err)
	}
	var passes []trace.Pass
	round := 1
	b.ReportAllocs()
	for b.Loop() {
		res, err := rt.Pass(ctx, orch, 0, round)
		if err != nil {
			b.Fatal(err)
		}
		if res.Pass.BuiltDefinitions != 0 || res.Counts.HostSubmissions != 1 {
			b.Fatalf("warm pass %d built %d Definitions, %d host submissions", round, res.Pass.BuiltDefinitions, res.Counts.HostSubmissions)
		}
		passes = append(passes, res.Pass)
		round++
	}
	reportPhases(b, passes)
}
