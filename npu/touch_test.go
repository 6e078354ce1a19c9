package npu

import (
	"math"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// touchEntry: expert weights w [32, 512, 1024] int8 (16 MiB, 512 KiB per
// expert), an input x [1024] bf16 and an output y [1024] bf16.
func touchEntry() []stages.Root {
	return []stages.Root{
		{Name: "w", Kind: stages.RootEntry, DType: stages.INT8, Shape: []int64{32, 512, 1024}, Elems: 32 * 512 * 1024, Creator: stages.NoTask},
		{Name: "x", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{1024}, Elems: 1024, Creator: stages.NoTask},
		{Name: "y", Kind: stages.RootEntryOutput, DType: stages.BF16, Shape: []int64{1024}, Elems: 1024, Creator: stages.NoTask},
	}
}

// touchRun launches one task with kernel table ks: an AIC expert matmul
// (kernel 0) over the whole w, or with mix a MIX task of kernels 0 and 1,
// block_num 1, and returns the result and the task's core time per block
// less the dispatch overhead.
func touchRun(t *testing.T, ks []stages.Kernel, mix bool) (*Result, int64) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Timeline = true
	d := New(cfg)
	d.RegisterEntry(touchEntry())
	d.RegisterKernels(ks)
	b := newBuilder(touchEntry())
	args := []stages.Arg{in(view(1, 0, stages.BF16, 1024)), in(view(0, 0, stages.INT8, 32, 512, 1024)), oe(view(2, 0, stages.BF16, 1024))}
	if mix {
		b.kernel(stages.KindMIX, kMIX(0, 1), 1, args, []uint64{5}, nil, noPred)
	} else {
		b.kernel(stages.KindAIC, kAIC(0), 1, args, []uint64{5}, nil, noPred)
	}
	r := launch(t, d, b.bytes())
	if len(r.Timeline) == 0 {
		t.Fatal("no slice in the timeline")
	}
	return r, r.Timeline[0].Dur - cfg.DispatchNs
}

// memNs is the cost model's time for bytes on one core running alone: the
// per-core HBM cap, since a matmul at the default intensity is memory bound.
func memNs(bytes int64) int64 {
	c := DefaultConfig()
	return int64(math.Ceil(float64(bytes) / c.CoreBytesPerSec * 1e9))
}

func TestTouchNarrowsBytesAndTime(t *testing.T) {
	kern := func(touch ...stages.Touch) []stages.Kernel {
		return []stages.Kernel{
			{Name: "exp_mm", Core: stages.KindAIC, Code: "exp_mm", Touch: touch},
			{Name: "exp_mm_v", Core: stages.KindAIV, Code: "exp_mm_v"},
		}
	}
	const small = 2 * 1024 * 2 // x and y, bf16
	full, fullNs := touchRun(t, kern(), false)
	if want := memNs(32*512*1024 + small); fullNs != want {
		t.Fatalf("unhinted: %d ns, want %d", fullNs, want)
	}
	one, oneNs := touchRun(t, kern(stages.Touch{Arg: 1, Rows: 1}), false)
	if want := memNs(512*1024 + small); oneNs != want {
		t.Fatalf("1 row of 32: %d ns, want %d", oneNs, want)
	}
	// Proportional: 1 of 32 experts is ~1/32 of the time (the small
	// arguments are still counted whole).
	if r := float64(fullNs) / float64(oneNs); r < 31 || r > 32 {
		t.Fatalf("unhinted/hinted = %.2f, want ~32", r)
	}
	four, fourNs := touchRun(t, kern(stages.Touch{Arg: 1, Rows: 4}), false)
	if want := memNs(4*512*1024 + small); fourNs != want {
		t.Fatalf("4 rows of 32: %d ns, want %d", fourNs, want)
	}
	if full.SimNs-one.SimNs != fullNs-oneNs || four.SimNs >= full.SimNs {
		t.Fatalf("device wall: full %d, 1 row %d, 4 rows %d", full.SimNs, one.SimNs, four.SimNs)
	}
	// Timing only: what the task computes does not change.
	if one.Digest != full.Digest || four.Digest != full.Digest {
		t.Fatalf("digest changed by a hint: %#x / %#x / %#x", full.Digest, one.Digest, four.Digest)
	}
	// More rows than the view has, a non-positive count, or an argument
	// the task does not have: the whole view.
	for _, h := range []stages.Touch{{Arg: 1, Rows: 64}, {Arg: 1, Rows: 0}, {Arg: 1, Rows: -3}, {Arg: 7, Rows: 1}, {Arg: -1, Rows: 1}} {
		if _, ns := touchRun(t, kern(h), false); ns != fullNs {
			t.Fatalf("hint %+v: %d ns, want the unhinted %d", h, ns, fullNs)
		}
	}
	// Two hints on one argument: the larger counts.
	if _, ns := touchRun(t, kern(stages.Touch{Arg: 1, Rows: 4}, stages.Touch{Arg: 1, Rows: 1}), false); ns != fourNs {
		t.Fatalf("hints of 4 and 1 rows: %d ns, want %d", ns, fourNs)
	}
}

// A MIX task's kernels share its arguments: a hint on one of them alone
// cannot narrow what the other reads.
func TestTouchMIXNeedsEveryKernel(t *testing.T) {
	h := stages.Touch{Arg: 1, Rows: 1}
	kern := func(aic, aiv []stages.Touch) []stages.Kernel {
		return []stages.Kernel{
			{Name: "attn_c", Core: stages.KindAIC, Code: "attn_c", Touch: aic},
			{Name: "attn_v", Core: stages.KindAIV, Code: "attn_v", Touch: aiv},
		}
	}
	_, none := touchRun(t, kern(nil, nil), true)
	if _, ns := touchRun(t, kern([]stages.Touch{h}, nil), true); ns != none {
		t.Fatalf("AIC half hinted: %d ns, want the unhinted %d", ns, none)
	}
	_, both := touchRun(t, kern([]stages.Touch{h}, []stages.Touch{h}), true)
	if both >= none/16 {
		t.Fatalf("both halves hinted: %d ns, unhinted %d", both, none)
	}
	if _, ns := touchRun(t, kern([]stages.Touch{h}, []stages.Touch{{Arg: 1, Rows: 2}}), true); ns <= both || ns >= none {
		t.Fatalf("halves of 1 and 2 rows: %d ns, want between %d and %d", ns, both, none)
	}
}

// A Graph node reads its hint through its kernel too: the matmul node of
// blockDef (a boundary view of 128 weight rows) times the same in the
// Graph form as its eager task, and less than unhinted.
func TestTouchAppliesToGraphNodes(t *testing.T) {
	mmDur := func(ks []stages.Kernel, graph bool) int64 {
		def := blockDef()
		gb, eb := graphForm(def)
		cfg := DefaultConfig()
		cfg.Timeline = true
		d := New(cfg)
		d.RegisterEntry(synthEntry())
		d.RegisterKernels(ks)
		b := eb
		if graph {
			if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
				t.Fatal(err)
			}
			b = gb
		}
		r := launch(t, d, b.bytes())
		for _, s := range r.Timeline {
			if s.Kernel == kMM {
				return s.Dur
			}
		}
		t.Fatal("no matmul slice")
		return 0
	}
	plain := testKernels()
	hinted := testKernels()
	hinted[kMM].Touch = []stages.Touch{{Arg: 1, Rows: 8}}
	g, e := mmDur(hinted, true), mmDur(hinted, false)
	if g != e {
		t.Fatalf("hinted matmul: graph node %d ns, eager task %d ns", g, e)
	}
	if p := mmDur(plain, true); g >= p {
		t.Fatalf("hinted graph node %d ns, unhinted %d ns", g, p)
	}
}

// TestTouchTile: a hint may narrow the last dim too (a 2-D tile of a
// weight matrix): rows × the row's elements × cols / the last dim. Columns
// alone narrow every row; a MIX task narrows each dimension only when each
// of its kernels does; a view below rank 2 ignores Cols.
func TestTouchTile(t *testing.T) {
	const small = 2 * 1024 * 2 // x and y, bf16
	aic := func(touch ...stages.Touch) []stages.Kernel {
		return []stages.Kernel{{Name: "exp_mm", Core: stages.KindAIC, Code: "exp_mm", Touch: touch}, {Name: "v", Core: stages.KindAIV, Code: "v"}}
	}
	for _, tc := range []struct {
		name  string
		hints []stages.Touch
		bytes int64
	}{
		{"1 row, 256 of 1024 columns", []stages.Touch{{Arg: 1, Rows: 1, Cols: 256}}, 512*256 + small},
		{"columns alone", []stages.Touch{{Arg: 1, Cols: 128}}, 32*512*128 + small},
		{"more columns than the view", []stages.Touch{{Arg: 1, Rows: 2, Cols: 4096}}, 2*512*1024 + small},
		{"two hints: the wider in each dim", []stages.Touch{{Arg: 1, Rows: 2, Cols: 64}, {Arg: 1, Rows: 1, Cols: 256}}, 2*512*256 + small},
		{"two hints, one without columns", []stages.Touch{{Arg: 1, Rows: 2, Cols: 64}, {Arg: 1, Rows: 1}}, 2*512*1024 + small},
		{"rank 1: columns ignored", []stages.Touch{{Arg: 0, Cols: 16}}, 32*512*1024 + small},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ns := touchRun(t, aic(tc.hints...), false); ns != memNs(tc.bytes) {
				t.Fatalf("%d ns, want %d (%d bytes)", ns, memNs(tc.bytes), tc.bytes)
			}
		})
	}
	mix := func(c, v []stages.Touch) int64 {
		_, ns := touchRun(t, []stages.Kernel{{Name: "c", Core: stages.KindAIC, Code: "c", Touch: c}, {Name: "v", Core: stages.KindAIV, Code: "v", Touch: v}}, true)
		return ns
	}
	tile, row := []stages.Touch{{Arg: 1, Rows: 1, Cols: 256}}, []stages.Touch{{Arg: 1, Rows: 1}}
	both, rowsOnly := mix(tile, tile), mix(tile, row)
	if want := mix(row, row); rowsOnly != want {
		t.Fatalf("MIX, columns hinted by one kernel only: %d ns, want the rows-only %d", rowsOnly, want)
	}
	if both >= rowsOnly {
		t.Fatalf("MIX, tile hinted by both kernels: %d ns, rows only %d", both, rowsOnly)
	}
}
