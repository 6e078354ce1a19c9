package npu

import (
	"errors"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// cohortImage is a busy AIC task (block_num 8, each block reading a
// 128 KiB weight: long) and a short AIV task, both ready at once, then a
// MIX task of block_num 24 (task 2) that waits on the short one and needs
// every cluster whole: when it becomes ready, only 16 clusters are free
// until the AIC blocks end.
func cohortImage(launch stages.Launch) *builder {
	b := newBuilder(synthEntry())
	b.kernel(stages.KindAIC, kAIC(kMM), 8, []stages.Arg{in(view(eW, 0, stages.BF16, 8, 256, 256)), io(view(eOut2, 0, stages.BF16, 256))}, []uint64{1}, nil, noPred)
	short := b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{io(view(eX, 0, stages.BF16, 256))}, []uint64{3}, nil, noPred)
	b.kernel(stages.KindMIX, kMIX(kAttnC, kAttnV), 24, []stages.Arg{in(view(eX, 0, stages.BF16, 256)), io(view(eKV, 0, stages.BF16, 8, 256))}, []uint64{2}, []stages.TaskID{short}, noPred)
	b.img.Tasks[2].Launch = launch
	return b
}

// mixStarts is the start of each block of the image's MIX task, from the
// timeline's AIC slices that kind selects.
func mixStarts(r *Result, kind func(sl Slice) bool) []int64 {
	var out []int64
	for _, sl := range r.Timeline {
		if kind(sl) && sl.Kernel == kAttnC {
			out = append(out, sl.Start)
		}
	}
	return out
}

// TestSyncStartCohort: a MIX task with sync_start and block_num 24 starts
// all 24 blocks at one simulated instant, once the busy AIC blocks have
// freed their clusters: later than its first block starts without the
// flag, when 16 clusters are free at once. Early resolve is carried but
// changes nothing on this device (host_build_graph disables it).
func TestSyncStartCohort(t *testing.T) {
	run := func(l stages.Launch) *Result {
		cfg := DefaultConfig()
		cfg.Timeline = true
		d := New(cfg)
		d.RegisterEntry(synthEntry())
		d.RegisterKernels(testKernels())
		return launch(t, d, cohortImage(l).bytes())
	}
	ordinary := func(sl Slice) bool { return sl.Task == 2 }
	plain, synced, early := run(0), run(stages.LaunchSyncStart), run(stages.LaunchEarly)

	ps, ss := mixStarts(plain, ordinary), mixStarts(synced, ordinary)
	if len(ps) != 24 || len(ss) != 24 {
		t.Fatalf("MIX blocks: %d without sync_start, %d with; want 24 each", len(ps), len(ss))
	}
	for i, s := range ss {
		if s != ss[0] {
			t.Fatalf("sync_start block %d starts at %d ns, block 0 at %d: want one instant", i, s, ss[0])
		}
	}
	first, last := ps[0], ps[0]
	for _, s := range ps {
		first, last = min(first, s), max(last, s)
	}
	if first == last {
		t.Fatalf("without sync_start every block starts at %d: the busy AIC task should hold 8 clusters", first)
	}
	if ss[0] <= first {
		t.Errorf("sync_start cohort starts at %d ns, not later than the first block without it (%d)", ss[0], first)
	}
	var aicEnd int64
	for _, sl := range synced.Timeline {
		if sl.Task == 0 {
			aicEnd = max(aicEnd, sl.Start+sl.Dur)
		}
	}
	if ss[0] < aicEnd {
		t.Errorf("cohort starts at %d ns, before the busy AIC blocks end at %d", ss[0], aicEnd)
	}
	if early.SimNs != plain.SimNs || early.Digest != plain.Digest {
		t.Errorf("early resolve changed the run: wall %d vs %d", early.SimNs, plain.SimNs)
	}
	if synced.Digest != plain.Digest {
		t.Errorf("sync_start changed what the run computes")
	}
}

// TestSyncStartCohortInGraph: a Definition's sync_start node starts its
// blocks together when a GRAPH task replays it.
func TestSyncStartCohortInGraph(t *testing.T) {
	def := blockDef()
	def.Nodes[3].Launch = stages.LaunchSyncStart // the MIX node, block_num 2
	def.Nodes[3].BlockNum = 24
	stages.EncodeDefinition(def) // its content hash, which the GRAPH tasks name
	gb, _ := graphForm(def)
	cfg := DefaultConfig()
	cfg.Timeline = true
	d := New(cfg)
	d.RegisterEntry(synthEntry())
	d.RegisterKernels(testKernels())
	if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
		t.Fatal(err)
	}
	r := launch(t, d, gb.bytes())
	byInst := map[stages.TaskID][]int64{}
	for _, sl := range r.Timeline {
		if sl.Node == 3 && sl.Kernel == kAttnC {
			byInst[sl.Task] = append(byInst[sl.Task], sl.Start)
		}
	}
	if len(byInst) == 0 {
		t.Fatal("no MIX node blocks in the timeline")
	}
	for task, starts := range byInst {
		if len(starts) != 24 {
			t.Fatalf("GRAPH task %d: %d MIX blocks, want 24", task, len(starts))
		}
		for _, s := range starts {
			if s != starts[0] {
				t.Fatalf("GRAPH task %d: MIX blocks start at %v, want one instant", task, starts)
			}
		}
	}
}

// TestSyncStartWiderThanTheDie: a cohort that could never find all its
// cores at once is refused at launch, not left to stall.
func TestSyncStartWiderThanTheDie(t *testing.T) {
	b := cohortImage(stages.LaunchSyncStart)
	var gb *builder
	b.img.Tasks[2].BlockNum = 25
	d := newDevice(t)
	if err := d.CopyRun(b.bytes()); err != nil {
		t.Fatal(err)
	}
	_, err := d.Launch()
	if !errors.Is(err, ErrInvalidImage) {
		t.Fatalf("launch: %v, want ErrInvalidImage", err)
	}

	def := blockDef()
	def.Nodes[3].Launch, def.Nodes[3].BlockNum = stages.LaunchSyncStart, 25
	stages.EncodeDefinition(def)
	gb, _ = graphForm(def)
	d = newDevice(t)
	if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyRun(gb.bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err = d.Launch(); !errors.Is(err, ErrInvalidImage) {
		t.Fatalf("launch of a Definition with a 25-block sync_start MIX node: %v, want ErrInvalidImage", err)
	}
}

// TestPredicateOnEntryData: a predicate over an entry root with given
// contents reads those values; once a task writes the root, the digests
// decide again.
func TestPredicateOnEntryData(t *testing.T) {
	entry := synthEntry()
	entry[eCnt].Data = []int64{0, 5, 0, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}
	d := New(DefaultConfig())
	d.RegisterEntry(entry)
	d.RegisterKernels(testKernels())
	b := newBuilder(entry)
	for e := int64(0); e < 16; e++ {
		pred := stages.Predicate{Valid: true, Op: stages.PredGT, View: view(eCnt, 0, stages.INT32, 16), Index: e, Target: 2}
		b.kernel(stages.KindAIV, kAIV(kExpAct), 1, []stages.Arg{in(view(eCnt, 0, stages.INT32, 16)), io(view(eOut, e*16, stages.BF16, 16))}, []uint64{uint64(e)}, nil, pred)
	}
	r := launch(t, d, b.bytes())
	if ran := 16 - r.Skipped; ran != 3 {
		t.Errorf("%d predicated tasks ran, want 3 (elements 1, 3 and 15 are above 2)", ran)
	}
}

// TestStridedArgs: a strided tile costs its own elements, not the rows it
// spans, and touches its own elements for races: two unordered writers of
// interleaved column tiles of the same rows do not race, two tiles that
// share an element do.
func TestStridedArgs(t *testing.T) {
	strided := func(off int64) stages.View {
		v := view(eKV, off, stages.BF16, 4, 64)
		v.Strides[0] = 256
		return v
	}
	run := func(a, b stages.View) *Result {
		cfg := DefaultConfig()
		cfg.Timeline = true
		d := New(cfg)
		d.RegisterEntry(synthEntry())
		d.RegisterKernels(testKernels())
		bl := newBuilder(synthEntry())
		bl.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{io(a)}, nil, nil, noPred)
		bl.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{io(b)}, nil, nil, noPred)
		return launch(t, d, bl.bytes())
	}
	tiles := run(strided(0), strided(64))
	if tiles.RaceCount != 0 {
		t.Errorf("two unordered writers of column tiles [0, 64) and [64, 128) of the same rows: %d races, want none", tiles.RaceCount)
	}
	shared := run(strided(0), strided(3*256+63))
	if shared.RaceCount == 0 {
		t.Error("two unordered writers sharing element 3*256+63: no race")
	}
	rows := run(strided(0), strided(4*256))
	if rows.RaceCount != 0 {
		t.Errorf("two writers of tiles of disjoint rows: %d races", rows.RaceCount)
	}
	flat := run(view(eKV, 0, stages.BF16, 256), view(eKV, 1024, stages.BF16, 256))
	dur := func(r *Result) int64 { return r.Timeline[0].Dur }
	if dur(rows) != dur(flat) {
		t.Errorf("a [4, 64] tile of stride 256 runs %d ns, 256 contiguous elements %d: a tile costs its own elements", dur(rows), dur(flat))
	}
}
