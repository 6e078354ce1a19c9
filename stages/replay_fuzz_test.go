package stages

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// fuzzBytes hands out a fuzzer's input as small numbers, zero once it runs
// out.
type fuzzBytes struct {
	b []byte
	i int
}

func (f *fuzzBytes) n(k int) int {
	if f.i >= len(f.b) || k <= 0 {
		return 0
	}
	f.i++
	return int(f.b[f.i-1]) % k
}

func (f *fuzzBytes) more() bool { return f.i < len(f.b) }

// refTensorMap is the TensorMap as it was before ordered roots were
// binary-searched and reads stopped writing back: one scan per lookup, in
// submission order. FuzzTensorMap holds the TensorMap to it.
type refTensorMap struct{ roots [][]tmEntry }

func (m *refTensorMap) slot(r RootID) *[]tmEntry {
	for int(r) >= len(m.roots) {
		m.roots = append(m.roots, nil)
	}
	return &m.roots[r]
}

func (m *refTensorMap) Lookup(v *View, retire bool, fs *FaninSet) {
	s := m.slot(v.Root)
	start, end := v.Offset, v.End()
	kept := (*s)[:0]
	for _, e := range *s {
		ov := e.overlap(start, end)
		if ov != OverlapNone {
			fs.Add(e.producer)
		}
		if retire && ov == OverlapCovered {
			continue
		}
		kept = append(kept, e)
	}
	*s = kept
}

func (m *refTensorMap) Register(v *View, task TaskID) {
	s := m.slot(v.Root)
	*s = append(*s, tmEntry{start: v.Offset, end: v.End(), producer: task})
}

// FuzzTensorMap: lookups report the same producers in the same order, and
// retire the same entries, as the plain scan, over roots written at random
// and roots written slice after slice (long ordered runs).
func FuzzTensorMap(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{2, 0, 4, 2, 0, 4, 2, 0, 4, 2, 0, 4, 2, 0, 4, 2, 0, 4, 2, 0, 4, 2, 0, 4, 2, 0, 4, 2, 0, 4, 1, 0, 30, 8, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		fb := &fuzzBytes{b: in}
		var got TensorMap
		var want refTensorMap
		var fg, fw FaninSet
		ends := map[RootID]int64{}
		for task := TaskID(0); fb.more(); task++ {
			op, r := fb.n(4), RootID(fb.n(3))
			start, n := int64(fb.n(64)), int64(fb.n(17))
			switch op {
			case 0, 1: // a lookup, retiring or not
				v := NewView(r, start, FP32, n)
				fg.Begin(task)
				fw.Begin(task)
				got.Lookup(&v, op == 1, &fg)
				want.Lookup(&v, op == 1, &fw)
				if !reflect.DeepEqual(fg.Out, fw.Out) {
					t.Fatalf("op %d lookup root %d [%d,%d) retire %v: producers %v, want %v", task, r, start, start+n, op == 1, fg.Out, fw.Out)
				}
			case 2: // the next slice of the root
				v := NewView(r, ends[r]+start%3, FP32, n)
				ends[r] = v.End()
				got.Register(&v, task)
				want.Register(&v, task)
			case 3:
				v := NewView(r, start, FP32, n)
				got.Register(&v, task)
				want.Register(&v, task)
			}
			for r := range want.roots {
				g := got.slot(RootID(r)).es
				if len(g) != len(want.roots[r]) || len(g) > 0 && !reflect.DeepEqual(g, want.roots[r]) {
					t.Fatalf("op %d: root %d entries %v, want %v", task, r, g, want.roots[r])
				}
			}
		}
	})
}

// replayPair is three ordinary paths driven alike, one through
// ReplayGraph, one through MatchSignature then SubmitGraph, one through
// ReplayLocs (a call by template) where its template fits the signature
// and ReplayGraph where not, as the Host does.
type replayPair struct {
	a, b, c    *OrdinaryPath
	ma, mb, mc Matcher
}

// FuzzReplayGraph: ReplayGraph refuses exactly the calls MatchSignature
// refuses, with the same mismatch, leaves no trace when it does, and
// otherwise submits what SubmitGraph submits (tasks, args, fanin in order,
// TensorMap), over random ordinary tasks, scopes and Graph calls whose
// signatures are their own, another call's, or their own with one field
// changed. The narrow run image they build encodes to an image that
// decodes to every task's arguments as submitted (a boundary's tag, root
// and offset) and re-encodes, all arguments in one pool, to the same bytes.
func FuzzReplayGraph(f *testing.F) {
	f.Add([]byte{3, 1, 2, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{5, 0, 1, 2, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		fb := &fuzzBytes{b: in}
		sizes := []int64{16, 32, 64, 64}
		entry := make([]Root, 1+fb.n(6))
		for i := range entry {
			sz := sizes[fb.n(4)]
			entry[i] = Root{Name: fmt.Sprint("r", i), DType: FP32, Shape: []int64{sz}, Elems: sz, ManualDep: fb.n(5) == 0}
		}
		p := replayPair{a: NewOrdinaryPath(entry), b: NewOrdinaryPath(entry), c: NewOrdinaryPath(entry)}
		var sigs [][]BoundarySlot
		var bounds [][]Arg // each Graph submission's boundary, in order
		view := func() View {
			nroots := p.a.NumRoots()
			r := RootID(fb.n(nroots))
			elems := p.a.RootElems(r)
			if rows, cols := int64(1+fb.n(4)), int64(1+fb.n(4)); fb.n(3) == 0 && rows*cols <= elems {
				v := NewView(r, int64(fb.n(int(elems-rows*cols)+1)), FP32, rows, cols)
				if fb.n(4) == 0 {
					v.Strides[0] = cols + 1 // strided: rows*(cols+1) may poke past; the region is [off, off+elems)
				}
				return v
			}
			n := int64(fb.n(int(elems) + 1))
			return NewView(r, int64(fb.n(int(elems-n)+1)), FP32, n)
		}
		tags := []Tag{TagInput, TagInput, TagInOut, TagOutputExisting, TagOutput}
		for op := 0; fb.more() && op < 64; op++ {
			switch fb.n(6) {
			case 0, 1: // an ordinary task
				task := Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 1, -1}, BlockNum: 1}
				for range 1 + fb.n(3) {
					task.Args = append(task.Args, Arg{Tag: tags[fb.n(5)], View: view()})
				}
				if n := p.a.NumTasks(); n > 0 && fb.n(3) == 0 {
					task.Deps = []TaskID{TaskID(fb.n(n))}
				}
				tb := task
				tb.Args = append([]Arg(nil), task.Args...)
				tc := task
				tc.Args = append([]Arg(nil), task.Args...)
				ia, ib := p.a.Submit(&task), p.b.Submit(&tb)
				p.c.Submit(&tc)
				if ia != ib {
					t.Fatalf("op %d: task ids %d and %d", op, ia, ib)
				}
			case 2, 3, 4: // a Graph call
				call := &GraphCall{Key: "k", Scalars: make([]uint64, fb.n(3))}
				for range fb.n(6) {
					call.Boundary = append(call.Boundary, Arg{Tag: tags[fb.n(4)], View: view()})
				}
				for range fb.n(3) {
					call.ExtDeps = append(call.ExtDeps, TaskID(fb.n(p.a.NumTasks()+1)-1))
				}
				sig := Signature(call.Boundary, p.a)
				nsc, next := len(call.Scalars), len(call.ExtDeps)
				switch k := fb.n(8); {
				case k == 0 && len(sigs) > 0:
					sig = sigs[fb.n(len(sigs))]
				case k == 1:
					nsc += 1
				case k == 2:
					next += 1
				case k >= 3 && len(sig) > 0:
					sig = append([]BoundarySlot(nil), sig...)
					s := &sig[fb.n(len(sig))]
					switch k {
					case 3:
						s.Tag = tags[fb.n(5)]
					case 4:
						s.Layout.Shape[0]++
					case 5:
						s.Layout.Strides[s.Layout.NDims-1] += 2
					case 6:
						s.RootElems = sizes[fb.n(4)]
					case 7:
						s.AliasRep = int32(fb.n(len(sig)+1) - 1)
					}
				}
				sigs = append(sigs, sig)
				var also []int32
				for s := range call.Boundary {
					if fb.n(4) == 0 {
						also = append(also, int32(s))
					}
				}
				sub := GraphSubmission{FullKey: 7, DefHash: 9}
				heap := int64(fb.n(3) * 1000)
				// a writes the boundary where it is lent, b passes its own.
				ca := *call
				ca.Boundary = p.a.lendArgs(len(call.Boundary))
				copy(ca.Boundary, call.Boundary)
				before := fmt.Sprintf("%+v", p.a.Image())
				ia, mma := p.a.ReplayGraph(&p.ma, sig, nsc, next, &ca, sub, heap, also)
				mmb := matchSignature(&p.mb, sig, nsc, next, call, rootTable(p.b.info))
				if fmt.Sprint(mma) != fmt.Sprint(mmb) {
					t.Fatalf("op %d: ReplayGraph says %v, MatchSignature %v", op, mma, mmb)
				}
				p.replayLocs(t, op, call, sig, nsc, next, sub, heap, also, mma)
				if mma != nil {
					if after := fmt.Sprintf("%+v", p.a.Image()); after != before {
						t.Fatalf("op %d: a refused call changed the run image:\n%s\n%s", op, before, after)
					}
					continue
				}
				if ib := p.b.SubmitGraph(call, sub, heap, also); ia != ib {
					t.Fatalf("op %d: graph task %d, want %d", op, ia, ib)
				}
				bounds = append(bounds, call.Boundary)
			case 5:
				if p.a.ScopeDepth() > 0 && fb.n(2) == 0 {
					p.a.ScopeEnd()
					p.b.ScopeEnd()
					p.c.ScopeEnd()
				} else {
					m := ScopeMode(fb.n(2))
					p.a.ScopeBegin(m)
					p.b.ScopeBegin(m)
					p.c.ScopeBegin(m)
				}
			}
			// %+v: an empty pool equals a nil one.
			for _, o := range []*OrdinaryPath{p.b, p.c} {
				if fmt.Sprintf("%+v", p.a.Image()) != fmt.Sprintf("%+v", o.Image()) {
					t.Fatalf("op %d: run images differ:\n%+v\n%+v", op, p.a.Image(), o.Image())
				}
				if fmt.Sprintf("%+v", p.a.tm) != fmt.Sprintf("%+v", o.tm) {
					t.Fatalf("op %d: TensorMaps differ", op)
				}
			}
		}
		checkNarrowEncoding(t, p.a.Image(), bounds)
	})
}

// replayLocs makes call on p.c by template: ReplayLocs where the call's
// template fits sig, which must then accept exactly the calls
// MatchSignature accepts (mm nil) and leave no trace when it refuses;
// ReplayGraph on the materialized boundary where it does not fit, or
// refused.
func (p *replayPair) replayLocs(t *testing.T, op int, call *GraphCall, sig []BoundarySlot, nsc, next int, sub GraphSubmission, heap int64, also []int32, mm *BoundaryMismatch) {
	t.Helper()
	tmpl := NewBoundaryTemplate(call.Boundary)
	cc := *call
	cc.Boundary, cc.Template, cc.Locs = nil, tmpl, make([]Loc, len(call.Boundary))
	for i, a := range call.Boundary {
		cc.Locs[i] = Loc{Root: a.View.Root, Offset: a.View.Offset}
	}
	if slots, fits := compileLocs(sig, tmpl); fits {
		before := fmt.Sprintf("%+v", p.c.Image())
		_, ok := p.c.ReplayLocs(&p.mc, slots, nsc, next, &cc, sub, heap, also)
		if ok != (mm == nil) {
			t.Fatalf("op %d: ReplayLocs accepts %v, MatchSignature says %v", op, ok, mm)
		}
		if ok {
			return
		}
		if after := fmt.Sprintf("%+v", p.c.Image()); after != before {
			t.Fatalf("op %d: a call ReplayLocs refused changed the run image:\n%s\n%s", op, before, after)
		}
	}
	cc.Boundary = p.c.lendArgs(tmpl.Len())
	tmpl.Materialize(cc.Locs, cc.Boundary)
	if _, got := p.c.ReplayGraph(&p.mc, sig, nsc, next, &cc, sub, heap, also); fmt.Sprint(got) != fmt.Sprint(mm) {
		t.Fatalf("op %d: the materialized call's ReplayGraph says %v, want %v", op, got, mm)
	}
}

// checkNarrowEncoding: a narrow run image encodes to an image that decodes,
// whose ordinary tasks have their args as the narrow image holds them and
// whose GRAPH tasks have bounds[g] (tag, root and offset: the layout stays
// the Definition's), and whose decoded form (every argument in Args)
// encodes to the same bytes.
func checkNarrowEncoding(t *testing.T, img *RunImage, bounds [][]Arg) {
	t.Helper()
	if !img.Narrow() {
		t.Fatalf("the ordinary path built a run image that is not narrow")
	}
	b := EncodeRunImage(img)
	dec, err := DecodeRunImage(b)
	if err != nil {
		t.Fatalf("the narrow image does not decode: %v", err)
	}
	if again := EncodeRunImage(dec); !bytes.Equal(again, b) {
		t.Fatalf("the decoded image (every arg in Args) encodes to other bytes than the narrow one")
	}
	if len(dec.Tasks) != len(img.Tasks) || len(dec.Graphs) != len(bounds) || len(dec.Args) != len(img.Args)+img.NumBound() {
		t.Fatalf("decoded %d tasks, %d graphs, %d args; want %d, %d, %d+%d", len(dec.Tasks), len(dec.Graphs), len(dec.Args), len(img.Tasks), len(bounds), len(img.Args), img.NumBound())
	}
	for i := range dec.Tasks {
		s := dec.Tasks[i].Args
		got := dec.Args[s.Off : s.Off+s.N]
		var want []Arg
		if g := img.Tasks[i].Graph; g >= 0 {
			for _, a := range bounds[g] {
				want = append(want, Arg{Tag: a.Tag, View: View{Root: a.View.Root, Offset: a.View.Offset}})
			}
		} else {
			n := img.Tasks[i].Args
			want = img.Args[n.Off : n.Off+n.N]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("task %d decodes with args %v, want %v", i, got, want)
		}
	}
}
