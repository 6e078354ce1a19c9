package tests

import (
	"context"
	"testing"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/trace"
)

// BenchmarkPassWarm is one warm DSv4 pass per form, Definitions kept, the
// device skipped (its simulation has a benchmark of its own): the control
// plane, host_orch + graph_upload + arena_h2d, through the actors. Medians
// of the phases are reported as metrics.
func BenchmarkPassWarm(b *testing.B) {
	m := loadDSv4(b)
	for _, form := range []string{"eager", "pair", "blocks", "full"} {
		b.Run(form, func(b *testing.B) {
			rt := startRuntime(b, actors.Config{SkipDevice: true})
			orch := orchestration(m, form)
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
				passes = append(passes, res.Pass)
				round++
			}
			reportPhases(b, passes)
		})
	}
}

// BenchmarkPassCold is a DSv4 pass on a fresh runtime: it records, builds
// and uploads every Definition.
func BenchmarkPassCold(b *testing.B) {
	m := loadDSv4(b)
	for _, form := range []string{"pair", "blocks", "full"} {
		b.Run(form, func(b *testing.B) {
			orch := orchestration(m, form)
			var passes []trace.Pass
			for b.Loop() {
				b.StopTimer()
				sys := actors.NewActorSystem(nil)
				rt, err := actors.Start(sys, actors.Config{SkipDevice: true})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := rt.Pass(context.Background(), orch, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				passes = append(passes, res.Pass)
				rt.Stop(context.Background())
				sys.Shutdown()
				b.StartTimer()
			}
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
