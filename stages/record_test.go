package stages

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// smallBody is a two-node body: a kernel reads slot 0 and writes an internal
// buffer, a second reads it and writes slot 1 at a view offset.
func smallBody(o Submitter, b *Boundary) error {
	_, buf := o.Alloc([]RootSpec{{Name: "tmp", DType: FP32, Shape: []int64{4, 8}}})
	k1 := Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 1, -1}, BlockNum: 1,
		Args:    []Arg{{Tag: TagInput, View: b.Tensors[0].View}, {Tag: TagOutputExisting, View: NewView(buf, 0, FP32, 4, 8)}},
		Scalars: []Scalar{b.Scalars[0], Static(7)}}
	o.Submit(&k1)
	out := b.Tensors[1].View
	out.Offset += 8
	out.Shape[0] = 1
	k2 := Task{Kind: KindAIC, Kernel: [3]KernelID{2, -1, -1}, BlockNum: 2,
		Args: []Arg{{Tag: TagInput, View: NewView(buf, 8, FP32, 8)}, {Tag: TagInOut, View: out}}}
	o.Submit(&k2)
	return nil
}

func smallCall(in, out RootID) *GraphCall {
	return &GraphCall{Key: "small", Boundary: []Arg{
		{Tag: TagInput, View: NewView(in, 0, FP32, 4, 8)},
		{Tag: TagInOut, View: NewView(out, 0, FP32, 4, 8)},
	}, Scalars: []uint64{42}, Body: smallBody}
}

func record(t *testing.T, call *GraphCall, roots []BoundaryRoot) (*Definition, *Recorder) {
	t.Helper()
	var r Recorder
	r.Reset(call.Key, FullKey("test", call.Key, call.Config), call.Boundary, roots, len(call.Scalars), call.ExtDeps)
	call.Body(&r, call.NewBoundary())
	d, err := r.Build()
	if err != nil {
		t.Fatal(err)
	}
	return d, &r
}

func TestRecordClassifiesSources(t *testing.T) {
	d, r := record(t, smallCall(0, 1), []BoundaryRoot{{Elems: 32}, {Elems: 32}})
	if len(d.Nodes) != 3 || len(r.Defects) != 0 {
		t.Fatalf("nodes %d defects %v", len(d.Nodes), r.Defects)
	}
	want := []struct {
		src   SourceKind
		slot  int32
		delta int64
	}{
		{SrcOwnOutput, 0, 0},     // alloc
		{SrcBoundaryExact, 0, 0}, // k1 input
		{SrcInternal, 0, 0},      // k1 writes tmp
		{SrcInternal, 0, 8},      // k2 reads tmp[8:]
		{SrcBoundaryView, 1, 8},  // k2 writes slot 1 + 8
	}
	for i, w := range want {
		got := d.Tensors[i]
		if got.Src != w.src || got.Slot != w.slot || got.Delta != w.delta {
			t.Errorf("tensor %d: got %+v, want %+v", i, got, w)
		}
	}
	if s := d.Scalars[0]; !s.Boundary || s.Slot != 0 {
		t.Errorf("scalar 0 should be boundary slot 0, got %+v", s)
	}
	if s := d.Scalars[1]; s.Boundary || s.Value != 7 {
		t.Errorf("scalar 1 should be static 7, got %+v", s)
	}
	// k1 depends on the alloc (creator), k2 on k1 (TensorMap) and the alloc.
	if f := d.Fanin[d.Nodes[2].Fanin.Off : d.Nodes[2].Fanin.Off+d.Nodes[2].Fanin.N]; len(f) != 2 {
		t.Errorf("k2 fanin %v", f)
	}
	if ws := d.WrittenSlots(); len(ws) != 1 || ws[0] != 1 {
		t.Errorf("written slots %v", ws)
	}
}

func TestRecordUnsupported(t *testing.T) {
	cases := map[string]BodyFunc{
		// A nested call is a child Definition (nested.go), but not over a
		// tensor the body neither received nor allocated.
		"nested outside": func(o Submitter, b *Boundary) error { o.Graph(smallCall(5, 1)); return nil },
		"unclassifiable": func(o Submitter, b *Boundary) error {
			o.Submit(&Task{Kind: KindAIV, Args: []Arg{{Tag: TagInput, View: NewView(5, 0, FP32, 1)}}})
			return nil
		},
		"cross-boundary dep": func(o Submitter, b *Boundary) error {
			o.Submit(&Task{Kind: KindAIV, Deps: []TaskID{3}})
			return nil
		},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			call := smallCall(0, 1)
			call.Body = body
			var r Recorder
			r.Reset(call.Key, 1, call.Boundary, []BoundaryRoot{{Elems: 32}, {Elems: 32}}, 1, call.ExtDeps)
			body(&r, call.NewBoundary())
			if _, err := r.Build(); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("got %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestRecordDetectsInputWritten(t *testing.T) {
	call := smallCall(0, 1)
	call.Boundary[1].Tag = TagInput
	_, r := record(t, call, []BoundaryRoot{{Elems: 32}, {Elems: 32}})
	if len(r.Defects) != 1 || r.Defects[0].Kind != DefectInputWritten || r.Defects[0].Slot != 1 {
		t.Fatalf("defects %v", r.Defects)
	}
}

func TestMatchBoundary(t *testing.T) {
	d, _ := record(t, smallCall(0, 1), []BoundaryRoot{{Elems: 32}, {Elems: 32}})
	o := NewOrdinaryPath([]Root{
		{Name: "a", DType: FP32, Elems: 32}, {Name: "b", DType: FP32, Elems: 32},
		{Name: "c", DType: FP32, Elems: 32}, {Name: "big", DType: FP32, Elems: 64},
	})
	var m Matcher
	tests := []struct {
		name string
		call *GraphCall
		what string
	}{
		{"other roots", smallCall(2, 0), ""},
		{"aliased", smallCall(2, 2), "alias partition"},
		{"root size", smallCall(3, 0), "root size"},
	}
	for _, tc := range tests {
		mm := m.Match(d, tc.call, o)
		switch {
		case tc.what == "" && mm != nil:
			t.Errorf("%s: unexpected mismatch %v", tc.name, mm)
		case tc.what != "" && (mm == nil || mm.What != tc.what):
			t.Errorf("%s: got %v, want %s mismatch", tc.name, mm, tc.what)
		}
	}
	c := smallCall(0, 1)
	c.Boundary[0].View.Shape[1] = 4
	if mm := m.Match(d, c, o); mm == nil || mm.What != "layout" {
		t.Errorf("layout: got %v", mm)
	}
	c = smallCall(0, 1)
	c.Boundary[0].Tag = TagInOut
	if mm := m.Match(d, c, o); mm == nil || mm.What != "tag" {
		t.Errorf("tag: got %v", mm)
	}
	c = smallCall(0, 1)
	c.Scalars = append(c.Scalars, 1)
	if mm := m.Match(d, c, o); mm == nil || mm.What != "scalar count" {
		t.Errorf("scalar count: got %v", mm)
	}
}

// extBody waits on the call's external dependencies: node 1 on slot 0,
// node 2 on slots 0 and 1 (passed as the caller's task ids).
func extBody(deps []TaskID) BodyFunc {
	return func(o Submitter, b *Boundary) error {
		k1 := o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 1, -1}, BlockNum: 1, Deps: []TaskID{deps[0], NoTask},
			Args: []Arg{{Tag: TagInput, View: b.Tensors[0].View}}})
		o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 1, -1}, BlockNum: 1, Deps: []TaskID{k1, deps[1], deps[0]},
			Args: []Arg{{Tag: TagInOut, View: b.Tensors[1].View}}})
		return nil
	}
}

func extCall(in, out RootID, deps ...TaskID) *GraphCall {
	c := smallCall(in, out)
	c.Key, c.ExtDeps = "ext", deps
	c.Body = extBody(deps)
	return c
}

// TestRecordExtDeps: a body's dependency on a task the call passed as an
// external dependency becomes a slot the Definition records (the nodes that
// wait on it), not an internal edge; one on another outside task is still
// unsupported.
func TestRecordExtDeps(t *testing.T) {
	roots := []BoundaryRoot{{Elems: 32}, {Elems: 32}}
	d, _ := record(t, extCall(0, 1, 4, 7, 9), roots)
	want := [][]uint32{{0, 1}, {1}, {}}
	if !reflect.DeepEqual(d.ExtDeps, want) {
		t.Fatalf("ext deps %v, want %v", d.ExtDeps, want)
	}
	if f := d.Fanin[d.Nodes[1].Fanin.Off : d.Nodes[1].Fanin.Off+d.Nodes[1].Fanin.N]; !reflect.DeepEqual(f, []uint32{0}) {
		t.Errorf("node 1 internal fanin %v, want [0]", f)
	}
	if d.Nodes[0].Fanin.N != 0 {
		t.Errorf("node 0 has internal fanin %d: a node waiting only on a slot must stay a root (activated with the outer task)", d.Nodes[0].Fanin.N)
	}
	got, err := DecodeDefinition(EncodeDefinition(d))
	if err != nil || !reflect.DeepEqual(got.ExtDeps, want) {
		t.Fatalf("decoded ext deps %v (%v)", got.ExtDeps, err)
	}
	// The same task in two slots: a node naming it waits on both.
	if d, _ = record(t, extCall(0, 1, 4, 4), roots); !reflect.DeepEqual(d.ExtDeps, [][]uint32{{0, 1}, {0, 1}}) {
		t.Errorf("aliased slots: ext deps %v", d.ExtDeps)
	}
	// A dependency on a task of the caller that the call did not pass.
	c := extCall(0, 1, 4, 7)
	c.Body = extBody([]TaskID{4, 8})
	var r Recorder
	r.Reset(c.Key, 1, c.Boundary, roots, 1, c.ExtDeps)
	c.Body(&r, c.NewBoundary())
	if _, err := r.Build(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "task 8") {
		t.Fatalf("got %v, want ErrUnsupported naming task 8", err)
	}
}

// TestMatchExtDeps: the external dependency count is part of the boundary
// contract; which tasks the slots name is not.
func TestMatchExtDeps(t *testing.T) {
	d, _ := record(t, extCall(0, 1, 4, 7), []BoundaryRoot{{Elems: 32}, {Elems: 32}})
	o := NewOrdinaryPath([]Root{{Name: "a", DType: FP32, Elems: 32}, {Name: "b", DType: FP32, Elems: 32}})
	var m Matcher
	if mm := m.Match(d, extCall(1, 0, 2, 3), o); mm != nil {
		t.Errorf("other tasks: unexpected %v", mm)
	}
	for _, deps := range [][]TaskID{{2}, {2, 3, 5}, nil} {
		mm := m.Match(d, extCall(0, 1, deps...), o)
		if mm == nil || mm.What != "external dependency count" || mm.Got != fmt.Sprint(len(deps)) || mm.Want != "2" {
			t.Errorf("%d slots: got %v, want an external dependency count mismatch", len(deps), mm)
		}
	}
}

// TestSubmitGraphWaitsOnExtDeps: the outer GRAPH task's fanin holds the
// call's external dependencies besides what its boundary finds.
func TestSubmitGraphWaitsOnExtDeps(t *testing.T) {
	o := NewOrdinaryPath([]Root{{Name: "a", DType: FP32, Elems: 32}, {Name: "b", DType: FP32, Elems: 32}, {Name: "c", DType: FP32, Elems: 8}})
	w := o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 1, -1}, Args: []Arg{{Tag: TagOutputExisting, View: NewView(0, 0, FP32, 4, 8)}}})
	x := o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 1, -1}, Args: []Arg{{Tag: TagOutputExisting, View: NewView(2, 0, FP32, 8)}}})
	g := o.SubmitGraph(extCall(0, 1, x, x), GraphSubmission{}, 0, nil)
	if f := o.Fanin(g); !reflect.DeepEqual(f, []TaskID{x, w}) {
		t.Fatalf("outer task fanin %v, want [%d %d] (the ext dep, then the boundary's producer)", f, x, w)
	}
}

// predBody is smallBody with a predicate on its second node.
func predBody(o Submitter, b *Boundary) error {
	_, buf := o.Alloc([]RootSpec{{Name: "flag", DType: INT32, Shape: []int64{4}}})
	o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 1, -1}, BlockNum: 1,
		Args: []Arg{{Tag: TagInput, View: b.Tensors[0].View}, {Tag: TagOutputExisting, View: NewView(buf, 0, INT32, 4)}}})
	o.Submit(&Task{Kind: KindAIC, Kernel: [3]KernelID{2, -1, -1}, BlockNum: 2,
		Args: []Arg{{Tag: TagInOut, View: b.Tensors[1].View}},
		Pred: Predicate{Valid: true, Op: PredNE, View: NewView(buf, 1, INT32, 2), Index: 1, Target: -3}})
	return nil
}

// TestPublish: Publish images a recording straight from the recorder's
// buffers; its image is Build's encoded, its host part what
// DecodeDefinitionHost gives for that image, and nothing of it is shared
// with the recorder's next recording (Publish hands its node table over,
// so Build goes first). Publish ships the transitive reduction of Build's
// fanin (ReduceDefinition), or with SetFullEdges every edge, as Build has.
func TestPublish(t *testing.T) {
	for _, full := range []bool{true, false} {
		testPublish(t, full)
	}
}

func testPublish(t *testing.T, full bool) {
	roots := []BoundaryRoot{{Elems: 32}, {Elems: 32}}
	wide, wroots := wideCall(30, 291)
	pred := smallCall(0, 1)
	pred.Key, pred.Body = "pred", predBody
	calls := []struct {
		call  *GraphCall
		roots []BoundaryRoot
	}{
		{smallCall(0, 1), roots},
		{extCall(0, 1, 4, 7, 9), roots},
		{extCall(0, 1, 4, 4), roots},
		{pred, roots},
		{wide, NewOrdinaryPath(wroots).BoundaryRoots(wide.Boundary)},
	}
	var r Recorder
	r.SetFullEdges(full)
	var pubs []*Published
	var want [][]byte
	for _, c := range calls {
		call := c.call
		if err := r.RecordBody(call.Key, FullKey("test", call.Key, call.Config), call.Boundary, c.roots, call.Scalars, call.ExtDeps, call.Body); err != nil {
			t.Fatal(err)
		}
		d, err := r.Build()
		if err != nil {
			t.Fatal(err)
		}
		p := r.Publish()
		if !full {
			ReduceDefinition(d)
		}
		img := EncodeDefinition(d)
		if !bytes.Equal(p.Image, img) || p.Hash != d.ContentHash || p.Hash != p.Def.ContentHash {
			t.Fatalf("%s: Publish's image (hash %x) is not Build's encoded (hash %x)", call.Key, p.Hash, d.ContentHash)
		}
		host, written, err := DecodeDefinitionHost(img)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.Def, host) || !reflect.DeepEqual(p.Written, written) {
			t.Fatalf("%s: Publish's host part\n%+v %v\nwant DecodeDefinitionHost's\n%+v %v", call.Key, p.Def, p.Written, host, written)
		}
		pubs, want = append(pubs, p), append(want, bytes.Clone(img))
	}
	for i, p := range pubs {
		host, written, _ := DecodeDefinitionHost(want[i])
		if !bytes.Equal(p.Image, want[i]) || !reflect.DeepEqual(p.Def, host) || !reflect.DeepEqual(p.Written, written) {
			t.Fatalf("%s changed after later recordings", calls[i].call.Key)
		}
	}
}

// TestPublishFailed: a failed recording cannot be published.
func TestPublishFailed(t *testing.T) {
	c := extCall(0, 1, 4, 7)
	c.Body = extBody([]TaskID{4, 8})
	var r Recorder
	err := r.RecordBody(c.Key, 1, c.Boundary, []BoundaryRoot{{Elems: 32}, {Elems: 32}}, c.Scalars, c.ExtDeps, c.Body)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Publish of a failed recording did not panic")
		}
	}()
	r.Publish()
}

// TestSlotTable: the recorder's root -> slots table agrees with a map of
// slices, for boundaries of every width up to DSv4's widest and beyond,
// with roots shared by several slots, and is rebuilt in place.
func TestSlotTable(t *testing.T) {
	var tab slotTable
	rng := rand.New(rand.NewPCG(1, 2))
	for width := 0; width <= 70; width++ {
		for range 3 {
			boundary := make([]Arg, width)
			want := map[RootID][]int32{}
			for i := range boundary {
				id := RootID(rng.IntN(max(width, 1)) * 1009)
				boundary[i].View.Root = id
				want[id] = append(want[id], int32(i))
			}
			tab.reset(boundary)
			for id, slots := range want {
				if got := tab.get(id); !slices.Equal(got, slots) {
					t.Fatalf("width %d root %d: slots %v, want %v", width, id, got, slots)
				}
			}
			for _, id := range []RootID{-1, 1, 1008, 1 << 30} {
				if got := tab.get(id); want[id] == nil && got != nil {
					t.Fatalf("width %d: root %d not in the boundary has slots %v", width, id, got)
				}
			}
		}
	}
}

// FuzzTensorRecord: the recorder's record writers (tensorRecord, and
// allocRecord for a whole fresh root) write the bytes writer.tensorRef
// writes for the same template, whatever the layout.
func FuzzTensorRecord(f *testing.F) {
	f.Add(uint8(TagInput), uint8(SrcBoundaryView), uint8(FP32), uint8(2), int32(3), int64(-8), int64(4), int64(16), int64(0), int64(16), int64(1), false)
	f.Add(uint8(TagOutput), uint8(SrcOwnOutput), uint8(BF16), uint8(5), int32(1<<30), int64(1<<40), int64(1<<33), int64(-1), int64(-3), int64(7), int64(0), true)
	f.Fuzz(func(t *testing.T, tag, src, dt, nd uint8, slot int32, delta, d0, d1, s0, s1, s2 int64, strided bool) {
		nd %= MaxDims + 1
		shape := make([]int64, nd)
		for i := range shape {
			shape[i] = []int64{d0, d1, s0}[i%3] + int64(i)
		}
		v := NewView(0, 0, DType(dt), shape...)
		if strided && nd > 0 {
			v.Strides[0], v.Strides[nd-1] = s1, s2
		}
		ref := TensorRef{Tag: Tag(tag & 0xf), Src: SourceKind(src & 0xf), Slot: slot, Delta: delta, Layout: v}
		var want, got writer
		want.tensorRef(&ref)
		got.tensorRecord(uint8(ref.Tag)|uint8(ref.Src)<<4, &v, slot, delta)
		if !bytes.Equal(got.B, want.B) {
			t.Fatalf("tensorRecord wrote % x, tensorRef % x", got.B, want.B)
		}
		whole := TensorRef{Tag: TagOutput, Src: SrcOwnOutput, Slot: slot, Layout: NewView(0, 0, DType(dt), shape...)}
		want.B, got.B = want.B[:0], got.B[:0]
		want.tensorRef(&whole)
		got.allocRecord(DType(dt), shape, slot)
		if !bytes.Equal(got.B, want.B) {
			t.Fatalf("allocRecord wrote % x, tensorRef % x", got.B, want.B)
		}
	})
}
