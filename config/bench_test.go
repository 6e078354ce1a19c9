package config_test

import (
	"runtime"
	"testing"

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
