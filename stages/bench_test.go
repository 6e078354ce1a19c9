package stages

import (
	"fmt"
	"testing"
)

// wideCall is a Graph call whose boundary has width tensors over width/2
// roots (so the alias partition is exercised), and a body of nodes tasks
// that each read two slots and write an internal buffer.
func wideCall(width, nodes int) (*GraphCall, []Root) {
	nroots := max(width/2, 1)
	roots := make([]Root, nroots)
	for i := range roots {
		roots[i] = Root{Name: fmt.Sprint("r", i), DType: BF16, Elems: 1 << 20, Shape: []int64{1 << 20}}
	}
	call := &GraphCall{Key: fmt.Sprint("wide", width), Scalars: []uint64{1, 2, 3}}
	for i := 0; i < width; i++ {
		call.Boundary = append(call.Boundary, Arg{Tag: TagInput, View: NewView(RootID(i%nroots), int64(i/nroots)*4096, BF16, 64, 64)})
	}
	call.Body = func(o Submitter, b *Boundary) error {
		_, tmp := o.Alloc([]RootSpec{{Name: "tmp", DType: FP32, Shape: []int64{int64(nodes), 64}}})
		t := Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 3, -1}, BlockNum: 4, Args: make([]Arg, 3), Scalars: []Scalar{b.Scalars[0], Static(9)}}
		for n := 1; n < nodes; n++ {
			t.Args[0] = b.Tensors[n%len(b.Tensors)]
			t.Args[1] = b.Tensors[(n*7)%len(b.Tensors)]
			t.Args[2] = Arg{Tag: TagInOut, View: NewView(tmp, int64(n-1)*64, FP32, 64)}
			o.Submit(&t)
		}
		return nil
	}
	return call, roots
}

func recordCall(r *Recorder, call *GraphCall, o *OrdinaryPath) *Definition {
	d, err := r.Record(call.Key, 1, call.Boundary, o.BoundaryRoots(call.Boundary), call.Scalars, call.ExtDeps, call.Body)
	if err != nil {
		panic(err)
	}
	return d
}

// BenchmarkRecordNode is recording per node (the body's own work included),
// over a 291-node body with a 30-wide boundary (DSv4's MoE shape).
func BenchmarkRecordNode(b *testing.B) {
	call, roots := wideCall(30, 291)
	o := NewOrdinaryPath(roots)
	var r Recorder
	recordCall(&r, call, o)
	b.ReportAllocs()
	broots := o.BoundaryRoots(call.Boundary)
	for b.Loop() {
		r.Reset(call.Key, 1, call.Boundary, broots, len(call.Scalars), call.ExtDeps)
		call.Body(&r, call.NewBoundary())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/291, "ns/node")
}

// BenchmarkBuildDefinition is the Definition build per node: finishing the
// recording and encoding the flat image with its content hash. publish is
// the runtime's build (Recorder.Publish: the image straight from the
// recorder's buffers, and the host's part); build is Build, a Definition of
// its own, then EncodeDefinition.
func BenchmarkBuildDefinition(b *testing.B) {
	call, roots := wideCall(30, 291)
	o := NewOrdinaryPath(roots)
	var r Recorder
	r.Reserve(320)
	d := recordCall(&r, call, o)
	broots := o.BoundaryRoots(call.Boundary)
	record := func() {
		if err := r.RecordBody(call.Key, 1, call.Boundary, broots, call.Scalars, call.ExtDeps, call.Body); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("publish", func(b *testing.B) {
		b.ReportMetric(float64(len(EncodeDefinition(d)))/float64(len(d.Nodes)), "bytes/node")
		b.ReportAllocs()
		for b.Loop() {
			// Publish hands the recording's node table over: record again,
			// untimed.
			b.StopTimer()
			record()
			b.StartTimer()
			r.Publish()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/291, "ns/node")
	})
	b.Run("build", func(b *testing.B) {
		record()
		b.ReportAllocs()
		for b.Loop() {
			d, _ := r.Build()
			EncodeDefinition(d)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/291, "ns/node")
	})
}

// BenchmarkMatchBoundary is the boundary match at several widths: linear
// means width 128 costs about 4x width 32.
func BenchmarkMatchBoundary(b *testing.B) {
	for _, w := range []int{8, 32, 128} {
		b.Run(fmt.Sprint("width=", w), func(b *testing.B) {
			call, roots := wideCall(w, 2)
			o := NewOrdinaryPath(roots)
			var r Recorder
			d := recordCall(&r, call, o)
			var m Matcher
			b.ReportAllocs()
			for b.Loop() {
				if mm := m.Match(d, call, o); mm != nil {
					b.Fatal(mm)
				}
			}
		})
	}
}

// BenchmarkReplay48 is one replay at DSv4's widest boundary (48 tensors):
// the match, the outer task's fanin against the real TensorMap, and its
// GraphSubmission into the run image, in one pass (ReplayGraph). Steady
// state allocates nothing.
func BenchmarkReplay48(b *testing.B) {
	call, roots := wideCall(48, 2)
	o := NewOrdinaryPath(roots)
	var r Recorder
	d := recordCall(&r, call, o)
	var m Matcher
	written := d.WrittenSlots()
	const perRun = 1000
	run := func() {
		o.Reset()
		for i := 0; i < perRun; i++ {
			sub := GraphSubmission{FullKey: d.FullKey, DefHash: d.ContentHash}
			if _, mm := o.ReplayGraph(&m, d.Boundary, d.BoundaryScalars, len(d.ExtDeps), call, sub, d.HeapBytes, written); mm != nil {
				b.Fatal(mm)
			}
		}
	}
	run()
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perRun, "ns/replay")
}
