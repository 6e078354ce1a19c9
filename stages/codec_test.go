package stages

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// codecDef is a small Definition exercising every section: all four source
// kinds, static and boundary scalars, a predicate, a strided layout, an
// aliased boundary slot, a diamond of internal edges and three external
// dependency slots (one waited on by two nodes, one by none).
func codecDef() *Definition {
	v := func(dt DType, shape ...int64) View {
		x := NewView(0, 0, dt, shape...)
		return x
	}
	strided := v(FP32, 4, 8)
	strided.Strides = [MaxDims]int64{1, 4} // a transposed view
	d := &Definition{
		FullKey: 0x1122334455667788,
		Key:     "moe_block",
		Nodes: []NodeDesc{
			{Kind: KindAlloc, Kernel: [3]KernelID{-1, -1, -1}, BlockNum: -1, Tensors: Span{0, 1}, Scalars: Span{0, 0}, Fanin: Span{0, 0}},
			{Kind: KindAIC, Kernel: [3]KernelID{7, -1, -1}, BlockNum: 4, Launch: LaunchEarly, Tensors: Span{1, 3}, Scalars: Span{0, 2}, Fanin: Span{0, 1}},
			{Kind: KindAIV, Kernel: [3]KernelID{-1, 9, -1}, BlockNum: 2, Tensors: Span{4, 2}, Scalars: Span{2, 1}, Fanin: Span{1, 1}, Pred: 1},
			{Kind: KindMIX, Kernel: [3]KernelID{11, 12, 12}, BlockNum: 8, Launch: LaunchEarly | LaunchSyncStart, Tensors: Span{6, 2}, Scalars: Span{3, 0}, Fanin: Span{2, 2}},
			{Kind: KindDummy, Kernel: [3]KernelID{-1, -1, -1}, BlockNum: -1, Tensors: Span{8, 0}, Scalars: Span{3, 0}, Fanin: Span{4, 2}},
		},
		Preds: []PredRef{{Valid: true, Op: PredGT, Tensor: TensorRef{Tag: TagInput, Src: SrcBoundaryView, Slot: 2, Delta: 3, Layout: v(INT32, 4)}, Index: 1, Target: 0}},
		Tensors: []TensorRef{
			{Tag: TagOutput, Src: SrcOwnOutput, Slot: 0, Layout: v(BF16, 16, 64)},
			{Tag: TagInput, Src: SrcBoundaryExact, Slot: 0, Layout: v(BF16, 16, 64)},
			{Tag: TagInput, Src: SrcBoundaryView, Slot: 1, Delta: 4096, Layout: strided},
			{Tag: TagOutputExisting, Src: SrcInternal, Slot: 0, Delta: 64, Layout: v(BF16, 8, 64)},
			{Tag: TagInput, Src: SrcInternal, Slot: 0, Layout: v(BF16, 16, 64)},
			{Tag: TagInOut, Src: SrcBoundaryExact, Slot: 3, Layout: v(FP32, 16)},
			{Tag: TagNoDep, Src: SrcBoundaryExact, Slot: 1, Layout: v(FP32, 32, 4)},
			{Tag: TagOutput, Src: SrcOwnOutput, Slot: 1, Layout: v(INT8, 1<<20)},
		},
		Scalars: []ScalarRef{
			{Slot: -1, Value: 42},
			{Boundary: true, Slot: 1},
			{Slot: -1, Value: 1<<63 + 5},
		},
		Fanin: []uint32{0, 1, 1, 2, 3, 2},
		Roots: []InternalRoot{
			{DType: BF16, Elems: 1024, Creator: 0, HeapOffset: 0},
			{DType: INT8, Elems: 1 << 20, Creator: 3, ManualDep: true, HeapOffset: 2048},
		},
		Boundary: []BoundarySlot{
			{Tag: TagInput, Layout: v(BF16, 16, 64), RootElems: 1 << 20, AliasRep: -1},
			{Tag: TagInput, Layout: v(FP32, 32, 4), RootElems: 1 << 16, AliasRep: -1},
			{Tag: TagInput, Layout: v(INT32, 32, 1), RootElems: 32, AliasRep: -1},
			{Tag: TagInOut, Layout: v(FP32, 16), RootElems: 1 << 16, AliasRep: 1},
		},
		BoundaryScalars: 2,
		ExtDeps:         [][]uint32{{1, 3}, {}, {2}},
		HeapBytes:       2048 + 1<<20,
	}
	return d
}

func codecRun() *RunImage {
	v := NewView
	img := &RunImage{
		Tasks: []TaskDesc{
			{Kind: KindAlloc, Kernel: [3]KernelID{-1, -1, -1}, BlockNum: -1, Args: Span{0, 1}, Graph: -1},
			{Kind: KindAIV, Kernel: [3]KernelID{-1, 3, -1}, BlockNum: 8, Args: Span{1, 2}, Scalars: Span{0, 2}, Fanin: Span{0, 1}, Graph: -1,
				Pred: Predicate{Valid: true, Op: PredNE, View: v(2, 5, INT32, 4), Index: 2, Target: -7}},
			{Kind: KindGraph, Kernel: [3]KernelID{-1, -1, -1}, BlockNum: -1, Args: Span{3, 2}, Scalars: Span{2, 1}, Fanin: Span{1, 2}, Graph: 0},
			{Kind: KindMIX, Kernel: [3]KernelID{1, 2, 2}, BlockNum: 24, Launch: LaunchSyncStart | LaunchEarly, Args: Span{5, 1}, Fanin: Span{3, 1}, Graph: -1},
		},
		Args: []Arg{
			{Tag: TagOutput, View: v(3, 0, FP16, 128)},
			{Tag: TagInput, View: v(0, 1<<33, INT8, 4, 4096)},
			{Tag: TagInOut, View: v(3, 0, FP16, 128)},
			{Tag: TagInput, View: v(1, 7, BF16, 2, 2)},
			{Tag: TagOutputExisting, View: v(3, 64, FP16, 64)},
			{Tag: TagInput, View: v(3, 0, FP16, 128)},
		},
		Scalars:   []uint64{1, 2, ^uint64(0)},
		Fanin:     []TaskID{0, 0, 1, 2},
		Roots:     []RootDesc{{ID: 3, DType: FP16, Elems: 128, Creator: 0, Addr: 0}},
		Graphs:    []GraphSubmission{{Task: 2, FullKey: 0xabc, DefHash: 0xdef, Boundary: Span{3, 2}, Scalars: Span{2, 1}, HeapBase: 512}},
		HeapBytes: 4096,
	}
	img.Args[3].View.Strides = [MaxDims]int64{1, 2}
	return img
}

// normalizedDef is what a Definition should decode back to: boundary
// scalars carry no value (it is patched per replay, not stored).
func normalizedDef(d *Definition) *Definition {
	c := *d
	c.Scalars = append([]ScalarRef(nil), d.Scalars...)
	for i := range c.Scalars {
		if c.Scalars[i].Boundary {
			c.Scalars[i].Value = 0
		}
	}
	return &c
}

func TestDefinitionRoundTrip(t *testing.T) {
	d := codecDef()
	d.Scalars[1].Value = 99 // a record-time value; not part of the image
	b := EncodeDefinition(d)
	if d.ContentHash == 0 || DefinitionHash(b) != d.ContentHash {
		t.Fatalf("content hash not set: %#x vs header %#x", d.ContentHash, DefinitionHash(b))
	}
	got, err := DecodeDefinition(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := normalizedDef(d); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, want)
	}
	// Re-encoding is byte-identical, and the record-time boundary scalar
	// value does not change the content hash.
	d2 := codecDef()
	d2.Scalars[1].Value = 12345
	if b2 := EncodeDefinition(d2); string(b2) != string(b) {
		t.Fatal("record-time boundary scalar value changed the image")
	}
	if per := len(b) / len(d.Nodes); per > 400 {
		t.Errorf("%d bytes per node", per)
	}
}

func TestRunImageRoundTrip(t *testing.T) {
	img := codecRun()
	b := EncodeRunImage(img)
	got, err := DecodeRunImage(b)
	if err != nil {
		t.Fatal(err)
	}
	// A Graph boundary comes back as (root, offset): its layout is the
	// Definition's, which the device fills in.
	want := *img
	want.Args = slices.Clone(img.Args)
	for _, g := range img.Graphs {
		for i := g.Boundary.Off; i < g.Boundary.Off+g.Boundary.N; i++ {
			want.Args[i].View = View{Root: img.Args[i].View.Root, Offset: img.Args[i].View.Offset}
		}
	}
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, &want)
	}
	empty := &RunImage{Tasks: []TaskDesc{}, Args: []Arg{}, Scalars: []uint64{}, Fanin: []TaskID{}, Roots: []RootDesc{}, Graphs: []GraphSubmission{}}
	got, err = DecodeRunImage(EncodeRunImage(empty))
	if err != nil || !reflect.DeepEqual(got, empty) {
		t.Fatalf("empty image: %v %+v", err, got)
	}
}

// The golden images pin the wire format: a change to either must be a
// deliberate version bump (update the constants with -run Golden -v output).
const (
	goldenDefHash = 0xbb3b686d96f86d98
	goldenRunHash = 0x440c697ccb8a41c6
	goldenDefHead = "48424744030088008877665544332211986df8966d683bbb0008100000000000"
)

func TestCodecGolden(t *testing.T) {
	b := EncodeDefinition(codecDef())
	r := EncodeRunImage(codecRun())
	t.Logf("definition %d bytes hash %#x head %s", len(b), DefinitionHash(b), hex.EncodeToString(b[:32]))
	t.Logf("run image %d bytes hash %#x", len(r), binary.LittleEndian.Uint64(r[8:]))
	head := hex.EncodeToString(b[:32])
	// bytes 16..24 hold the hash; compare around them.
	if head[:32] != goldenDefHead[:32] || head[48:] != goldenDefHead[48:] {
		t.Errorf("definition header %s, golden %s", head, goldenDefHead)
	}
	if h := DefinitionHash(b); h != goldenDefHash {
		t.Errorf("definition content hash %#x, golden %#x", h, uint64(goldenDefHash))
	}
	if h := binary.LittleEndian.Uint64(r[8:]); h != goldenRunHash {
		t.Errorf("run image content hash %#x, golden %#x", h, uint64(goldenRunHash))
	}
}

func TestDecodeRefusals(t *testing.T) {
	good := EncodeDefinition(codecDef())
	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	rehash := func(b []byte) []byte {
		binary.LittleEndian.PutUint64(b[hashOff:], imageHash(b, hashOff))
		return b
	}
	sec := func(b []byte, i int) int { return int(binary.LittleEndian.Uint32(b[defSecAt+4*i:])) }
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:10], "shorter than"},
		{"magic", mut(func(b []byte) { b[0] = 'X' }), "magic"},
		{"version", mut(func(b []byte) { b[4] = 9 }), "version 9"},
		{"hash", mut(func(b []byte) { b[len(b)-1] ^= 1 }), "does not verify"},
		{"truncated", good[:len(good)-1], "says"},
		{"forward fanin", rehash(mut(func(b []byte) {
			// node 1's only producer (node 0) becomes node 3
			binary.LittleEndian.PutUint32(b[sec(b, dsFaninIdx):], 3)
		})), "must precede"},
		{"fanout mismatch", rehash(mut(func(b []byte) {
			binary.LittleEndian.PutUint32(b[sec(b, dsFanoutIdx):], 4)
		})), "fanout CSR does not match"},
		{"ext node out of range", rehash(mut(func(b []byte) {
			binary.LittleEndian.PutUint32(b[sec(b, dsExtIdx):], 5)
		})), "external dependency slot 0 names node 5"},
		{"ext nodes not ascending", rehash(mut(func(b []byte) {
			binary.LittleEndian.PutUint32(b[sec(b, dsExtIdx)+4:], 1)
		})), "external dependency slot 0 names node 1"},
		{"ext offsets", rehash(mut(func(b []byte) {
			binary.LittleEndian.PutUint32(b[sec(b, dsExtOff)+4:], 9)
		})), "external dependency slot 0 offsets"},
		{"node kind past graph", rehash(mut(func(b []byte) { b[sec(b, dsNodes)] = uint8(KindGraph) + 1 })), "alloc or graph"},
		{"tensor span", rehash(mut(func(b []byte) {
			binary.LittleEndian.PutUint32(b[sec(b, dsNodes)+nodeRecSize+24:], 100)
		})), "exceed 8 tensors"},
		{"section order", rehash(mut(func(b []byte) {
			binary.LittleEndian.PutUint32(b[defSecAt+4*dsTensors:], uint32(len(b)+1))
		})), "out of order or out of bounds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeDefinition(c.b)
			if err == nil || !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
	rb := EncodeRunImage(codecRun())
	rb2 := append([]byte(nil), rb...)
	// Fanin pool entry 3 (task 3's producer) names task 99.
	binary.LittleEndian.PutUint32(rb2[int(binary.LittleEndian.Uint32(rb2[52+4*rsFanin:]))+12:], 99)
	binary.LittleEndian.PutUint64(rb2[runHashOff:], imageHash(rb2, runHashOff))
	if _, err := DecodeRunImage(rb2); err == nil || !strings.Contains(err.Error(), "not in the image") {
		t.Fatalf("fanin out of range: %v", err)
	}
}

// TestDecodeRunImageSpans refuses run images whose spans the device cannot
// trust: fanin spans that overlap (the device sizes its fanout CSR by the
// pool), and layout-less args anywhere but a GRAPH task's own boundary.
func TestDecodeRunImageSpans(t *testing.T) {
	shipped := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	forged := func(f func(img *RunImage)) []byte {
		img := codecRun()
		f(img)
		return EncodeRunImage(img)
	}
	cases := []struct {
		name string
		b    []byte
		want string // "" decodes
	}{
		{"shipped DSv4 full pass", shipped("dsv4-run-image-good.bin"), ""},
		// One task's fanin count changed from 3 to 7, hash recomputed.
		{"shipped overlapping fanin", shipped("dsv4-run-image-overlapping-fanin.bin"), "overlaps an earlier task's"},
		{"fanin out of task order", forged(func(img *RunImage) {
			img.Tasks[1].Fanin, img.Tasks[2].Fanin = Span{2, 1}, Span{0, 2}
		}), "overlaps an earlier task's"},
		// The encoder sends arg 3 as (root, offset), being a boundary slot.
		{"ordinary task takes a boundary slot", forged(func(img *RunImage) { img.Tasks[3].Args = Span{3, 1} }),
			"takes a Graph boundary slot sent without a layout"},
		{"GRAPH args are not its boundary", forged(func(img *RunImage) { img.Tasks[2].Args = Span{2, 3} }),
			"is not its GRAPH task 2's args"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img, err := DecodeRunImage(c.b)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b := EncodeRunImage(img); !bytes.Equal(b, c.b) {
					t.Fatal("re-encoding the decoded image changed its bytes")
				}
				return
			}
			if !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// fuzzDecode exercises a decoder on raw bytes and, with the hash fixed up,
// on the structural checks behind it. Neither may panic; a fixed-up image
// that decodes must re-encode to something that decodes to the same value.
func FuzzDecodeDefinition(f *testing.F) {
	f.Add(EncodeDefinition(codecDef()))
	f.Add(EncodeDefinition(&Definition{Key: "empty"}))
	f.Add([]byte("HBGD"))
	addImageSeeds(f, "def")
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeDefinition(b)
		if len(b) < defHeaderSize {
			return
		}
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint64(c[hashOff:], imageHash(c, hashOff))
		d, err := DecodeDefinition(c)
		if err != nil {
			return
		}
		// Into a scratch that held a larger Definition: the same value.
		scratch := fuzzScratch()
		if err := DecodeDefinitionInto(c, scratch); err != nil || !reflect.DeepEqual(normalizedDef(d), normalizedDef(scratch)) {
			t.Fatalf("decoding into a used scratch differs from a fresh decode (%v)", err)
		}
		if msg := streamAgrees(c, d); msg != "" {
			t.Fatal(msg)
		}
		d2, err := DecodeDefinition(EncodeDefinition(d))
		if err != nil {
			t.Fatalf("re-encoded definition does not decode: %v", err)
		}
		d.ContentHash, d2.ContentHash = 0, 0
		if !reflect.DeepEqual(normalizedDef(d), normalizedDef(d2)) {
			t.Fatalf("re-encode changed the definition")
		}
	})
}

// fuzzScratch is a Definition that has held a DSv4-sized decode.
func fuzzScratch() *Definition {
	d := new(Definition)
	if err := DecodeDefinitionInto(EncodeDefinition(dsv4LikeDefinition(64)), d); err != nil {
		panic(err)
	}
	return d
}

// streamAgrees reports how DecodeDefinitionFunc's decode of b differs from
// d, b's full decode ("" if it does not): the templates it hands out are
// d's, in order, and the rest is d without them.
func streamAgrees(b []byte, d *Definition) string {
	var got []TensorRef
	s := fuzzScratch()
	if err := DecodeDefinitionFunc(b, s, func(t *TensorRef, i, n int) {
		if i != len(got) || n != len(d.Tensors) {
			got = append(got, TensorRef{Slot: -99}) // out of order: never equal
			return
		}
		got = append(got, *t)
	}); err != nil {
		return "DecodeDefinitionFunc refuses what DecodeDefinition accepts: " + err.Error()
	}
	if len(got) != len(d.Tensors) || (len(got) > 0 && !reflect.DeepEqual(got, d.Tensors)) {
		return "DecodeDefinitionFunc handed out other tensor templates than DecodeDefinition decodes"
	}
	want := *d
	want.Tensors = s.Tensors
	if len(s.Tensors) != 0 || !reflect.DeepEqual(normalizedDef(&want), normalizedDef(s)) {
		return "DecodeDefinitionFunc's Definition differs from DecodeDefinition's but for the templates"
	}
	return ""
}

// TestDecodeDefinitionInto decodes images one after another into one
// scratch Definition, larger then smaller, as the device does at upload:
// each equals a fresh decode, with nothing left of the one before.
func TestDecodeDefinitionInto(t *testing.T) {
	var scratch Definition
	for _, d := range []*Definition{dsv4LikeDefinition(291), codecDef(), {Key: "empty"}, dsv4LikeDefinition(7), codecDef()} {
		img := EncodeDefinition(d)
		fresh, err := DecodeDefinition(img)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeDefinitionInto(img, &scratch); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fresh, &scratch) {
			t.Fatalf("%s: decoded into a used scratch, the Definition differs from a fresh decode", d.Key)
		}
		if msg := streamAgrees(img, fresh); msg != "" {
			t.Fatalf("%s: %s", d.Key, msg)
		}
	}
}

func FuzzDecodeRunImage(f *testing.F) {
	f.Add(EncodeRunImage(codecRun()))
	f.Add(EncodeRunImage(&RunImage{}))
	f.Add([]byte("HBGR"))
	addImageSeeds(f, "run")
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeRunImage(b)
		if len(b) < runHeaderSize {
			return
		}
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint64(c[runHashOff:], imageHash(c, runHashOff))
		img, err := DecodeRunImage(c)
		// A decoder reused after another image decodes the same, or
		// refuses the same.
		var d RunImageDecoder
		if _, err := d.Decode(EncodeRunImage(codecRun())); err != nil {
			t.Fatal(err)
		}
		if again, err2 := d.Decode(c); fmt.Sprint(err) != fmt.Sprint(err2) || err == nil && !reflect.DeepEqual(img, again) {
			t.Fatalf("a reused decoder gives %v (%v), a fresh one %v (%v)", again, err2, img, err)
		}
		if err != nil {
			return
		}
		img2, err := DecodeRunImage(EncodeRunImage(img))
		if err != nil {
			t.Fatalf("re-encoded run image does not decode: %v", err)
		}
		if !reflect.DeepEqual(img, img2) {
			t.Fatalf("re-encode changed the run image")
		}
	})
}

// dsv4LikeDefinition builds a ~291-node MoE-shaped Definition: 10-arg
// kernels over boundary and internal tensors, 2-3 producers per node.
func dsv4LikeDefinition(nodes int) *Definition {
	d := &Definition{FullKey: 7, Key: "csa_moe_block", BoundaryScalars: 12}
	for s := 0; s < 30; s++ {
		d.Boundary = append(d.Boundary, BoundarySlot{Tag: TagInput, Layout: NewView(0, 0, BF16, 32, 2048, 4096), RootElems: 43 * 32 * 2048 * 4096, AliasRep: -1})
	}
	for i := 0; i < nodes; i++ {
		if i%4 == 0 {
			d.Roots = append(d.Roots, InternalRoot{DType: INT32, Elems: 16 * 2048, Creator: uint32(i), HeapOffset: int64(len(d.Roots)) * 131072})
		}
		tOff := len(d.Tensors)
		for a := 0; a < 10; a++ {
			var ref TensorRef
			switch a % 3 {
			case 0:
				ref = TensorRef{Tag: TagInput, Src: SrcBoundaryView, Slot: int32(a), Delta: int64(i) * 8388608, Layout: NewView(0, 0, INT8, 2048, 4096)}
			case 1:
				ref = TensorRef{Tag: TagInput, Src: SrcInternal, Slot: int32(len(d.Roots) - 1), Layout: NewView(0, 0, INT32, 16, 2048)}
			default:
				ref = TensorRef{Tag: TagOutputExisting, Src: SrcInternal, Slot: int32(len(d.Roots) - 1), Delta: 0, Layout: NewView(0, 0, INT32, 16, 2048)}
			}
			d.Tensors = append(d.Tensors, ref)
		}
		sOff := len(d.Scalars)
		d.Scalars = append(d.Scalars, ScalarRef{Slot: -1, Value: uint64(i % 32)}, ScalarRef{Boundary: true, Slot: 3})
		fOff := len(d.Fanin)
		for p := i - 3; p < i; p++ {
			if p >= 0 {
				d.Fanin = append(d.Fanin, uint32(p))
			}
		}
		nd := NodeDesc{Kind: KindAIC, Kernel: [3]KernelID{KernelID(i % 30), -1, -1}, BlockNum: 4,
			Tensors: Span{uint32(tOff), 10}, Scalars: Span{uint32(sOff), 2}, Fanin: Span{uint32(fOff), uint32(len(d.Fanin) - fOff)}}
		if i%3 == 0 {
			d.Preds = append(d.Preds, PredRef{Valid: true, Op: PredGT, Tensor: TensorRef{Tag: TagInput, Src: SrcBoundaryView, Slot: 5, Delta: int64(i), Layout: NewView(0, 0, INT32, 32, 1)}, Index: int64(i % 32)})
			nd.Pred = int32(len(d.Preds))
		}
		d.Nodes = append(d.Nodes, nd)
	}
	d.HeapBytes = int64(len(d.Roots)) * 131072
	return d
}

func TestDSv4SizedDefinition(t *testing.T) {
	d := dsv4LikeDefinition(291)
	b := EncodeDefinition(d)
	per := float64(len(b)) / 291
	t.Logf("291-node definition: %d bytes, %.0f bytes/node", len(b), per)
	if per > 400 {
		t.Errorf("%.0f bytes per node, target <= 400", per)
	}
	if _, err := DecodeDefinition(b); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { EncodeDefinition(d) }); n > 1 {
		t.Errorf("EncodeDefinition allocates %v times, want 1", n)
	}
	img := codecRun()
	buf := EncodeRunImage(img)
	if n := testing.AllocsPerRun(20, func() { buf = AppendRunImage(buf, img) }); n > 0 {
		t.Errorf("AppendRunImage into the last image's buffer allocates %v times, want 0", n)
	}
	if !bytes.Equal(buf, EncodeRunImage(img)) {
		t.Errorf("AppendRunImage and EncodeRunImage disagree")
	}
}

func BenchmarkEncodeDefinition(b *testing.B) {
	d := dsv4LikeDefinition(743)
	b.ReportAllocs()
	for b.Loop() {
		EncodeDefinition(d)
	}
}

func BenchmarkDecodeDefinition(b *testing.B) {
	img := EncodeDefinition(dsv4LikeDefinition(743))
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeDefinition(img); err != nil {
			b.Fatal(err)
		}
	}
}

// TestManualDepLayoutRoundTrip: a manual_dep descriptor (View.ManualDep)
// keeps its flag through a Definition image, in a body tensor's layout and
// in a boundary slot's, whose layout a replay compares.
func TestManualDepLayoutRoundTrip(t *testing.T) {
	d := codecDef()
	d.Tensors[2].Layout.ManualDep = true // strided
	d.Tensors[5].Layout.ManualDep = true // contiguous
	d.Boundary[1].Layout.ManualDep = true
	got, err := DecodeDefinition(EncodeDefinition(d))
	if err != nil {
		t.Fatal(err)
	}
	if want := normalizedDef(d); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, want)
	}
}
