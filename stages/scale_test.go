package stages

import (
	"fmt"
	"testing"

	"github.com/hbg-dev/hbg/internal/benchunit"
)

// keysRig is a rank's Host and Replay driven as the actors drive them (no
// actors, no clock), over an orchestration of one small block called with
// n distinct keys ("k0".."k{n-1}", one call each): the shape that made the
// warm pass quadratic in its keys (issue 28).
type keysRig struct {
	h     *Host
	r     *Replay
	rec   Recorder
	n     int
	entry []Root
	keys  []string
	calls []GraphCall
	round int
}

func newKeysRig(n int) *keysRig {
	g := &keysRig{h: NewHost(0, PassConfig{SkipDevice: true}), r: NewReplay(), n: n}
	g.entry = []Root{
		{Name: "x", Kind: RootEntry, DType: FP32, Shape: []int64{int64(n), 16}, Elems: int64(n) * 16},
		{Name: "y", Kind: RootEntryOutput, DType: FP32, Shape: []int64{int64(n), 16}, Elems: int64(n) * 16},
	}
	g.keys = make([]string, n)
	g.calls = make([]GraphCall, n)
	for i := range g.keys {
		g.keys[i] = fmt.Sprint("k", i)
		g.calls[i] = GraphCall{Key: g.keys[i], Scalars: []uint64{uint64(i)}, Body: scriptBody}
	}
	return g
}

// orchestrate is the pass's host_orch: every key called once, its boundary
// written into the slots the Host lends (as the model interpreter does).
func (g *keysRig) orchestrate(o Submitter) error {
	for i := range g.calls {
		c := &g.calls[i]
		b := g.h.GraphBoundary(2)
		b[0] = Arg{Tag: TagInput, View: NewView(0, int64(i)*16, FP32, 16)}
		b[1] = Arg{Tag: TagInOut, View: NewView(1, int64(i)*16, FP32, 16)}
		c.Boundary = b
		o.Graph(c)
	}
	return nil
}

// pass runs one pass to its reply: host_orch, the recordings it asked for
// (in line), the handoff, the run image's copy. It returns the pass.
func (g *keysRig) pass(tb testing.TB) *Pass {
	g.h.Begin("keys", g.entry, 1, g.round)
	g.round++
	err := g.orchestrate(hostOnly{g.h})
	jobs := g.h.TakeJobs()
	p := g.h.End(err)
	g.r.Handoff(p)
	for _, j := range jobs {
		o := Outcome{Pass: j.Pass, StoreKey: j.StoreKey, Verify: j.Verify}
		d, err := g.rec.Record(j.Key, j.FullKey, j.Boundary, j.Roots, j.Scalars, j.ExtDeps, j.Body)
		if err != nil {
			tb.Fatal(err)
		}
		o.Def = &Published{Def: d, Hash: d.ContentHash, Written: d.WrittenSlots()}
		o.Recorded = !j.Verify
		g.r.Defined(o)
	}
	g.actions(tb)
	if q, _, _ := g.r.DeviceReplied(nil); q != p {
		tb.Fatalf("device reply for pass %d, want %d", q.ID, p.ID)
	}
	g.actions(tb)
	if p.Err != nil || !p.Done() {
		tb.Fatalf("pass %d: done %v, err %v", p.ID, p.Done(), p.Err)
	}
	return p
}

func (g *keysRig) actions(tb testing.TB) {
	for _, a := range g.r.Actions() {
		switch a.Kind {
		case ActLearn:
			g.h.Learn(a.Learned)
		case ActRerun:
			tb.Fatalf("pass %d rerun", a.Pass.ID)
		case ActReply:
			g.h.Recycle(a.Pass.Image)
		}
	}
}

// TestWarmWorkPerCall: a warm pass's work per Graph call does not grow with
// the pass's distinct keys. Work is counted, not timed: the entries of
// per-pass collections the pass's steps visit (Pass.walked) and the heap
// allocations, per Graph call, at 100 and at 4000 keys. A step that scans
// the pass's Definitions (or keys) per call makes the first grow 40-fold.
func TestWarmWorkPerCall(t *testing.T) {
	type work struct{ walked, allocs float64 }
	measure := func(n int) work {
		g := newKeysRig(n)
		g.pass(t) // cold: records every key
		p := g.pass(t)
		if p.Counts.GraphSubmissions != n || p.Counts.Definitions != n || p.BuiltDefinitions != 0 {
			t.Fatalf("%d keys: warm pass counts %+v, built %d", n, p.Counts, p.BuiltDefinitions)
		}
		allocs := testing.AllocsPerRun(3, func() { g.pass(t) })
		return work{walked: float64(p.walked) / float64(n), allocs: allocs / float64(n)}
	}
	small, large := measure(100), measure(4000)
	t.Logf("per Graph call: walked %.2f / %.2f, allocations %.3f / %.3f (100 / 4000 keys)",
		small.walked, large.walked, small.allocs, large.allocs)
	// A constant allowance: a per-pass step (a map's buckets, a slice
	// growing) spreads over the calls; a per-call scan does not.
	if large.walked > small.walked+1 {
		t.Errorf("entries walked per Graph call grow with the keys: %.2f at 100, %.2f at 4000", small.walked, large.walked)
	}
	if large.allocs > small.allocs*1.25+0.05 {
		t.Errorf("allocations per Graph call grow with the keys: %.3f at 100, %.3f at 4000", small.allocs, large.allocs)
	}
}

// BenchmarkScaleKeysHost is BenchmarkScaleKeys (tests/) without the
// actors: a warm pass of n distinct keys through the Host and the Replay,
// per Graph call.
func BenchmarkScaleKeysHost(b *testing.B) {
	for _, n := range []int{100, 1000, 4000, 16000, 64000, 100000} {
		b.Run(fmt.Sprint("keys=", n), func(b *testing.B) {
			g := newKeysRig(n)
			g.pass(b)
			g.pass(b)
			u := benchunit.Start(b)
			for b.Loop() {
				g.pass(b)
			}
			u.Report(n, "key")
		})
	}
}

// BenchmarkScaleWidth is a warm pass of 16 calls of one key whose boundary
// is width tensors (over width/2 roots, so the alias partition is
// exercised) through the Host and the Replay, per boundary tensor of a
// call: the match, the outer task's fanin and its GraphSubmission are
// O(width), 8 to 4096 tensors. whole passes each call's boundary as Args;
// template passes it by a BoundaryTemplate and Locs, as the model
// interpreter does.
func BenchmarkScaleWidth(b *testing.B) {
	const calls = 16
	for _, mode := range []string{"whole", "template"} {
		for _, w := range []int{8, 32, 128, 512, 2048, 4096} {
			b.Run(fmt.Sprint(mode, "/width=", w), func(b *testing.B) {
				benchWidth(b, w, calls, mode == "template")
			})
		}
	}
}

// benchWidth is BenchmarkScaleWidth at width w.
func benchWidth(b *testing.B, w, calls int, byTemplate bool) {
	call, roots := wideCall(w, 4)
	if byTemplate {
		c := *call
		c.Template, c.Locs = NewBoundaryTemplate(call.Boundary), make([]Loc, w)
		for i, a := range call.Boundary {
			c.Locs[i] = Loc{Root: a.View.Root, Offset: a.View.Offset}
		}
		call = &c
	}
	h, r := NewHost(0, PassConfig{SkipDevice: true}), NewReplay()
	var rec Recorder
	warm := false
	pass := func() {
		h.Begin("wide", roots, 4, 0)
		o := hostOnly{h}
		for i := 0; i < calls; i++ {
			if byTemplate {
				call.Boundary = nil // the Host materializes it where it must
			}
			o.Graph(call)
		}
		jobs := h.TakeJobs()
		p := h.End(nil)
		r.Handoff(p)
		for _, j := range jobs {
			d, err := rec.Record(j.Key, j.FullKey, j.Boundary, j.Roots, j.Scalars, j.ExtDeps, j.Body)
			if err != nil {
				b.Fatal(err)
			}
			r.Defined(Outcome{Pass: j.Pass, StoreKey: j.StoreKey, Verify: j.Verify, Recorded: !j.Verify,
				Def: &Published{Def: d, Hash: d.ContentHash, Written: d.WrittenSlots()}})
		}
		for _, a := range r.Actions() {
			if a.Kind == ActLearn {
				h.Learn(a.Learned)
			}
		}
		r.DeviceReplied(nil)
		for _, a := range r.Actions() {
			if a.Kind == ActReply {
				if a.Pass.Err != nil || a.Pass.Counts.GraphSubmissions != calls {
					b.Fatalf("pass: %v, counts %+v", a.Pass.Err, a.Pass.Counts)
				}
				if warm && byTemplate && a.Pass.ByTemplate() != calls {
					b.Fatalf("%d of %d calls replayed by template", a.Pass.ByTemplate(), calls)
				}
				h.Recycle(a.Pass.Image)
			}
		}
	}
	pass()
	pass()
	warm = true
	u := benchunit.Start(b)
	for b.Loop() {
		pass()
	}
	u.Report(calls*w, "tensor")
}

// BenchmarkScaleDefinition is a Definition of n nodes recorded, built and
// encoded (Recorder.RecordBody and Publish), then decoded and verified as
// the device decodes an upload (DecodeDefinition), per node: 10 to 10^5
// nodes over a 30-wide boundary.
func BenchmarkScaleDefinition(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000, 100000} {
		b.Run(fmt.Sprint("nodes=", n), func(b *testing.B) {
			call, roots := wideCall(30, n)
			o := NewOrdinaryPath(roots)
			broots := o.BoundaryRoots(call.Boundary)
			var r Recorder
			r.Reserve(n)
			one := func() {
				if err := r.RecordBody(call.Key, 1, call.Boundary, broots, call.Scalars, call.ExtDeps, call.Body); err != nil {
					b.Fatal(err)
				}
				pub := r.Publish()
				d, err := DecodeDefinition(pub.Image)
				if err != nil || len(d.Nodes) != n {
					b.Fatalf("decode: %v, %d nodes", err, len(d.Nodes))
				}
			}
			one()
			u := benchunit.Start(b)
			for b.Loop() {
				one()
			}
			u.Report(n, "node")
		})
	}
}
