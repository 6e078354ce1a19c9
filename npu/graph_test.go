package npu

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// blockDef is a hand-built Definition of a 7-node block: an alloc of two
// internal roots, an AIV norm of boundary slot 0, an AIC matmul over a
// boundary view (slot 1 + delta) of the weights, a MIX over the kv row
// (slot 2, inout), a predicated AIV writing the output (slot 3), a final
// inout on the output, and a dummy fence. One boundary scalar (the layer).
//
// Boundary: 0 in  bf16[256] (root of 256)
//
//	1 in  bf16[256,256] of w (root 8·65536); node 2 reads rows 128..255
//	2 x   bf16[256] of kv (root 2048)
//	3 oe  bf16[256] (root of 256)
func blockDef() *stages.Definition {
	lay := func(dt stages.DType, shape ...int64) stages.View { return stages.NewView(0, 0, dt, shape...) }
	ref := func(tag stages.Tag, src stages.SourceKind, slot int32, delta int64, l stages.View) stages.TensorRef {
		return stages.TensorRef{Tag: tag, Src: src, Slot: slot, Delta: delta, Layout: l}
	}
	d := &stages.Definition{FullKey: 0xb10c, Key: "block", BoundaryScalars: 1}
	d.Boundary = []stages.BoundarySlot{
		{Tag: stages.TagInput, Layout: lay(stages.BF16, 256), RootElems: 256, AliasRep: -1},
		{Tag: stages.TagInput, Layout: lay(stages.BF16, 256, 256), RootElems: 8 * 65536, AliasRep: -1},
		{Tag: stages.TagInOut, Layout: lay(stages.BF16, 256), RootElems: 2048, AliasRep: -1},
		{Tag: stages.TagOutputExisting, Layout: lay(stages.BF16, 256), RootElems: 256, AliasRep: -1},
	}
	d.Roots = []stages.InternalRoot{
		{DType: stages.FP32, Elems: 256, Creator: 0, HeapOffset: 0},
		{DType: stages.FP32, Elems: 128, Creator: 0, HeapOffset: 1024},
	}
	d.HeapBytes = 1536
	node := func(kind stages.Kind, ks [3]stages.KernelID, bn int32, tens []stages.TensorRef, sc []stages.ScalarRef, fanin []uint32, pred stages.PredRef) {
		d.Nodes = append(d.Nodes, stages.NodeDesc{Kind: kind, Kernel: ks, BlockNum: bn,
			Tensors: stages.Span{Off: uint32(len(d.Tensors)), N: uint32(len(tens))},
			Scalars: stages.Span{Off: uint32(len(d.Scalars)), N: uint32(len(sc))},
			Fanin:   stages.Span{Off: uint32(len(d.Fanin)), N: uint32(len(fanin))}})
		if pred.Valid {
			d.Preds = append(d.Preds, pred)
			d.Nodes[len(d.Nodes)-1].Pred = int32(len(d.Preds))
		}
		d.Tensors = append(d.Tensors, tens...)
		d.Scalars = append(d.Scalars, sc...)
		d.Fanin = append(d.Fanin, fanin...)
	}
	none := [3]stages.KernelID{-1, -1, -1}
	layer := stages.ScalarRef{Boundary: true, Slot: 0}
	static := func(v uint64) stages.ScalarRef { return stages.ScalarRef{Slot: -1, Value: v} }
	r0 := lay(stages.FP32, 256)
	r1 := lay(stages.FP32, 128)
	node(stages.KindAlloc, none, -1, []stages.TensorRef{
		ref(stages.TagOutput, stages.SrcOwnOutput, 0, 0, r0), ref(stages.TagOutput, stages.SrcOwnOutput, 1, 0, r1)}, nil, nil, stages.PredRef{})
	node(stages.KindAIV, kAIV(kNorm), 2, []stages.TensorRef{
		ref(stages.TagInput, stages.SrcBoundaryExact, 0, 0, lay(stages.BF16, 256)),
		ref(stages.TagOutputExisting, stages.SrcInternal, 0, 0, r0)}, []stages.ScalarRef{layer, static(11)}, []uint32{0}, stages.PredRef{})
	node(stages.KindAIC, kAIC(kMM), 4, []stages.TensorRef{
		ref(stages.TagInput, stages.SrcInternal, 0, 0, r0),
		ref(stages.TagInput, stages.SrcBoundaryView, 1, 128*256, lay(stages.BF16, 128, 256)),
		ref(stages.TagOutputExisting, stages.SrcInternal, 1, 0, r1)}, []stages.ScalarRef{static(3)}, []uint32{0, 1}, stages.PredRef{})
	node(stages.KindMIX, kMIX(kAttnC, kAttnV), 2, []stages.TensorRef{
		ref(stages.TagInput, stages.SrcInternal, 1, 0, r1),
		ref(stages.TagInOut, stages.SrcBoundaryExact, 2, 0, lay(stages.BF16, 256))}, []stages.ScalarRef{layer}, []uint32{2}, stages.PredRef{})
	node(stages.KindAIV, kAIV(kExpAct), 1, []stages.TensorRef{
		ref(stages.TagInput, stages.SrcInternal, 1, 0, r1),
		ref(stages.TagInput, stages.SrcBoundaryExact, 2, 0, lay(stages.BF16, 256)),
		ref(stages.TagOutputExisting, stages.SrcBoundaryExact, 3, 0, lay(stages.BF16, 256))}, []stages.ScalarRef{static(4)}, []uint32{2, 3},
		stages.PredRef{Valid: true, Op: stages.PredGT, Tensor: ref(stages.TagInput, stages.SrcInternal, 1, 0, r1), Index: 5, Target: 0})
	node(stages.KindAIV, kAIV(kNorm), 1, []stages.TensorRef{
		ref(stages.TagInOut, stages.SrcBoundaryExact, 3, 0, lay(stages.BF16, 256)),
		ref(stages.TagInput, stages.SrcInternal, 0, 0, r0)}, []stages.ScalarRef{layer}, []uint32{1, 4}, stages.PredRef{})
	node(stages.KindDummy, none, -1, nil, nil, []uint32{5}, stages.PredRef{})
	stages.EncodeDefinition(d) // sets ContentHash
	return d
}

// call is one invocation of the block: its boundary views and scalar.
type call struct {
	x, w, kv, out stages.View
	layer         uint64
}

func calls() []call {
	bf := stages.BF16
	return []call{
		{x: view(eX, 0, bf, 256), w: view(eW, 0, bf, 256, 256), kv: view(eKV, 0, bf, 256), out: view(eOut, 0, bf, 256), layer: 0},
		// The second call reads the first's output and writes out2.
		{x: view(eOut, 0, bf, 256), w: view(eW, 65536, bf, 256, 256), kv: view(eKV, 256, bf, 256), out: view(eOut2, 0, bf, 256), layer: 1},
	}
}

// graphForm builds the two calls as GRAPH tasks replaying def, and the
// same work submitted eagerly.
func graphForm(def *stages.Definition) (graph, eager *builder) {
	graph = newBuilder(synthEntry())
	var prev []stages.TaskID
	for _, c := range calls() {
		id := graph.graph(def, []stages.Arg{in(c.x), in(c.w), io(c.kv), oe(c.out)}, []uint64{c.layer}, prev)
		prev = []stages.TaskID{id}
	}

	eager = newBuilder(synthEntry())
	var lastOut stages.TaskID = -1
	for _, c := range calls() {
		a, r := eager.alloc(view(0, 0, stages.FP32, 256), view(0, 0, stages.FP32, 128))
		r0, r1 := view(r[0], 0, stages.FP32, 256), view(r[1], 0, stages.FP32, 128)
		f1 := []stages.TaskID{a}
		if c.layer == 1 {
			f1 = append(f1, lastOut) // reads the first call's output
		}
		t1 := eager.kernel(stages.KindAIV, kAIV(kNorm), 2, []stages.Arg{in(c.x), oe(r0)}, []uint64{c.layer, 11}, f1, noPred)
		wv := c.w
		wv.Offset += 128 * 256
		wv = view(wv.Root, wv.Offset, stages.BF16, 128, 256)
		t2 := eager.kernel(stages.KindAIC, kAIC(kMM), 4, []stages.Arg{in(r0), in(wv), oe(r1)}, []uint64{3}, []stages.TaskID{a, t1}, noPred)
		t3 := eager.kernel(stages.KindMIX, kMIX(kAttnC, kAttnV), 2, []stages.Arg{in(r1), io(c.kv)}, []uint64{c.layer}, []stages.TaskID{t2}, noPred)
		pred := stages.Predicate{Valid: true, Op: stages.PredGT, View: r1, Index: 5, Target: 0}
		t4 := eager.kernel(stages.KindAIV, kAIV(kExpAct), 1, []stages.Arg{in(r1), in(c.kv), oe(c.out)}, []uint64{4}, []stages.TaskID{t2, t3}, pred)
		t5 := eager.kernel(stages.KindAIV, kAIV(kNorm), 1, []stages.Arg{io(c.out), in(r0)}, []uint64{c.layer}, []stages.TaskID{t1, t4}, noPred)
		eager.dummy(t5)
		lastOut = t5
	}
	return graph, eager
}

func TestGraphMatchesEager(t *testing.T) {
	def := blockDef()
	gb, eb := graphForm(def)

	cfg := DefaultConfig()
	cfg.Timeline, cfg.TaskDigests = true, true
	d := New(cfg)
	d.RegisterEntry(synthEntry())
	d.RegisterKernels(testKernels())
	if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
		t.Fatal(err)
	}
	gr := launch(t, d, gb.bytes())
	de := New(cfg)
	de.RegisterEntry(synthEntry())
	de.RegisterKernels(testKernels())
	er := launch(t, de, eb.bytes())
	// Task for task, the two forms read the same data.
	if len(gr.TaskDigests) != len(er.TaskDigests) {
		t.Fatalf("%d vs %d task digests", len(gr.TaskDigests), len(er.TaskDigests))
	}
	for i := range gr.TaskDigests {
		g, e := gr.TaskDigests[i], er.TaskDigests[i]
		if g.In != e.In || g.Kernel != e.Kernel || g.Skipped != e.Skipped || g.Ref.Node != int32(i%len(def.Nodes)) {
			t.Fatalf("task %d: graph %+v, eager %+v", i, g, e)
		}
	}
	if gr.Tasks != er.Tasks || gr.Tasks != 2*len(def.Nodes) {
		t.Fatalf("device tasks: graph %d, eager %d, want %d", gr.Tasks, er.Tasks, 2*len(def.Nodes))
	}
	if gr.GraphTasks != 2 || er.GraphTasks != 0 {
		t.Fatalf("graph tasks %d / %d", gr.GraphTasks, er.GraphTasks)
	}
	if gr.Digest != er.Digest {
		t.Fatalf("graph digest %#x, eager %#x\ngraph %+v\neager %+v", gr.Digest, er.Digest, gr.Outputs, er.Outputs)
	}
	if gr.Skipped != er.Skipped {
		t.Fatalf("predicates differ: %d vs %d skipped", gr.Skipped, er.Skipped)
	}
	// Every node of the second instance starts after the first instance's
	// last node completed (the outer task's fanin), and the nodes respect
	// their internal fanin.
	ip0, ip1 := d.plan.insts[0], d.plan.insts[1]
	var lastDone int64
	for n := range def.Nodes {
		lastDone = max(lastDone, d.sim.tasks[int(ip0.base)+n].doneAt)
	}
	for n := range def.Nodes {
		tk := &d.sim.tasks[int(ip1.base)+n]
		if tk.next > 0 && tk.first < lastDone {
			t.Errorf("node %d of the second call started at %d before the first call completed at %d", n, tk.first, lastDone)
		}
		nd := &def.Nodes[n]
		for _, p := range def.Fanin[nd.Fanin.Off : nd.Fanin.Off+nd.Fanin.N] {
			if pd := d.sim.tasks[int(ip1.base)+int(p)].doneAt; tk.doneAt < pd || (tk.next > 0 && tk.first < pd) {
				t.Errorf("node %d ran before its producer %d", n, p)
			}
		}
	}
	// Changing the baked static scalar in the Definition changes the digest
	// (what a Definition that baked a value would show).
	def2 := blockDef()
	def2.Scalars[1].Value = 12 // node 1's static 11
	stages.EncodeDefinition(def2)
	gb2, _ := graphForm(def2)
	d2 := newDevice(t)
	if _, err := d2.Upload(stages.EncodeDefinition(def2)); err != nil {
		t.Fatal(err)
	}
	if r := launch(t, d2, gb2.bytes()); r.Digest == er.Digest {
		t.Fatal("a Definition with a different baked scalar matched the eager digest")
	}
	t.Logf("graph wall %d ns, eager wall %d ns, digest %#x, skipped %d", gr.SimNs, er.SimNs, gr.Digest, gr.Skipped)
}

// TestUploadReadsAtFirstLaunch: an upload checks the header and the content
// hash; the records are read at the first launch that replays the object. An
// image whose hash verifies but whose records do not read is refused there,
// at that launch and every later one, naming the Definition; the device
// still serves the next request.
func TestUploadReadsAtFirstLaunch(t *testing.T) {
	good := blockDef()
	goodRun, _ := graphForm(good)
	img := stages.EncodeDefinition(blockDef())
	// The first section offset past the end: the offsets are no longer
	// non-decreasing. Re-hashed, so only reading the records can tell.
	binary.LittleEndian.PutUint32(img[imagefmt.DefSectionsAt:], uint32(len(img)))
	binary.LittleEndian.PutUint64(img[imagefmt.DefHashAt:], imagefmt.Hash(img, imagefmt.DefHashAt))
	def := blockDef()
	def.ContentHash = stages.DefinitionHash(img) // the run image replays the bad one
	gb, _ := graphForm(def)

	d := New(DefaultConfig())
	d.RegisterEntry(synthEntry())
	d.RegisterKernels(testKernels())
	if _, err := d.Upload(img); err != nil {
		t.Fatalf("upload of an image whose header and hash verify: %v", err)
	}
	for i := range 2 {
		err := launchBytes(d, gb.bytes())
		if !errors.Is(err, ErrInvalidImage) || !strings.Contains(err.Error(), "does not read") {
			t.Fatalf("launch %d: %v, want ErrInvalidImage: its Definition does not read", i, err)
		}
	}
	if n := d.Stats().Refusals; n < 2 {
		t.Fatalf("%d refusals counted, want at least 2", n)
	}
	// The good image of the same Definition is another object (another
	// hash): it reads, and a launch that replays it succeeds.
	if _, err := d.Upload(stages.EncodeDefinition(good)); err != nil {
		t.Fatal(err)
	}
	launch(t, d, goodRun.bytes())
}

// FuzzUploadLaunch: a Definition image mutated and re-hashed (so the upload
// takes it) and then replayed by a launch never panics the device, and a
// refused launch leaves it serving the next one as before: the records are
// read at that first launch (materialize), so that is where a bad one must
// be caught.
func FuzzUploadLaunch(f *testing.F) {
	good := blockDef()
	goodRun, _ := graphForm(good)
	f.Add(stages.EncodeDefinition(blockDef()))
	ref := launch(f, newDevice(f), synth(synthOpts{}).bytes())
	f.Fuzz(func(t *testing.T, img []byte) {
		if len(img) < imagefmt.DefHeaderSize {
			return
		}
		img = append([]byte(nil), img...)
		binary.LittleEndian.PutUint64(img[imagefmt.DefHashAt:], imagefmt.Hash(img, imagefmt.DefHashAt))
		d := New(DefaultConfig())
		d.RegisterEntry(synthEntry())
		d.RegisterKernels(testKernels())
		if _, err := d.Upload(img); err != nil {
			return
		}
		def := blockDef()
		def.ContentHash = stages.DefinitionHash(img)
		gb, _ := graphForm(def)
		_ = launchBytes(d, gb.bytes())
		if _, err := d.Upload(stages.EncodeDefinition(good)); err != nil {
			t.Fatal(err)
		}
		launch(t, d, goodRun.bytes())
		if r := launch(t, d, synth(synthOpts{}).bytes()); r.Digest != ref.Digest {
			t.Fatal("device changed by a refused launch")
		}
	})
}
