package stages

import (
	"bytes"
	"strings"
	"testing"
)

// nestedStep is a parent body that calls child twice (two row ranges of its
// boundary, through a buffer it allocates) and reads the result.
func nestedStep(child BodyFunc) BodyFunc {
	return func(o Submitter, b *Boundary) error {
		_, buf := o.Alloc([]RootSpec{{Name: "buf", DType: FP32, Shape: []int64{8, 16}}})
		for c := int64(0); c < 2; c++ {
			o.Graph(&GraphCall{
				Key: "child",
				Boundary: []Arg{
					{Tag: TagInput, View: NewView(b.Tensors[0].View.Root, b.Tensors[0].View.Offset+c*64, FP32, 4, 16)},
					{Tag: TagOutputExisting, View: NewView(buf, c*64, FP32, 4, 16)},
				},
				Scalars: []uint64{b.Scalars[0].Value}, ScalarSrc: []int32{b.Scalars[0].Src},
				Body: child, KeyComplete: true,
			})
		}
		o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 1,
			Args:    []Arg{{Tag: TagInput, View: NewView(buf, 0, FP32, 8, 16)}, {Tag: TagOutputExisting, View: b.Tensors[1].View}},
			Scalars: []Scalar{Static(3)}})
		return nil
	}
}

func nestedChild(o Submitter, b *Boundary) error {
	_, tmp := o.Alloc([]RootSpec{{Name: "tmp", DType: FP32, Shape: []int64{4, 16}}})
	o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 2,
		Args:    []Arg{{Tag: TagInput, View: b.Tensors[0].View}, {Tag: TagOutputExisting, View: NewView(tmp, 0, FP32, 4, 16)}},
		Scalars: []Scalar{b.Scalars[0]}})
	o.Submit(&Task{Kind: KindAIC, Kernel: [3]KernelID{1, -1, -1}, BlockNum: 1,
		Args: []Arg{{Tag: TagInput, View: NewView(tmp, 0, FP32, 4, 16)}, {Tag: TagOutputExisting, View: b.Tensors[1].View}}})
	return nil
}

func recordNested(t testing.TB) *Published {
	t.Helper()
	var r Recorder
	r.SetIdentity(42)
	bound := []Arg{
		{Tag: TagInput, View: NewView(0, 0, FP32, 8, 16)},
		{Tag: TagOutputExisting, View: NewView(1, 0, FP32, 8, 16)},
	}
	if err := r.RecordBody("step", 7, bound, []BoundaryRoot{{Elems: 128}, {Elems: 128}}, []uint64{9}, nil, nestedStep(nestedChild)); err != nil {
		t.Fatal(err)
	}
	return r.Publish()
}

// TestRecordNested: a Graph call inside a recorded body is a child
// Definition, recorded once for both calls, that the parent's own image
// refers to by content hash; the image the device runs is its flattening,
// whose nodes are the parent's own and each call's child nodes, bound to
// the parent's boundary and buffer, the child's scalar to the parent's
// patched slot; describe lists the child by hash.
func TestRecordNested(t *testing.T) {
	p := recordNested(t)
	if p.Nested == nil || len(p.Children) != 1 {
		t.Fatalf("nested image %d bytes, %d children, want one child", len(p.Nested), len(p.Children))
	}
	own, err := DecodeDefinition(p.Nested)
	if err != nil {
		t.Fatal(err)
	}
	cs := own.Children()
	_, childHash := p.Children[0].OwnImage()
	if len(cs) != 2 || cs[0].Hash != childHash || cs[1].Hash != childHash || cs[0].FullKey != fullKeyFrom(42, "child", nil) {
		t.Fatalf("children %+v, want two calls of %016x", cs, childHash)
	}
	flat, err := DecodeDefinition(p.Image)
	if err != nil {
		t.Fatal(err)
	}
	if flat.Nested() || len(flat.Nodes) != 1+2*3+1 || len(flat.Roots) != 3 || flat.ContentHash != p.Hash {
		t.Fatalf("flat: %d nodes, %d roots, nested %v", len(flat.Nodes), len(flat.Roots), flat.Nested())
	}
	// The second call's scale node (node 5): its input is the parent's slot
	// 0 four rows on, its scalar the parent's boundary scalar 0.
	nd := &flat.Nodes[5]
	if in := flat.Tensors[nd.Tensors.Off]; in.Src != SrcBoundaryView || in.Slot != 0 || in.Delta != 64 {
		t.Errorf("second call's input %+v, want slot 0 + 64", in)
	}
	if sc := flat.Scalars[nd.Scalars.Off]; !sc.Boundary || sc.Slot != 0 {
		t.Errorf("second call's scalar %+v, want boundary scalar 0", sc)
	}
	// Its output: the parent's buffer (root 0), rows 4..7.
	mm := &flat.Nodes[6]
	if out := flat.Tensors[mm.Tensors.Off+1]; out.Src != SrcInternal || out.Slot != 0 || out.Delta != 64 {
		t.Errorf("second call's output %+v, want internal root 0 + 64", out)
	}
	// The last node waits on both calls' last nodes.
	last := &flat.Nodes[7]
	if f := flat.Fanin[last.Fanin.Off : last.Fanin.Off+last.Fanin.N]; len(f) != 2 || f[0] != 3 || f[1] != 6 {
		t.Errorf("last node's fanin %v, want [3 6]", f)
	}
	var sb bytes.Buffer
	if err := DescribeImage(&sb, p.Nested); err != nil {
		t.Fatal(err)
	}
	if want := "children: 2 Graph calls of 1 Definitions"; !strings.Contains(sb.String(), want) || !strings.Contains(sb.String(), "child Definition ") {
		t.Errorf("describe of the nested image lacks %q:\n%s", want, sb.String())
	}
}
