package npu

import (
	"fmt"
	"reflect"

	"github.com/hbg-dev/hbg/stages"
)

// builder writes run images by hand: explicit fanin, host-assigned heap
// addresses, Graph submissions. Tests use it instead of the ordinary submit
// path so that every edge is the test's own choice.
type builder struct {
	img    stages.RunImage
	entry  []stages.Root
	nroots stages.RootID
	heap   uint64
}

func newBuilder(entry []stages.Root) *builder {
	return &builder{entry: entry, nroots: stages.RootID(len(entry))}
}

func (b *builder) place(bytes int64) uint64 {
	a := b.heap
	b.heap += alignUp(uint64(bytes))
	b.img.HeapBytes = int64(b.heap)
	return a
}

func (b *builder) newRoot(dt stages.DType, elems int64, creator stages.TaskID) stages.RootID {
	id := b.nroots
	b.nroots++
	b.img.Roots = append(b.img.Roots, stages.RootDesc{ID: id, DType: dt, Elems: elems, Creator: creator, Addr: b.place(elems * dt.Size())})
	return id
}

func (b *builder) add(t stages.TaskDesc, args []stages.Arg, scalars []uint64, fanin []stages.TaskID) stages.TaskID {
	id := stages.TaskID(len(b.img.Tasks))
	t.Args = stages.Span{Off: uint32(len(b.img.Args)), N: uint32(len(args))}
	b.img.Args = append(b.img.Args, args...)
	t.Scalars = stages.Span{Off: uint32(len(b.img.Scalars)), N: uint32(len(scalars))}
	b.img.Scalars = append(b.img.Scalars, scalars...)
	t.Fanin = stages.Span{Off: uint32(len(b.img.Fanin)), N: uint32(len(fanin))}
	b.img.Fanin = append(b.img.Fanin, fanin...)
	if t.Kind != stages.KindGraph {
		t.Graph = -1
	}
	b.img.Tasks = append(b.img.Tasks, t)
	return id
}

// alloc submits an alloc task creating one root per (dtype, elems).
func (b *builder) alloc(specs ...stages.View) (stages.TaskID, []stages.RootID) {
	id := stages.TaskID(len(b.img.Tasks))
	var args []stages.Arg
	var roots []stages.RootID
	for _, v := range specs {
		r := b.newRoot(v.DType, v.Elems(), id)
		v.Root, v.Offset = r, 0
		args = append(args, stages.Arg{Tag: stages.TagOutput, View: v})
		roots = append(roots, r)
	}
	b.add(stages.TaskDesc{Kind: stages.KindAlloc, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1}, args, nil, nil)
	return id, roots
}

func kAIC(k stages.KernelID) [3]stages.KernelID { return [3]stages.KernelID{k, -1, -1} }
func kAIV(k stages.KernelID) [3]stages.KernelID { return [3]stages.KernelID{-1, k, -1} }
func kMIX(c, v stages.KernelID) [3]stages.KernelID {
	return [3]stages.KernelID{c, v, v}
}

// kernel submits a kernel task; output-tagged args get a new root.
func (b *builder) kernel(kind stages.Kind, ks [3]stages.KernelID, bn int32, args []stages.Arg, scalars []uint64, fanin []stages.TaskID, pred stages.Predicate) stages.TaskID {
	id := stages.TaskID(len(b.img.Tasks))
	args = append([]stages.Arg(nil), args...)
	for i := range args {
		if args[i].Tag == stages.TagOutput {
			args[i].View.Root = b.newRoot(args[i].View.DType, args[i].View.Elems(), id)
			args[i].View.Offset = 0
		}
	}
	return b.add(stages.TaskDesc{Kind: kind, Kernel: ks, BlockNum: bn, Pred: pred}, args, scalars, fanin)
}

func (b *builder) dummy(fanin ...stages.TaskID) stages.TaskID {
	return b.add(stages.TaskDesc{Kind: stages.KindDummy, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1}, nil, nil, fanin)
}

// graph submits an outer GRAPH task replaying def.
func (b *builder) graph(def *stages.Definition, boundary []stages.Arg, scalars []uint64, fanin []stages.TaskID) stages.TaskID {
	id := stages.TaskID(len(b.img.Tasks))
	g := stages.GraphSubmission{Task: id, FullKey: def.FullKey, DefHash: def.ContentHash,
		Boundary: stages.Span{Off: uint32(len(b.img.Args)), N: uint32(len(boundary))},
		Scalars:  stages.Span{Off: uint32(len(b.img.Scalars)), N: uint32(len(scalars))},
		HeapBase: b.place(def.HeapBytes)}
	b.img.Graphs = append(b.img.Graphs, g)
	return b.add(stages.TaskDesc{Kind: stages.KindGraph, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1, Graph: int32(len(b.img.Graphs) - 1)}, boundary, scalars, fanin)
}

func (b *builder) bytes() []byte { return stages.EncodeRunImage(&b.img) }

func in(v stages.View) stages.Arg  { return stages.Arg{Tag: stages.TagInput, View: v} }
func oe(v stages.View) stages.Arg  { return stages.Arg{Tag: stages.TagOutputExisting, View: v} }
func io(v stages.View) stages.Arg  { return stages.Arg{Tag: stages.TagInOut, View: v} }
func out(v stages.View) stages.Arg { return stages.Arg{Tag: stages.TagOutput, View: v} }

var noPred stages.Predicate

func view(r stages.RootID, off int64, dt stages.DType, shape ...int64) stages.View {
	return stages.NewView(r, off, dt, shape...)
}

// testKernels is a small kernel table.
func testKernels() []stages.Kernel {
	return []stages.Kernel{
		{Name: "mm", Core: stages.KindAIC, Code: "mm"},
		{Name: "act", Core: stages.KindAIV, Code: "act"},
		{Name: "norm", Core: stages.KindAIV, Code: "norm"},
		{Name: "attn_c", Core: stages.KindAIC, Code: "attn_c"},
		{Name: "attn_v", Core: stages.KindAIV, Code: "attn_v"},
		{Name: "route", Core: stages.KindAIV, Code: "route"},
		{Name: "exp_mm", Core: stages.KindAIC, Code: "exp_mm"},
		{Name: "exp_act", Core: stages.KindAIV, Code: "exp_act"},
	}
}

const (
	kMM stages.KernelID = iota
	kAct
	kNorm
	kAttnC
	kAttnV
	kRoute
	kExpMM
	kExpAct
)

// Entry roots of the synthetic model.
const (
	eW    stages.RootID = iota // weights [8, 256, 256] bf16
	eX                         // input [256] bf16
	eKV                        // cache [8, 256] bf16, written in place
	eOut                       // output [256] bf16
	eCnt                       // routing counts [16] int32 (scratch entry)
	eOut2                      // second output [256] bf16
	nEntry
)

func synthEntry() []stages.Root {
	return []stages.Root{
		{Name: "w", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{8, 256, 256}, Elems: 8 * 256 * 256, Creator: stages.NoTask},
		{Name: "x", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{256}, Elems: 256, Creator: stages.NoTask},
		{Name: "kv", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{8, 256}, Elems: 8 * 256, Creator: stages.NoTask},
		{Name: "out", Kind: stages.RootEntryOutput, DType: stages.BF16, Shape: []int64{256}, Elems: 256, Creator: stages.NoTask},
		{Name: "cnt", Kind: stages.RootEntry, DType: stages.INT32, Shape: []int64{16}, Elems: 16, Creator: stages.NoTask},
		{Name: "out2", Kind: stages.RootEntryOutput, DType: stages.BF16, Shape: []int64{256}, Elems: 256, Creator: stages.NoTask},
	}
}

func newDevice(t interface{ Helper() }) *Die {
	d := New(DefaultConfig())
	d.RegisterEntry(synthEntry())
	d.RegisterKernels(testKernels())
	return d
}

// synthOpts varies the synthetic image for the digest tests.
type synthOpts struct {
	scalarDelta uint64 // added to one scalar of one task
	dropDep     bool   // drop the reader's edge on its (slow) writer
	swapArgs    bool   // swap two input arguments of one task
}

// synth builds a few dozen tasks: an alloc, an AIV and an AIC stage with
// block_num > 1, a MIX task, a routing task, 8 predicated expert pairs, a
// dummy fence and a final reduction into the entry output. The "slow
// writer" is a 256 KiB-weight AIC task whose reader (layer 2's norm) would,
// without its edge, start while it still runs.
func synth(o synthOpts) *builder {
	b := newBuilder(synthEntry())
	a0, r := b.alloc(view(0, 0, stages.FP32, 256), view(0, 0, stages.BF16, 256))
	h32, h16 := r[0], r[1]
	t1 := b.kernel(stages.KindAIV, kAIV(kNorm), 4, []stages.Arg{in(view(eX, 0, stages.BF16, 256)), oe(view(h32, 0, stages.FP32, 256))}, []uint64{1}, []stages.TaskID{a0}, noPred)
	// Slow writer: reads the whole weight tensor.
	t2 := b.kernel(stages.KindAIC, kAIC(kMM), 8, []stages.Arg{in(view(h32, 0, stages.FP32, 256)), in(view(eW, 0, stages.BF16, 8, 256, 256)), oe(view(h16, 0, stages.BF16, 256))}, []uint64{2, 7}, []stages.TaskID{a0, t1}, noPred)
	// Reader of h16 (fast, would run early without its edge on t2).
	f3 := []stages.TaskID{a0, t2}
	if o.dropDep {
		f3 = []stages.TaskID{a0}
	}
	t3 := b.kernel(stages.KindAIV, kAIV(kAct), 2, []stages.Arg{in(view(h16, 0, stages.BF16, 256)), out(view(0, 0, stages.FP32, 256))}, []uint64{3}, f3, noPred)
	r3 := b.img.Args[b.img.Tasks[t3].Args.Off+1].View.Root
	// MIX attention over kv (inout) with block_num 2.
	mixArgs := []stages.Arg{in(view(r3, 0, stages.FP32, 256)), in(view(eX, 0, stages.BF16, 256)), io(view(eKV, 0, stages.BF16, 8, 256))}
	if o.swapArgs {
		mixArgs[0], mixArgs[1] = mixArgs[1], mixArgs[0]
	}
	t4 := b.kernel(stages.KindMIX, kMIX(kAttnC, kAttnV), 2, mixArgs, []uint64{4, 5}, []stages.TaskID{t3}, noPred)
	// Routing writes the counts the expert predicates read.
	t5 := b.kernel(stages.KindAIV, kAIV(kRoute), 1, []stages.Arg{in(view(eKV, 0, stages.BF16, 8, 256)), oe(view(eCnt, 0, stages.INT32, 16))}, []uint64{6}, []stages.TaskID{t4}, noPred)
	// 8 experts: alloc a tile, predicated mm, predicated act into out[e*32:+32].
	fence := []stages.TaskID{t5}
	for e := int64(0); e < 8; e++ {
		sc := uint64(e)
		if o.scalarDelta != 0 && e == 5 {
			sc += o.scalarDelta
		}
		pred := stages.Predicate{Valid: true, Op: stages.PredGT, View: view(eCnt, 0, stages.INT32, 16), Index: e, Target: 0}
		ta, tr := b.alloc(view(0, 0, stages.FP32, 32))
		tile := tr[0]
		tm := b.kernel(stages.KindAIC, kAIC(kExpMM), 4, []stages.Arg{in(view(eKV, e*256, stages.BF16, 256)), in(view(eW, e*65536, stages.BF16, 256, 256)), in(view(eCnt, 0, stages.INT32, 16)), oe(view(tile, 0, stages.FP32, 32))}, []uint64{sc, 0}, []stages.TaskID{ta, t5}, pred)
		tv := b.kernel(stages.KindAIV, kAIV(kExpAct), 2, []stages.Arg{in(view(tile, 0, stages.FP32, 32)), in(view(eCnt, 0, stages.INT32, 16)), io(view(eOut, e*32, stages.BF16, 32))}, []uint64{sc}, []stages.TaskID{ta, tm, t5}, pred)
		fence = append(fence, tv)
	}
	td := b.dummy(fence...)
	// Final reduction over the output, the cache and layer 2's norm result.
	b.kernel(stages.KindAIV, kAIV(kNorm), 1, []stages.Arg{io(view(eOut, 0, stages.BF16, 256)), in(view(r3, 0, stages.FP32, 256)), in(view(eKV, 0, stages.BF16, 8, 256))}, []uint64{9}, []stages.TaskID{td, t3, t4}, noPred)
	return b
}

// launch runs img on d, and again with its fanin transitively reduced
// (stages.RunImage.ReduceFanin: what the host ships by default): both
// launches must agree on the digests, the task counts and every race,
// since reduction keeps reachability, which is all they stand on.
func launch(t interface {
	Helper()
	Fatal(...any)
}, d *Die, img []byte) *Result {
	t.Helper()
	r := launchOnce(t, d, img)
	dec, err := stages.DecodeRunImage(img)
	if err != nil {
		t.Fatal(err)
	}
	dec.ReduceFanin()
	red := launchOnce(t, d, stages.EncodeRunImage(dec))
	if red.Digest != r.Digest || red.Tasks != r.Tasks || red.Skipped != r.Skipped || red.RaceCount != r.RaceCount ||
		red.DeclaredRaces != r.DeclaredRaces || !reflect.DeepEqual(red.Races, r.Races) || red.FaninEdges != r.FaninEdges {
		t.Fatal(fmt.Sprintf("reduced fanin (%d of %d edges shipped) changed the launch: digest %#x, %d races; every edge: %#x, %d races",
			red.ShippedEdges, red.FaninEdges, red.Digest, red.RaceCount, r.Digest, r.RaceCount))
	}
	return r
}

func launchOnce(t interface {
	Helper()
	Fatal(...any)
}, d *Die, img []byte) *Result {
	t.Helper()
	if err := d.CopyRun(img); err != nil {
		t.Fatal(err)
	}
	r, err := d.Launch()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
