package tests

import (
	"testing"

	"github.com/hbg-dev/hbg/internal/benchunit"
	"github.com/hbg-dev/hbg/stages"
)

// warmRunImage is the run image of a warm DSv4 full pass, as the Host hands
// it to the replay.
func warmRunImage(b testing.TB) *stages.RunImage {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	h := stages.NewHost(0, stages.PassConfig{SkipDevice: true})
	var rec stages.Recorder
	var p *stages.Pass
	for round := range 2 {
		h.Begin(orch.Name, orch.Entry, len(orch.Kernels), round)
		err := orch.Run(hostSubmitter{h})
		ls := recordJobs(b, h, &rec)
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
// device's launch reads it (into the storage of the image before).
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
		var d stages.RunImageDecoder
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Decode(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// hostOp is one call a warm pass's orchestration made on its Submitter,
// kept to be made again without the interpreter.
type hostOp struct {
	specs []stages.RootSpec
	task  *stages.Task
	call  *stages.GraphCall
	scope int // 1 begin (mode), 2 end
	mode  stages.ScopeMode
}

// opLog is a Submitter that logs the calls of one pass and passes them on.
type opLog struct {
	hostSubmitter
	ops []hostOp
}

func (l *opLog) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	c := append([]stages.RootSpec(nil), specs...)
	for i := range c {
		c[i].Shape = append([]int64(nil), c[i].Shape...)
	}
	l.ops = append(l.ops, hostOp{specs: c})
	return l.hostSubmitter.Alloc(specs)
}

func (l *opLog) Submit(t *stages.Task) stages.TaskID {
	c := *t
	c.Args = append([]stages.Arg(nil), t.Args...)
	id := l.hostSubmitter.Submit(t)
	l.ops = append(l.ops, hostOp{task: &c})
	return id
}

func (l *opLog) ScopeBegin(m stages.ScopeMode) {
	l.ops = append(l.ops, hostOp{scope: 1, mode: m})
	l.hostSubmitter.ScopeBegin(m)
}

func (l *opLog) ScopeEnd() {
	l.ops = append(l.ops, hostOp{scope: 2})
	l.hostSubmitter.ScopeEnd()
}

func (l *opLog) Graph(c *stages.GraphCall) stages.TaskID {
	k := *c
	k.Boundary = append([]stages.Arg(nil), c.Boundary...)
	k.Scalars = append([]uint64(nil), c.Scalars...)
	k.Config = append([]uint64(nil), c.Config...)
	k.ExtDeps = append([]stages.TaskID(nil), c.ExtDeps...)
	l.ops = append(l.ops, hostOp{call: &k})
	return l.h.Graph(c, l)
}

// BenchmarkHostGraphCalls is BenchmarkHostWarm without the interpreter: a
// warm DSv4 full pass's Submitter calls, logged once and made again on the
// Host (each Graph boundary copied into the slots the Host lends, as the
// interpreter evaluates it there), then the run image encoded as the
// replay ships it. It is the host's part of a warm pass that stages decides.
func BenchmarkHostGraphCalls(b *testing.B) {
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	h := stages.NewHost(0, stages.PassConfig{SkipDevice: true})
	var rec stages.Recorder
	log := &opLog{hostSubmitter: hostSubmitter{h}}
	for round := range 3 {
		h.Begin(orch.Name, orch.Entry, len(orch.Kernels), round)
		var err error
		if round == 2 {
			err = orch.Run(log)
		} else {
			err = orch.Run(hostSubmitter{h})
		}
		ls := recordJobs(b, h, &rec)
		p := h.End(err)
		if err != nil || p.Err != nil {
			b.Fatal(err, p.Err)
		}
		h.Learn(ls)
		h.Recycle(p.Image)
	}
	s := hostSubmitter{h}
	var buf []byte
	var task stages.Task
	var args []stages.Arg
	var call stages.GraphCall
	round := 3
	b.ReportAllocs()
	c0 := benchunit.CPUNs()
	for b.Loop() {
		h.Begin(orch.Name, orch.Entry, len(orch.Kernels), round)
		for _, op := range log.ops {
			switch {
			case op.specs != nil:
				s.Alloc(op.specs)
			case op.task != nil:
				task = *op.task
				args = append(args[:0], op.task.Args...)
				task.Args = args
				s.Submit(&task)
			case op.call != nil:
				call = *op.call
				call.Boundary = s.GraphBoundary(len(op.call.Boundary))
				copy(call.Boundary, op.call.Boundary)
				s.Graph(&call)
			case op.scope == 1:
				s.ScopeBegin(op.mode)
			case op.scope == 2:
				s.ScopeEnd()
			}
		}
		p := h.End(nil)
		if p.Err != nil || p.Counts.GraphSubmissions != 86 || p.Counts.Demoted != 0 || p.Counts.BoundaryMismatches != 0 {
			b.Fatal(p.Err, p.Counts, p.Warnings)
		}
		buf = stages.AppendRunImage(buf, p.Image)
		h.Recycle(p.Image)
		round++
	}
	b.ReportMetric(float64(benchunit.CPUNs()-c0)/float64(b.N)/1e3, "cpu-µs/op")
}
