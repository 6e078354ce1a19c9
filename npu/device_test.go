package npu

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

func TestSyntheticRunsInDependencyOrder(t *testing.T) {
	d := newDevice(t)
	d.SetTimeline(true)
	b := synth(synthOpts{})
	r := launch(t, d, b.bytes())
	nt := len(b.img.Tasks)
	if r.Tasks != nt {
		t.Fatalf("retired %d tasks, image has %d", r.Tasks, nt)
	}
	if r.Kernels+r.Skipped+r.Dummies+r.Allocs != r.Tasks || r.Dummies != 1 || r.Allocs != 9 {
		t.Fatalf("counts %+v", r)
	}
	if r.Skipped == 0 || r.Skipped == 16 {
		t.Errorf("predicates ran %d of 16 expert tasks: want some on, some off", 16-r.Skipped)
	}
	// Every task starts after every producer completed, and completes
	// after them.
	img := &b.img
	for i := range img.Tasks {
		c := &d.sim.tasks[i]
		s := img.Tasks[i].Fanin
		for _, f := range img.Fanin[s.Off : s.Off+s.N] {
			p := &d.sim.tasks[f]
			if c.next > 0 && c.first < p.doneAt {
				t.Errorf("task %d started at %d before producer %d completed at %d", i, c.first, f, p.doneAt)
			}
			if c.doneAt < p.doneAt {
				t.Errorf("task %d completed before producer %d", i, f)
			}
		}
	}
	// MIX blocks hold a cluster's AIC and both its AIVs for the same span.
	var mix, multi int
	for _, sl := range r.Timeline {
		if img.Tasks[sl.Task].Kind == stages.KindMIX {
			mix++
		}
		if img.Tasks[sl.Task].BlockNum > 1 {
			multi++
		}
	}
	if mix != 3*2 || multi == 0 {
		t.Errorf("timeline has %d MIX core slices (want 6), %d multi-block slices", mix, multi)
	}
	if r.SimNs <= 0 || r.CriticalPathNs <= 0 || r.CriticalPathNs > r.SimNs || len(r.CriticalPath) < 3 {
		t.Errorf("wall %d critical path %d (%d tasks)", r.SimNs, r.CriticalPathNs, len(r.CriticalPath))
	}
	var busy int64
	for _, x := range r.CoreBusyNs {
		busy += x
	}
	if len(r.CoreBusyNs) != 72 || busy == 0 {
		t.Errorf("core busy %v", r.CoreBusyNs)
	}
	t.Logf("wall %d ns, critical path %d ns over %d tasks, %d subtasks, %d skipped, digest %#x", r.SimNs, r.CriticalPathNs, len(r.CriticalPath), r.Subtasks, r.Skipped, r.Digest)
}

func TestDeterministic(t *testing.T) {
	img := synth(synthOpts{}).bytes()
	d := newDevice(t)
	d.SetTimeline(true)
	first := launch(t, d, img)
	for i := 0; i < 3; i++ {
		again := launch(t, d, img)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("run %d differs from run 0", i+1)
		}
	}
	// Separate devices on concurrent goroutines: same result, whatever the
	// Go scheduler's interleaving.
	var wg sync.WaitGroup
	res := make([]*Result, 8)
	for g := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev := newDevice(t)
			dev.SetTimeline(true)
			if err := dev.CopyRun(img); err != nil {
				t.Error(err)
				return
			}
			r, err := dev.Launch()
			if err != nil {
				t.Error(err)
				return
			}
			res[g] = r
		}()
	}
	wg.Wait()
	for g, r := range res {
		if !reflect.DeepEqual(first, r) {
			t.Fatalf("goroutine %d result differs", g)
		}
	}
}

func TestDigestChangesWithOneScalar(t *testing.T) {
	base := launch(t, newDevice(t), synth(synthOpts{}).bytes())
	// The scalar of expert 5's tasks; make sure expert 5 runs by picking a
	// delta whose run is observed.
	r := launch(t, newDevice(t), synth(synthOpts{scalarDelta: 1}).bytes())
	if r.Digest == base.Digest {
		// Expert 5 may be predicated off; then change a scalar of an
		// always-running task instead.
		b := synth(synthOpts{})
		b.img.Scalars[b.img.Tasks[1].Scalars.Off]++
		r = launch(t, newDevice(t), b.bytes())
	}
	if r.Digest == base.Digest {
		t.Fatal("changing one scalar left the digest unchanged")
	}
	b := synth(synthOpts{})
	b.img.Scalars[b.img.Tasks[1].Scalars.Off]++ // task 1's only scalar
	if r := launch(t, newDevice(t), b.bytes()); r.Digest == base.Digest {
		t.Fatal("changing task 1's scalar left the digest unchanged")
	}
}

func TestDigestChangesWithDroppedDependency(t *testing.T) {
	d := newDevice(t)
	base := launch(t, d, synth(synthOpts{}).bytes())
	d2 := newDevice(t)
	r := launch(t, d2, synth(synthOpts{dropDep: true}).bytes())
	// The reader (task 3) must really have started before its writer
	// (task 2) finished in the simulation.
	w, rd := &d2.sim.tasks[2], &d2.sim.tasks[3]
	if rd.first >= w.last {
		t.Fatalf("reader started at %d, after the writer ended at %d: the case does not reorder", rd.first, w.last)
	}
	if r.Digest == base.Digest {
		t.Fatal("a reader that ran before its writer left the digest unchanged")
	}
	if r.Tasks != base.Tasks {
		t.Fatalf("task count changed: %d vs %d", r.Tasks, base.Tasks)
	}
}

func TestDigestChangesWithSwappedArguments(t *testing.T) {
	base := launch(t, newDevice(t), synth(synthOpts{}).bytes())
	r := launch(t, newDevice(t), synth(synthOpts{swapArgs: true}).bytes())
	if r.Digest == base.Digest {
		t.Fatal("swapping two arguments left the digest unchanged")
	}
}

func TestUploadIsSharedAndCounted(t *testing.T) {
	d := newDevice(t)
	def := blockDef()
	img := stages.EncodeDefinition(def)
	id1, err := d.Upload(img)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := d.Upload(append([]byte(nil), img...))
	if err != nil || id2 != id1 {
		t.Fatalf("re-upload: %v, id %d vs %d", err, id2, id1)
	}
	st := d.Stats()
	if st.DefinitionObjects != 1 || st.DefinitionBytes != int64(len(img)) || st.H2DCopies != 2 || st.H2DBytes != 2*int64(len(img)) || st.UploadHits != 1 {
		t.Fatalf("stats %+v", st)
	}
	d.Reset()
	if st := d.Stats(); st.DefinitionObjects != 0 || st.H2DBytes != 0 || st.EntryRoots != int(nEntry) {
		t.Fatalf("after reset %+v", st)
	}
}

// refusal runs one bad request, checks its error, then checks the device
// still serves a good launch with the reference digest.
func refusal(t *testing.T, d *Die, want error, substr string, bad func() error) {
	t.Helper()
	good := synth(synthOpts{}).bytes()
	ref := launch(t, newDevice(t), good)
	err := bad()
	if err == nil || !errors.Is(err, want) || !strings.Contains(err.Error(), substr) {
		t.Fatalf("err = %v, want %v containing %q", err, want, substr)
	}
	r := launch(t, d, good)
	if r.Digest != ref.Digest || r.Tasks != ref.Tasks {
		t.Fatalf("device answered the next request differently: digest %#x vs %#x", r.Digest, ref.Digest)
	}
}

func launchBytes(d *Die, img []byte) error {
	if err := d.CopyRun(img); err != nil {
		return err
	}
	_, err := d.Launch()
	return err
}

func TestRefusals(t *testing.T) {
	t.Run("fanin not in image", func(t *testing.T) {
		d := newDevice(t)
		b := synth(synthOpts{})
		b.img.Fanin[0] = 999
		refusal(t, d, stages.ErrBadImage, "not in the image", func() error { return launchBytes(d, b.bytes()) })
	})
	t.Run("fanin names a later task", func(t *testing.T) {
		d := newDevice(t)
		b := synth(synthOpts{})
		b.img.Fanin[b.img.Tasks[1].Fanin.Off] = 6 // task 1 waits on task 6 (an alloc with no producers)
		refusal(t, d, ErrFanin, "later task", func() error { return launchBytes(d, b.bytes()) })
	})
	t.Run("cycle", func(t *testing.T) {
		d := newDevice(t)
		b := synth(synthOpts{})
		// task 1 waits on task 2, which waits on task 1.
		b.img.Fanin[b.img.Tasks[1].Fanin.Off] = 2
		refusal(t, d, ErrCycle, "1 -> 2 -> 1", func() error { return launchBytes(d, b.bytes()) })
	})
	t.Run("self dependency", func(t *testing.T) {
		d := newDevice(t)
		b := synth(synthOpts{})
		b.img.Fanin[b.img.Tasks[1].Fanin.Off] = 1
		refusal(t, d, ErrCycle, "1 -> 1", func() error { return launchBytes(d, b.bytes()) })
	})
	t.Run("definition hash does not verify", func(t *testing.T) {
		d := newDevice(t)
		img := stages.EncodeDefinition(blockDef())
		img[len(img)-1] ^= 0xff
		refusal(t, d, stages.ErrBadImage, "does not verify", func() error { _, err := d.Upload(img); return err })
	})
	t.Run("run image hash does not verify", func(t *testing.T) {
		d := newDevice(t)
		img := synth(synthOpts{}).bytes()
		img[100] ^= 1
		refusal(t, d, stages.ErrBadImage, "does not verify", func() error { return launchBytes(d, img) })
	})
	t.Run("nested definition unflattened", func(t *testing.T) {
		// A nested Definition's own image (a node that calls a child by
		// hash) is what a store keeps, never what the device runs.
		d := newDevice(t)
		def := blockDef()
		def.Nodes[len(def.Nodes)-1].Kind = stages.KindGraph
		if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
			t.Fatal(err)
		}
		b, _ := graphForm(def)
		refusal(t, d, ErrInvalidImage, "uploaded unflattened", func() error { return launchBytes(d, b.bytes()) })
	})
	t.Run("definition never uploaded", func(t *testing.T) {
		d := newDevice(t)
		b, _ := graphForm(blockDef())
		refusal(t, d, ErrUnknownDefinition, "never uploaded", func() error { return launchBytes(d, b.bytes()) })
	})
	t.Run("boundary mismatch", func(t *testing.T) {
		d := newDevice(t)
		def := blockDef()
		if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
			t.Fatal(err)
		}
		b, _ := graphForm(def)
		// Slot 0 of the second call views a root of another size (its
		// layout is not shipped: it is the signature's by construction).
		g := b.img.Graphs[1]
		b.img.Args[g.Boundary.Off].View = view(eW, 0, stages.BF16, 256)
		refusal(t, d, ErrBoundaryMismatch, "slot 0 views a root of", func() error { return launchBytes(d, b.bytes()) })
	})
	t.Run("boundary alias partition", func(t *testing.T) {
		d := newDevice(t)
		def := blockDef()
		if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
			t.Fatal(err)
		}
		b, _ := graphForm(def)
		g := b.img.Graphs[0]
		// Slot 2 (kv) now views the same root as slot 1.
		v := b.img.Args[g.Boundary.Off+2].View
		v.Root = b.img.Args[g.Boundary.Off+1].View.Root
		b.img.Args[g.Boundary.Off+2].View = v
		refusal(t, d, ErrBoundaryMismatch, "", func() error { return launchBytes(d, b.bytes()) })
	})
	t.Run("no run image", func(t *testing.T) {
		d := newDevice(t)
		refusal(t, d, ErrNoRunImage, "no run image", func() error { _, err := d.Launch(); return err })
	})
	t.Run("heap overlap", func(t *testing.T) {
		d := newDevice(t)
		b := synth(synthOpts{})
		b.img.Roots[1].Addr = b.img.Roots[0].Addr
		refusal(t, d, ErrInvalidImage, "overlaps", func() error { return launchBytes(d, b.bytes()) })
	})
}

func TestZeroConfigIsUsable(t *testing.T) {
	d := New(Config{})
	d.RegisterEntry(synthEntry())
	d.RegisterKernels(testKernels())
	r := launch(t, d, synth(synthOpts{}).bytes())
	ref := launch(t, newDevice(t), synth(synthOpts{}).bytes())
	if r.Digest != ref.Digest || r.SimNs != ref.SimNs || r.Tasks != ref.Tasks {
		t.Fatalf("zero config differs from the defaults: %+v vs %+v", r, ref)
	}
}

// FuzzLaunch feeds mutated run images (hash fixed up, so the structural and
// device checks are exercised) to a device with the block Definition
// uploaded: it may refuse them, never panic, and must then still launch the
// reference image with the reference digest.
func FuzzLaunch(f *testing.F) {
	gb, _ := graphForm(blockDef())
	f.Add(synth(synthOpts{}).bytes())
	f.Add(gb.bytes())
	ref := launch(f, newDevice(f), synth(synthOpts{}).bytes())
	good := synth(synthOpts{}).bytes()
	f.Fuzz(func(t *testing.T, b []byte) {
		d := newDevice(t)
		if _, err := d.Upload(stages.EncodeDefinition(blockDef())); err != nil {
			t.Fatal(err)
		}
		if len(b) >= 16 {
			b = append([]byte(nil), b...)
			if img, err := stages.DecodeRunImage(fixRunHash(b)); err == nil {
				b = stages.EncodeRunImage(img)
			}
		}
		_ = launchBytes(d, b)
		if r := launch(t, d, good); r.Digest != ref.Digest {
			t.Fatal("device changed by a refused launch")
		}
	})
}

// fixRunHash rewrites a run image's content hash so it verifies.
func fixRunHash(b []byte) []byte {
	img := append([]byte(nil), b...)
	for i := 8; i < 16; i++ {
		img[i] = 0
	}
	h := stages.RunImageHash(img)
	for i := 0; i < 8; i++ {
		img[8+i] = byte(h >> (8 * i))
	}
	return img
}

// TestCheckLayouts feeds the device check images the decoder would not
// make (the device must not trust that it did): an ordinary task's arg with
// no layout or an unknown dtype, a view of more than MaxDims dims, and
// fanin spans that overlap past the pool. Each is refused, not a panic or a
// run to a wrong digest.
func TestCheckLayouts(t *testing.T) {
	cases := []struct {
		name  string
		forge func(img *stages.RunImage)
		want  error
		sub   string
	}{
		{"ordinary arg without layout", func(img *stages.RunImage) {
			a := &img.Args[img.Tasks[1].Args.Off].View
			*a = stages.View{Root: a.Root, Offset: a.Offset}
		}, ErrInvalidImage, "dtype invalid"},
		{"unknown dtype", func(img *stages.RunImage) {
			img.Args[img.Tasks[1].Args.Off].View.DType = stages.UINT64 + 1
		}, ErrInvalidImage, "has dtype"},
		{"too many dims", func(img *stages.RunImage) {
			img.Args[img.Tasks[1].Args.Off].View.NDims = stages.MaxDims + 1
		}, ErrInvalidImage, "dims (at most"},
		{"predicate too many dims", func(img *stages.RunImage) {
			img.Tasks[1].Pred = stages.Predicate{Valid: true, View: img.Args[img.Tasks[1].Args.Off].View}
			img.Tasks[1].Pred.View.NDims = stages.MaxDims + 1
		}, ErrInvalidImage, "predicate has"},
		{"fanin spans overlap", func(img *stages.RunImage) {
			last := &img.Tasks[len(img.Tasks)-1]
			last.Fanin = stages.Span{Off: 0, N: uint32(len(img.Fanin))}
		}, ErrFanin, "runs past the fanin pool"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img, err := stages.DecodeRunImage(synth(synthOpts{}).bytes())
			if err != nil {
				t.Fatal(err)
			}
			c.forge(img)
			d := newDevice(t)
			var p *plan
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("check panicked: %v", r)
					}
				}()
				p, err = d.check(img)
			}()
			if p != nil || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.sub) {
				t.Fatalf("err = %v, want %v containing %q", err, c.want, c.sub)
			}
		})
	}
}

// TestInOutKeepsHistory: an inout (or output_existing) write's result
// depends on what its region held, so a change in an earlier writer, or an update applied twice,
// changes the digest (the outside tester's F2: a wrong Graph body ending in
// an accumulator passed the golden check); two unordered accumulations into
// one region give the same digest in either order; a kernel of a declared
// race group writes its inout arguments as outputs.
func TestInOutKeepsHistory(t *testing.T) {
	type step struct {
		k      stages.KernelID
		tag    stages.Tag
		scalar uint64
	}
	run := func(kernels []stages.Kernel, steps ...step) uint64 {
		o := stages.NewOrdinaryPath(synthEntry())
		for _, s := range steps {
			o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, s.k, -1}, BlockNum: 1,
				Args:    []stages.Arg{in(view(eX, 0, stages.BF16, 256)), {Tag: s.tag, View: view(eOut, 0, stages.BF16, 256)}},
				Scalars: []stages.Scalar{stages.Static(s.scalar)}})
		}
		d := New(DefaultConfig())
		d.RegisterEntry(synthEntry())
		d.RegisterKernels(kernels)
		return launch(t, d, stages.EncodeRunImage(o.Image())).Digest
	}
	ks := testKernels()
	a1, a2 := step{kAct, stages.TagOutputExisting, 1}, step{kAct, stages.TagOutputExisting, 2}
	acc := step{kNorm, stages.TagInOut, 0}
	accB := step{kRoute, stages.TagInOut, 0}
	base := run(ks, a1, acc)
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"an earlier writer's scalar", []step{a2, acc}},
		{"the update applied twice", []step{a1, acc, acc}},
		{"a second update", []step{a1, acc, accB}},
		{"an output_existing update on top", []step{a1, acc, {kRoute, stages.TagOutputExisting, 0}}},
	} {
		if run(ks, c.steps...) == base {
			t.Errorf("%s: digest unchanged", c.name)
		}
	}
	// accB and acc are unordered (inout waits on the last writer only
	// through the TensorMap: here each waits on the previous, so the two
	// orders are two programs); their sum is the same.
	if x, y := run(ks, a1, acc, accB), run(ks, a1, accB, acc); x != y {
		t.Errorf("two accumulations: %x in one order, %x in the other", x, y)
	}
	// output_existing writes like inout: upstream declares one kernel either
	// way at different sites.
	if x, y := run(ks, a1, acc), run(ks, a1, step{kNorm, stages.TagOutputExisting, 0}); x != y {
		t.Errorf("the same update as inout and as output_existing: %x and %x", x, y)
	}
	// Declared racing kernels: only the last write counts, as an output's.
	raced := append([]stages.Kernel(nil), ks...)
	raced[kNorm].RaceGroup = 1
	if run(raced, a1, acc) != run(raced, a2, acc) {
		t.Errorf("a declared racing kernel's inout kept what the region held")
	}
}

// TestPatchRun: a patch over the image it was made against launches as the
// whole image would; over any other image (another tag, a reset die, a
// different length) the whole image is copied; an unchanged image sends
// nothing and launches the same.
func TestPatchRun(t *testing.T) {
	base := synth(synthOpts{}).bytes()
	b := synth(synthOpts{})
	b.img.Scalars[b.img.Tasks[1].Scalars.Off]++
	next := b.bytes()
	want := launchOnce(t, newDevice(t), next)

	d := newDevice(t)
	if sent, err := d.PatchRun(base, 1, 0, nil); err != nil || sent != len(base) {
		t.Fatalf("first image: sent %d, %v; want all %d bytes", sent, err, len(base))
	}
	first, err := d.Launch()
	if err != nil {
		t.Fatal(err)
	}
	changed, ok := stages.DiffRunImage(nil, base, next)
	if !ok || len(changed) == 0 {
		t.Fatalf("diff: %v, %v", changed, ok)
	}
	sent, err := d.PatchRun(next, 2, 1, changed)
	if err != nil || sent != stages.RangeBytes(changed) || sent >= len(next) {
		t.Fatalf("patch: sent %d of %d, %v; want the %d changed bytes", sent, len(next), err, stages.RangeBytes(changed))
	}
	if r, err := d.Launch(); err != nil || r.Digest != want.Digest || r.Digest == first.Digest {
		t.Fatalf("patched launch: %v; digest %#x, want %#x (the whole image's)", err, r.Digest, want.Digest)
	}
	if sent, err := d.PatchRun(next, 3, 2, nil); err != nil || sent != 0 {
		t.Fatalf("unchanged image: sent %d, %v; want nothing", sent, err)
	}
	if r, err := d.Launch(); err != nil || r.Digest != want.Digest {
		t.Fatalf("unchanged image's launch: %v, digest %#x, want %#x", err, r.Digest, want.Digest)
	}
	// Over an image it was not made against, a patch would launch a mix:
	// the whole image goes instead.
	for name, tc := range map[string]struct {
		reset bool
		base  uint64
	}{"another tag": {base: 2}, "a reset die": {reset: true, base: 3}} {
		if tc.reset {
			d.Reset()
		}
		sent, err := d.PatchRun(base, 4, tc.base, nil)
		if err != nil || sent != len(base) {
			t.Fatalf("%s: sent %d, %v; want the whole %d bytes", name, sent, err, len(base))
		}
	}
	if sent, _ := d.PatchRun(append(bytes.Clone(base), 0), 5, 4, nil); sent != len(base)+1 {
		t.Fatalf("another length: sent %d, want the whole image", sent)
	}
}

// TestRaceWorkBound: a launch whose race check passes Config.MaxRaceWork
// steps fails with ErrRaceWork instead of running on (a 4000×4000
// reader-writer model took the detector 74-92 s) or calling the graph
// race-free; within the bound the same launch checks as before.
func TestRaceWorkBound(t *testing.T) {
	img := synth(synthOpts{}).bytes()
	want := launchOnce(t, newDevice(t), img)
	cfg := DefaultConfig()
	cfg.MaxRaceWork = 1
	d := New(cfg)
	d.RegisterEntry(synthEntry())
	d.RegisterKernels(testKernels())
	if err := d.CopyRun(img); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Launch(); !errors.Is(err, ErrRaceWork) {
		t.Fatalf("launch past the race detector's bound: %v, %v; want ErrRaceWork", r, err)
	}
	cfg.MaxRaceWork = -1
	if err := cfg.Validate(); err == nil {
		t.Fatal("a negative MaxRaceWork validated")
	}
	if got := launchOnce(t, newDevice(t), img); got.RaceCount != want.RaceCount || got.Digest != want.Digest {
		t.Fatalf("within the bound: %d races, digest %#x; want %d, %#x", got.RaceCount, got.Digest, want.RaceCount, want.Digest)
	}
}

// TestFreeDefinition: an object uploaded twice stays through one free and
// goes with the second, its bytes leaving the device's count; a launch
// then finds it gone.
func TestFreeDefinition(t *testing.T) {
	d := newDevice(t)
	img := stages.EncodeDefinition(blockDef())
	h := stages.DefinitionHash(img)
	for range 2 {
		if _, err := d.Upload(img); err != nil {
			t.Fatal(err)
		}
	}
	held := d.Stats().DefinitionBytes
	if held == 0 || d.Stats().DefinitionObjects != 1 {
		t.Fatalf("after two uploads of one image: %+v", d.Stats())
	}
	if d.Free(h) || d.Stats().DefinitionBytes != held {
		t.Fatalf("the first free of two uploads dropped the object: %+v", d.Stats())
	}
	if !d.Free(h) {
		t.Fatal("the second free kept the object")
	}
	if s := d.Stats(); s.DefinitionBytes != 0 || s.DefinitionObjects != 0 || s.Frees != 1 {
		t.Fatalf("after the last free: %+v", s)
	}
	if d.Free(h) {
		t.Fatal("a free of an object not held reported one freed")
	}
}
