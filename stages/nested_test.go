package stages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/stages/imagefmt"
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

// FuzzNestedDefinition feeds a nested Definition's own image, as a store
// hands it back, mutated (and with its content hash fixed up, so the checks
// behind it are reached), to what reads one: decode, describe, and
// assembly over the recording's children. None may panic; an assembly
// either fails (ErrBadImage or ErrChild) or yields a flattening the device
// decodes, whose children are the ones the image names.
func FuzzNestedDefinition(f *testing.F) {
	p := recordNested(f)
	f.Add(p.Nested)
	f.Add(p.Children[0].Image)
	byHash := map[uint64]*Published{}
	for _, c := range p.Children {
		_, h := c.OwnImage()
		byHash[h] = c
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fix := range []bool{false, true} {
			c := append([]byte(nil), b...)
			if fix {
				if len(c) < defHeaderSize || string(c[:4]) != DefinitionMagic {
					return
				}
				binary.LittleEndian.PutUint64(c[hashOff:], imagefmt.Hash(c, hashOff))
			}
			describeOK(t, c)
			if _, err := DecodeDefinition(c); err != nil && !errors.Is(err, ErrBadImage) {
				t.Fatalf("DecodeDefinition: %v, want nil or an ErrBadImage", err)
			}
			a, err := AssembleNested(c, func(ch Child) (*Published, error) { return byHash[ch.Hash], nil }, true)
			if err != nil {
				if !errors.Is(err, ErrBadImage) && !errors.Is(err, ErrChild) {
					t.Fatalf("AssembleNested: %v, want an ErrBadImage or an ErrChild", err)
				}
				continue
			}
			flat, err := DecodeDefinition(a.Image)
			if err != nil || flat.Nested() {
				t.Fatalf("an assembled flattening does not decode flat: %v", err)
			}
			own, _ := DecodeDefinition(c)
			for _, ch := range own.Children() {
				if byHash[ch.Hash] == nil {
					t.Fatalf("assembled over child %016x, which is none of the recording's", ch.Hash)
				}
			}
		}
	})
}

// TestNestedMutated: a nested Definition whose child reference names other
// bytes, or whose child is not there, is refused whole (ErrChild).
func TestNestedMutated(t *testing.T) {
	p := recordNested(t)
	child := p.Children[0]
	_, ch := child.OwnImage()
	give := func(c Child) (*Published, error) {
		if c.Hash == ch {
			return child, nil
		}
		return nil, nil
	}
	if _, err := AssembleNested(p.Nested, give, true); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	if _, err := AssembleNested(p.Nested, func(Child) (*Published, error) { return nil, nil }, true); !errors.Is(err, ErrChild) {
		t.Fatalf("child removed: %v, want ErrChild", err)
	}
	// The child's bytes changed (and rehashed: a valid Definition, but not
	// the one the parent names).
	other := *child
	other.Image = append([]byte(nil), child.Image...)
	other.Image[len(other.Image)-1] ^= 1 // the key's last byte
	binary.LittleEndian.PutUint64(other.Image[hashOff:], imagefmt.Hash(other.Image, hashOff))
	other.Hash = DefinitionHash(other.Image)
	if _, err := AssembleNested(p.Nested, func(Child) (*Published, error) { return &other, nil }, true); !errors.Is(err, ErrChild) {
		t.Fatalf("child changed: %v, want ErrChild", err)
	}
	// The parent names another child.
	mut := append([]byte(nil), p.Nested...)
	own, _ := DecodeDefinition(mut)
	at := int(binary.LittleEndian.Uint32(mut[defSecAt+4*dsNodes:])) + nodeRecSize*own.Children()[0].Node + imagefmt.NodeBlockNumAt
	mut[at] ^= 1
	binary.LittleEndian.PutUint64(mut[hashOff:], imagefmt.Hash(mut, hashOff))
	if _, err := AssembleNested(mut, give, true); !errors.Is(err, ErrChild) {
		t.Fatalf("reference changed: %v, want ErrChild", err)
	}
	// The device refuses a nested image uploaded unflattened: only
	// flattenings are run (npu's check; the decode here takes it).
	if d, err := DecodeDefinition(p.Nested); err != nil || !d.Nested() {
		t.Fatalf("the nested image decodes as nested: %v", err)
	}
}

// TestNestedForeignRoot: a child body that reaches past its boundary to a
// tensor its parent allocated (a closure's, say) fails the recording
// loudly (ErrUnsupported), never taken for a tensor of the child's own: a
// child numbers its roots after its parent's. Two levels deep, a
// grandchild's binding composes through both.
func TestNestedForeignRoot(t *testing.T) {
	var r Recorder
	bound := []Arg{{Tag: TagInput, View: NewView(0, 0, FP32, 8, 16)}, {Tag: TagOutputExisting, View: NewView(1, 0, FP32, 8, 16)}}
	roots := []BoundaryRoot{{Elems: 128}, {Elems: 128}}
	var buf RootID
	leak := func(o Submitter, b *Boundary) error {
		_, tmp := o.Alloc([]RootSpec{{Name: "tmp", DType: FP32, Shape: []int64{4, 16}}})
		o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 1,
			Args: []Arg{{Tag: TagInput, View: NewView(buf, 0, FP32, 4, 16)}, {Tag: TagOutputExisting, View: NewView(tmp, 0, FP32, 4, 16)}}})
		return nil
	}
	parent := func(o Submitter, b *Boundary) error {
		_, buf = o.Alloc([]RootSpec{{Name: "buf", DType: FP32, Shape: []int64{4, 16}}})
		o.Graph(&GraphCall{Key: "leak", Boundary: []Arg{{Tag: TagInOut, View: NewView(b.Tensors[1].View.Root, 0, FP32, 4, 16)}}, Body: leak})
		return nil
	}
	err := r.RecordBody("parent", 1, bound, roots, nil, nil, parent)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "neither a boundary tensor nor allocated in the body") {
		t.Fatalf("a child reaching its parent's buffer: %v, want ErrUnsupported (unclassifiable)", err)
	}
	// Two levels: step -> mid -> nestedChild, over the mid's own buffer.
	mid := func(o Submitter, b *Boundary) error {
		_, m := o.Alloc([]RootSpec{{Name: "m", DType: FP32, Shape: []int64{4, 16}}})
		o.Graph(&GraphCall{Key: "child", Boundary: []Arg{{Tag: TagInput, View: b.Tensors[0].View}, {Tag: TagOutputExisting, View: NewView(m, 0, FP32, 4, 16)}},
			Scalars: []uint64{b.Scalars[0].Value}, ScalarSrc: []int32{b.Scalars[0].Src}, Body: nestedChild, KeyComplete: true})
		o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 1,
			Args: []Arg{{Tag: TagInput, View: NewView(m, 0, FP32, 4, 16)}, {Tag: TagOutputExisting, View: b.Tensors[1].View}}})
		return nil
	}
	top := func(o Submitter, b *Boundary) error {
		o.Graph(&GraphCall{Key: "mid", Boundary: []Arg{{Tag: TagInput, View: NewView(b.Tensors[0].View.Root, 64, FP32, 4, 16)}, {Tag: TagOutputExisting, View: NewView(b.Tensors[1].View.Root, 64, FP32, 4, 16)}},
			Scalars: []uint64{b.Scalars[0].Value}, ScalarSrc: []int32{b.Scalars[0].Src}, Body: mid, KeyComplete: true})
		return nil
	}
	if err := r.RecordBody("top", 2, bound, roots, []uint64{5}, nil, top); err != nil {
		t.Fatal(err)
	}
	p := r.Publish()
	flat, err := DecodeDefinition(p.Image)
	if err != nil || len(p.Children) != 1 || len(p.Children[0].Children) != 1 {
		t.Fatalf("flat %v, %d children", err, len(p.Children))
	}
	// Nodes: mid's alloc m, child's alloc tmp, scale, mm, mid's last.
	if len(flat.Nodes) != 5 || len(flat.Roots) != 2 {
		t.Fatalf("%d nodes, %d roots, want 5 and 2", len(flat.Nodes), len(flat.Roots))
	}
	scale := &flat.Nodes[2]
	if in := flat.Tensors[scale.Tensors.Off]; in.Src != SrcBoundaryView || in.Slot != 0 || in.Delta != 64 {
		t.Errorf("the grandchild's input %+v, want top's slot 0 + 64", in)
	}
	if sc := flat.Scalars[scale.Scalars.Off]; !sc.Boundary || sc.Slot != 0 {
		t.Errorf("the grandchild's scalar %+v, want top's boundary scalar 0", sc)
	}
	mm := &flat.Nodes[3]
	if out := flat.Tensors[mm.Tensors.Off+1]; out.Src != SrcInternal || out.Slot != 0 {
		t.Errorf("the grandchild's output %+v, want mid's buffer (flat root 0)", out)
	}
}
