package tests

import (
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// warmRunImage is the run image of a warm DSv4 full pass, as the Host hands
// it to the replay.
func warmRunImage(b *testing.B) *stages.RunImage {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	h := stages.NewHost(0, stages.PassConfig{SkipDevice: true})
	var rec stages.Recorder
	var p *stages.Pass
	for round := range 2 {
		h.Begin(orch.Name, orch.Entry, len(orch.Kernels), round)
		err := orch.Run(hostSubmitter{h})
		var ls []stages.Learned
		for _, j := range h.TakeJobs() {
			if j.Verify {
				continue
			}
			d, rerr := rec.Record(j.Key, j.FullKey, j.Boundary, j.Roots, j.Scalars, j.ExtDeps, j.Body)
			if rerr != nil {
				b.Fatal(rerr)
			}
			ls = append(ls, stages.Learned{StoreKey: j.StoreKey, Def: &stages.Published{Def: d, Image: stages.EncodeDefinition(d), Hash: d.ContentHash, Written: d.WrittenSlots()}})
		}
		if p = h.End(err); err != nil || p.Err != nil {
			b.Fatal(err, p.Err)
		}
		h.Learn(ls)
	}
	if p.Counts.GraphSubmissions != 86 || p.Counts.Demoted != 0 {
		b.Fatalf("counts %+v", p.Counts)
	}
	return p.Image
}

// BenchmarkRunImage is a warm DSv4 full pass's run image: encoded as the
// replay ships it (into the previous pass's buffer, content hash included)
// and copied as the device's CopyRun does, and decoded and checked as the
// device's launch reads it.
func BenchmarkRunImage(b *testing.B) {
	img := warmRunImage(b)
	buf := stages.AppendRunImage(nil, img)
	b.Run("encode", func(b *testing.B) {
		var dev []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = stages.AppendRunImage(buf, img)
			dev = append(dev[:0], buf...)
		}
		b.ReportMetric(float64(len(buf)), "bytes")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := stages.DecodeRunImage(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
