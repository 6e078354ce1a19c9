package npu

import (
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// dsv4Like builds a synthetic decode step shaped like DeepSeek-V4 flash
// decode on one rank (workloads.md §1.3): 43 layers of an attention block
// (72 tasks: 16 allocs, 1 dummy, 21 AIC, 33 AIV, 1 MIX) and a MoE block
// (291 tasks: 74 allocs, 1 dummy, 24 one-shot kernels, 32 experts × 4
// predicated kernels and 32 × 2 more, predicated on recv_count[e][0] > 0),
// plus a prologue and a head: 15,619 device tasks, ~2-3 producers each.
// Weights are entry roots of DSv4's sizes (routed_w1 alone is 10.75 GiB:
// address space only).
func dsv4Like() (*builder, []stages.Kernel) {
	const layers = 43
	entry := []stages.Root{
		{Name: "hidden", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{8, 4096}, Elems: 8 * 4096},
		{Name: "attn_w", Kind: stages.RootEntry, DType: stages.INT8, Shape: []int64{layers, 24, 4096, 1024}, Elems: layers * 24 * 4096 * 1024},
		{Name: "routed_w1", Kind: stages.RootEntry, DType: stages.INT8, Shape: []int64{layers * 32, 2048, 4096}, Elems: layers * 32 * 2048 * 4096},
		{Name: "routed_w2", Kind: stages.RootEntry, DType: stages.INT8, Shape: []int64{layers * 32, 4096, 2048}, Elems: layers * 32 * 4096 * 2048},
		{Name: "kv_cache", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{layers * 128, 128, 512}, Elems: layers * 128 * 128 * 512},
		{Name: "logits", Kind: stages.RootEntryOutput, DType: stages.FP32, Shape: []int64{8, 16384}, Elems: 8 * 16384},
	}
	const (
		rHidden stages.RootID = iota
		rAttnW
		rW1
		rW2
		rKV
		rLogits
	)
	ks := []stages.Kernel{
		{Name: "attn_mm", Core: stages.KindAIC, Code: "attn_mm"},
		{Name: "attn_vec", Core: stages.KindAIV, Code: "attn_vec"},
		{Name: "route", Core: stages.KindAIV, Code: "route"},
		{Name: "exp_gate_mm", Core: stages.KindAIC, Code: "exp_gate_mm"},
		{Name: "exp_act", Core: stages.KindAIV, Code: "exp_act"},
		{Name: "exp_w2_mm", Core: stages.KindAIC, Code: "exp_w2_mm"},
		{Name: "combine", Core: stages.KindAIV, Code: "combine"},
		{Name: "mix_c", Core: stages.KindAIC, Code: "mix_c"},
		{Name: "mix_v", Core: stages.KindAIV, Code: "mix_v"},
	}
	b := newBuilder(entry)
	bf, f32, i32 := stages.BF16, stages.FP32, stages.INT32
	hid := view(rHidden, 0, bf, 8, 4096)
	var last stages.TaskID = -1
	deps := func(ts ...stages.TaskID) []stages.TaskID {
		var out []stages.TaskID
		for _, t := range ts {
			if t >= 0 {
				out = append(out, t)
			}
		}
		return out
	}
	// prologue
	a, r := b.alloc(view(0, 0, f32, 8, 4096))
	last = b.kernel(stages.KindAIV, kAIV(1), 8, []stages.Arg{in(hid), oe(view(r[0], 0, f32, 8, 4096))}, nil, deps(a), noPred)
	cur := view(r[0], 0, f32, 8, 4096)
	for l := int64(0); l < layers; l++ {
		// attention: 16 allocs, then 54 kernels alternating AIC/AIV in a
		// chain with side inputs, one MIX, one dummy.
		var bufs []stages.RootID
		var allocs []stages.TaskID
		for i := 0; i < 16; i++ {
			t, rr := b.alloc(view(0, 0, f32, 8, 1024))
			bufs, allocs = append(bufs, rr[0]), append(allocs, t)
		}
		prev := last
		prevOut := cur
		for k := 0; k < 54; k++ {
			dst := bufs[k%16]
			o := view(dst, 0, f32, 8, 1024)
			if k%5 == 4 || k%8 == 7 {
				// AIC matmul over a 4 MiB weight slice
				w := view(rAttnW, (l*24+int64(k%24))*4096*1024, stages.INT8, 4096, 1024)
				prev = b.kernel(stages.KindAIC, kAIC(0), int32(2<<(k%3)), []stages.Arg{in(prevOut), in(w), oe(o)}, []uint64{uint64(l), uint64(k)}, deps(allocs[k%16], prev), noPred)
			} else if k == 20 {
				prev = b.kernel(stages.KindMIX, kMIX(7, 8), 8, []stages.Arg{in(prevOut), io(view(rKV, l*128*128*512, bf, 128, 512)), oe(o)}, []uint64{uint64(l)}, deps(allocs[k%16], prev), noPred)
			} else {
				prev = b.kernel(stages.KindAIV, kAIV(1), int32(1<<(k%3)), []stages.Arg{in(prevOut), oe(o)}, []uint64{uint64(k)}, deps(allocs[k%16], prev), noPred)
			}
			prevOut = o
		}
		last = b.dummy(prev)
		attnOut := prevOut
		// MoE: 10 one-shot allocs, 24 one-shot kernels (route + dispatch
		// writes recv_count), 32 experts.
		bufs, allocs = bufs[:0], allocs[:0]
		for i := 0; i < 10; i++ {
			t, rr := b.alloc(view(0, 0, f32, 8, 2048))
			bufs, allocs = append(bufs, rr[0]), append(allocs, t)
		}
		tc, rc := b.alloc(view(0, 0, i32, 32, 1))
		_ = tc
		cnt := rc[0]
		prev = last
		prevOut = attnOut
		for k := 0; k < 23; k++ {
			o := view(bufs[k%10], 0, f32, 8, 1024)
			if k%3 == 0 {
				prev = b.kernel(stages.KindAIC, kAIC(0), 4, []stages.Arg{in(prevOut), in(view(rAttnW, (l*24+int64(k))*4096*1024, stages.INT8, 2048, 1024)), oe(o)}, []uint64{uint64(l)}, deps(allocs[k%10], prev), noPred)
			} else {
				prev = b.kernel(stages.KindAIV, kAIV(6), 4, []stages.Arg{in(prevOut), oe(o)}, nil, deps(allocs[k%10], prev), noPred)
			}
			prevOut = o
		}
		route := b.kernel(stages.KindAIV, kAIV(2), 1, []stages.Arg{in(prevOut), oe(view(cnt, 0, i32, 32, 1))}, []uint64{uint64(l), 6}, deps(tc, prev), noPred)
		var tails []stages.TaskID
		for e := int64(0); e < 32; e++ {
			pred := stages.Predicate{Valid: true, Op: stages.PredGT, View: view(cnt, 0, i32, 32, 1), Index: e, Target: 0}
			ta, rt := b.alloc(view(0, 0, i32, 16, 2048), view(0, 0, f32, 16, 2048))
			g, h := rt[0], rt[1]
			we := (l*32 + e) * 2048 * 4096
			t1 := b.kernel(stages.KindAIC, kAIC(3), 2, []stages.Arg{in(prevOut), in(view(rW1, we, stages.INT8, 2048, 4096)), in(view(cnt, 0, i32, 32, 1)), oe(view(g, 0, i32, 16, 2048))}, []uint64{uint64(e), 0}, deps(ta, route), pred)
			t2 := b.kernel(stages.KindAIC, kAIC(3), 2, []stages.Arg{in(prevOut), in(view(rW1, we+2048*2048, stages.INT8, 2048, 2048)), in(view(cnt, 0, i32, 32, 1)), oe(view(h, 0, f32, 16, 2048))}, []uint64{uint64(e), 1}, deps(ta, route), pred)
			t3 := b.kernel(stages.KindAIV, kAIV(4), 4, []stages.Arg{io(view(h, 0, f32, 16, 2048)), in(view(g, 0, i32, 16, 2048)), in(view(cnt, 0, i32, 32, 1))}, []uint64{uint64(e), 0}, deps(ta, t1, t2), pred)
			t4 := b.kernel(stages.KindAIV, kAIV(4), 2, []stages.Arg{in(view(h, 0, f32, 16, 2048)), oe(view(g, 0, i32, 16, 2048))}, []uint64{uint64(e)}, deps(ta, t3), pred)
			ta2, rt2 := b.alloc(view(0, 0, f32, 16, 4096))
			y := rt2[0]
			t5 := b.kernel(stages.KindAIC, kAIC(5), 2, []stages.Arg{in(view(g, 0, i32, 16, 2048)), in(view(rW2, we, stages.INT8, 4096, 2048)), oe(view(y, 0, f32, 16, 4096))}, []uint64{uint64(e)}, deps(ta2, t4), pred)
			t6 := b.kernel(stages.KindAIV, kAIV(4), 2, []stages.Arg{in(view(y, 0, f32, 16, 4096)), in(view(cnt, 0, i32, 32, 1))}, []uint64{uint64(e), 1}, deps(t5), pred)
			tails = append(tails, t6)
		}
		fence := b.dummy(append(tails, route)...)
		mo := b.kernel(stages.KindMIX, kMIX(7, 8), 4, []stages.Arg{in(prevOut), oe(view(bufs[0], 0, f32, 8, 1024))}, nil, deps(fence, allocs[0]), noPred)
		// The block's output becomes the next layer's input (in place).
		last = b.kernel(stages.KindAIV, kAIV(6), 8, []stages.Arg{in(view(bufs[0], 0, f32, 8, 1024)), io(cur)}, []uint64{uint64(l)}, deps(mo, last), noPred)
	}
	// head
	b.kernel(stages.KindAIC, kAIC(0), 24, []stages.Arg{in(cur), in(view(rAttnW, 0, stages.INT8, 4096, 4096)), oe(view(rLogits, 0, f32, 8, 16384))}, nil, deps(last), noPred)
	return b, ks
}

func TestDSv4LikeStep(t *testing.T) {
	b, ks := dsv4Like()
	d := New(DefaultConfig())
	d.RegisterEntry(b.entry)
	d.RegisterKernels(ks)
	r := launch(t, d, b.bytes())
	pred := 0
	for i := range b.img.Tasks {
		if b.img.Tasks[i].Pred.Valid {
			pred++
		}
	}
	ran := pred - r.Skipped
	t.Logf("%d tasks (%d predicated, %d ran), %d subtasks, wall %.3f ms, critical path %.3f ms, digest %#x",
		r.Tasks, pred, ran, r.Subtasks, float64(r.SimNs)/1e6, float64(r.CriticalPathNs)/1e6, r.Digest)
	if r.Tasks != len(b.img.Tasks) {
		t.Fatalf("retired %d of %d", r.Tasks, len(b.img.Tasks))
	}
	// "Roughly half" of the routed-expert tasks run.
	if ran < pred*3/10 || ran > pred*7/10 {
		t.Errorf("%d of %d predicated tasks ran", ran, pred)
	}
}

// BenchmarkSimulateStep launches a ~16k-task DSv4-shaped step on a device
// whose run image is resident and already checked: it measures the
// simulation (boot, scheduling, cost model, digests) alone.
func BenchmarkSimulateStep(b *testing.B) {
	bl, ks := dsv4Like()
	d := New(DefaultConfig())
	d.RegisterEntry(bl.entry)
	d.RegisterKernels(ks)
	benchLaunch(b, d, bl.bytes())
}

// benchLaunch copies a run image to d once, launches it once to warm the
// device's buffers, then times launches of the resident image.
func benchLaunch(b *testing.B, d *Die, image []byte) {
	b.Helper()
	if err := d.CopyRun(image); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Launch(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Launch(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopyLaunchStep adds the H2D copy, decode and checks of the run
// image to every step.
func BenchmarkCopyLaunchStep(b *testing.B) {
	bl, ks := dsv4Like()
	img := bl.bytes()
	d := New(DefaultConfig())
	d.RegisterEntry(bl.entry)
	d.RegisterKernels(ks)
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.CopyRun(img); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Launch(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSimulateStepNoRace is BenchmarkSimulateStep with the race
// detector off: the difference is the detector's cost.
func BenchmarkSimulateStepNoRace(b *testing.B) {
	bl, ks := dsv4Like()
	cfg := DefaultConfig()
	cfg.NoRace = true
	d := New(cfg)
	d.RegisterEntry(bl.entry)
	d.RegisterKernels(ks)
	benchLaunch(b, d, bl.bytes())
}
