package stages

import (
	"reflect"
	"testing"
)

// tile is a [rows, n] tile at (r0, c0) of a row-major [R, C] root: the
// parent's row stride C, kept.
func tile(root RootID, C, r0, c0, rows, n int64) View {
	v := NewView(root, r0*C+c0, FP32, rows, n)
	v.Strides[0] = C
	return v
}

// TestStridedView: a tile of a wider tensor spans its rows whole (the
// dependency rule's interval), is not contiguous, and survives both images
// with its strides.
func TestStridedView(t *testing.T) {
	v := tile(0, 16, 1, 3, 4, 5)
	if v.Contiguous() || v.Elems() != 20 || v.Span() != 3*16+5 || v.End() != 19+53 {
		t.Fatalf("tile: contiguous %v elems %d span %d end %d; want false, 20, 53, 72", v.Contiguous(), v.Elems(), v.Span(), v.End())
	}
	if c := NewView(0, 7, FP32, 4, 16); !c.Contiguous() || c.Span() != 64 || c.End() != 71 {
		t.Fatalf("contiguous view: span %d end %d", c.Span(), c.End())
	}
	img := &RunImage{
		Tasks:   []TaskDesc{{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 1, Args: Span{0, 1}, Graph: -1}},
		Args:    []Arg{{Tag: TagInput, View: v}},
		Scalars: []uint64{}, Fanin: []TaskID{}, Roots: []RootDesc{}, Graphs: []GraphSubmission{},
	}
	got, err := DecodeRunImage(EncodeRunImage(img))
	if err != nil {
		t.Fatal(err)
	}
	if got.Args[0].View != v {
		t.Fatalf("run image round trip: %+v, want %+v", got.Args[0].View, v)
	}
}

// TestStridedBoundary: a Graph whose boundary slot is a strided tile
// records its strides in the signature and the Definition image; a call
// with the same tile elsewhere matches, and one with the same shape but
// another stride (a contiguous [4, 5]) does not: a stride is part of the
// layout a replay may not change.
func TestStridedBoundary(t *testing.T) {
	entry := []Root{{Name: "kc", Kind: RootEntry, DType: FP32, Shape: []int64{16, 16}, Elems: 256},
		{Name: "flat", Kind: RootEntry, DType: FP32, Shape: []int64{64}, Elems: 64}}
	o := NewOrdinaryPath(entry)
	body := func(s Submitter, b *Boundary) error {
		s.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 1, Args: []Arg{{Tag: TagInput, View: b.Tensors[0].View}}})
		return nil
	}
	call := func(v View) *GraphCall {
		return &GraphCall{Key: "tile", Boundary: []Arg{{Tag: TagInput, View: v}}, Body: body}
	}
	first := call(tile(0, 16, 0, 0, 4, 5))
	var rec Recorder
	d, err := rec.Record("tile", 1, first.Boundary, o.BoundaryRoots(first.Boundary), nil, nil, first.Body)
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Boundary[0].Layout; s.Strides[0] != 16 || s.Shape != [MaxDims]int64{4, 5} {
		t.Fatalf("signature layout %+v, want shape [4 5] strides [16 1]", s)
	}
	img := EncodeDefinition(d)
	back, err := DecodeDefinition(img)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Boundary, d.Boundary) || back.Tensors[0].Layout.Strides != d.Tensors[0].Layout.Strides {
		t.Fatalf("Definition image lost the strides: %+v, want %+v", back.Boundary, d.Boundary)
	}
	var m Matcher
	if mm := m.Match(d, call(tile(0, 16, 8, 11, 4, 5)), o); mm != nil {
		t.Errorf("the same tile elsewhere: %v, want a match", mm)
	}
	if mm := m.Match(d, call(NewView(0, 0, FP32, 4, 5)), o); mm == nil {
		t.Error("a contiguous [4 5] matched a Definition recorded with a [4 5] tile of stride 16")
	}
}
