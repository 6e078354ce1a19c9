package tests

import (
	"testing"

	"github.com/hbg-dev/hbg/internal/benchunit"
	"github.com/hbg-dev/hbg/stages"
)

// hostSubmitter drives a stages.Host as the submission actor does, without
// the actors and their timing: ordinary calls on the ordinary path, Graph
// calls through the Host.
type hostSubmitter struct{ h *stages.Host }

func (s hostSubmitter) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	return s.h.Ordinary().Alloc(specs)
}
func (s hostSubmitter) Submit(t *stages.Task) stages.TaskID     { return s.h.Ordinary().Submit(t) }
func (s hostSubmitter) NumRoots() int                           { return s.h.Ordinary().NumRoots() }
func (s hostSubmitter) ScopeBegin(m stages.ScopeMode)           { s.h.Ordinary().ScopeBegin(m) }
func (s hostSubmitter) ScopeEnd()                               { s.h.Ordinary().ScopeEnd() }
func (s hostSubmitter) Graph(c *stages.GraphCall) stages.TaskID { return s.h.Graph(c, s) }
func (s hostSubmitter) GraphBoundary(n int) []stages.Arg        { return s.h.GraphBoundary(n) }
func (s hostSubmitter) GraphLocs(n int) []stages.Loc            { return s.h.GraphLocs(n) }

// BenchmarkHostWarm is a warm DSv4 full pass's host_orch on one goroutine:
// the model interpreter and the Host (full_key, boundary match, the outer
// task's fanin, the run image), with no actor, message or clock. It is the
// part of BenchmarkPassWarm/full that the host's code decides. cpu-µs/op
// (getrusage) is steadier than the wall clock on a loaded machine.
func BenchmarkHostWarm(b *testing.B) {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	h := stages.NewHost(0, stages.PassConfig{SkipDevice: true})
	var rec stages.Recorder
	pass := func(round int) *stages.Pass {
		h.Begin(orch.Name, orch.Entry, len(orch.Kernels), round)
		err := orch.Run(hostSubmitter{h})
		ls := recordJobs(b, h, &rec)
		p := h.End(err)
		if err != nil || p.Err != nil {
			b.Fatal(err, p.Err)
		}
		h.Learn(ls)
		return p
	}
	pass(0)
	p := pass(1)
	if p.Counts.GraphSubmissions != 86 || p.Counts.Demoted != 0 {
		b.Fatalf("counts %+v", p.Counts)
	}
	h.Recycle(p.Image)
	b.ReportAllocs()
	round := 2
	c0 := benchunit.CPUNs()
	for b.Loop() {
		p := pass(round)
		h.Recycle(p.Image)
		round++
	}
	b.ReportMetric(float64(benchunit.CPUNs()-c0)/float64(b.N)/1e3, "cpu-µs/op")
}

// recordJobs records the Graph bodies h asked for in its last pass, in
// line (no recorder actors), and returns what the host learns from them.
func recordJobs(tb testing.TB, h *stages.Host, rec *stages.Recorder) []stages.Learned {
	var ls []stages.Learned
	for _, j := range h.TakeJobs() {
		if j.Verify {
			continue
		}
		d, err := rec.Record(j.Key, j.FullKey, j.Boundary, j.Roots, j.Scalars, j.ExtDeps, j.Body)
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, stages.Learned{StoreKey: j.StoreKey, Def: &stages.Published{Def: d, Image: stages.EncodeDefinition(d), Hash: d.ContentHash, Written: d.WrittenSlots()}})
	}
	return ls
}
