package config_test

import (
	"runtime"
	"testing"

	"github.com/hbg-dev/hbg/internal/benchunit"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// nopOrch accepts every submission and does nothing: it measures the
// interpreter alone.
type nopOrch struct {
	tasks, roots int
}

func (o *nopOrch) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	id, r := o.tasks, o.roots
	o.tasks++
	o.roots += len(specs)
	return stages.TaskID(id), stages.RootID(r)
}

func (o *nopOrch) Submit(t *stages.Task) stages.TaskID {
	for _, a := range t.Args {
		if a.Tag == stages.TagOutput {
			o.roots++
		}
	}
	o.tasks++
	return stages.TaskID(o.tasks - 1)
}

func (o *nopOrch) NumRoots() int               { return o.roots }
func (o *nopOrch) ScopeBegin(stages.ScopeMode) {}
func (o *nopOrch) ScopeEnd()                   {}
func (o *nopOrch) Graph(c *stages.GraphCall) stages.TaskID {
	c.Body(o, c.NewBoundary())
	return stages.TaskID(o.tasks - 1)
}

// BenchmarkRunEager interprets DSv4's eager form: into a no-op Submitter
// (the interpreter's own cost) and into stages.OrdinaryPath (the ordinary submit
// path with the TensorMap). Reported per task.
func BenchmarkRunEager(b *testing.B) {
	m, err := config.Load(modelPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("nop", func(b *testing.B) {
		o := &nopOrch{roots: len(m.EntryRoots())}
		b.ReportAllocs()
		m0 := mallocs()
		for i := 0; i < b.N; i++ {
			o.tasks, o.roots = 0, len(m.EntryRoots())
			if err := m.Run(o, "eager"); err != nil {
				b.Fatal(err)
			}
		}
		report(b, o.tasks, mallocs()-m0)
	})
	b.Run("orch", func(b *testing.B) {
		o := stages.NewOrdinaryPath(m.EntryRoots())
		b.ReportAllocs()
		m0 := mallocs()
		for i := 0; i < b.N; i++ {
			o.Reset()
			if err := m.Run(o, "eager"); err != nil {
				b.Fatal(err)
			}
		}
		report(b, o.NumTasks(), mallocs()-m0)
	})
}

func report(b *testing.B, tasks int, mallocs uint64) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tasks), "ns/task")
	b.ReportMetric(float64(mallocs)/float64(b.N)/float64(tasks), "allocs/task")
	b.ReportMetric(float64(tasks), "tasks/op")
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// hitOrch is a warm pass's Submitter as the interpreter sees it: every
// Graph call is a hit (its body does not run), and its boundary is written
// into lent slots of one image-like buffer, reused pass after pass.
type hitOrch struct {
	nopOrch
	args  []stages.Arg
	used  int
	calls int
}

func (o *hitOrch) GraphBoundary(n int) []stages.Arg {
	if o.used+n > len(o.args) {
		o.args = append(o.args, make([]stages.Arg, o.used+n-len(o.args))...)
	}
	s := o.args[o.used : o.used+n : o.used+n]
	o.used += n
	return s
}

func (o *hitOrch) Graph(c *stages.GraphCall) stages.TaskID {
	o.calls++
	o.tasks++
	return stages.TaskID(o.tasks - 1)
}

// BenchmarkRunFullWarm is the interpreter's part of a warm DSv4 full pass:
// 86 Graph calls that hit, each boundary evaluated into lent slots, and
// the tasks outside the Graphs into a no-op Submitter.
func BenchmarkRunFullWarm(b *testing.B) {
	m, err := config.Load(modelPath)
	if err != nil {
		b.Fatal(err)
	}
	entry := len(m.EntryRoots())
	o := &hitOrch{nopOrch: nopOrch{roots: entry}}
	pass := func() {
		o.tasks, o.roots, o.used, o.calls = 0, entry, 0, 0
		if err := m.Run(o, "full"); err != nil {
			b.Fatal(err)
		}
	}
	pass()
	if o.calls != 86 {
		b.Fatalf("%d Graph calls, want 86", o.calls)
	}
	b.ReportAllocs()
	c0 := benchunit.CPUNs()
	for b.Loop() {
		pass()
	}
	b.ReportMetric(float64(benchunit.CPUNs()-c0)/float64(b.N)/1e3, "cpu-µs/op")
	b.ReportMetric(float64(o.used), "boundary-args/op")
}
