package npu

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/internal/reftrace"
	"github.com/hbg-dev/hbg/stages"
)

// The reference DSv4 eager trace (tests/testdata/reference, from
// shared/reference) turned straight into a run image: its own fanin, its
// own views, entry root sizes from entry_tensors.txt. It checks the device
// on the real step: 15971 device tasks including 8256 predicated ones.

const refDir = "../tests/testdata/reference/"

func loadReference(tb testing.TB) (*stages.RunImage, []stages.Root) {
	tb.Helper()
	sizes := map[string][]int64{}
	dtypes := map[string]stages.DType{}
	if raw, err := os.ReadFile(refDir + "entry_tensors.txt"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 || f[0] != "tensor" {
				continue
			}
			dt, err := stages.ParseDType(f[2])
			if err != nil {
				tb.Fatal(err)
			}
			var shape []int64
			for _, s := range f[3:] {
				n, _ := strconv.ParseInt(s, 10, 64)
				shape = append(shape, n)
			}
			sizes[f[1]], dtypes[f[1]] = shape, dt
		}
	}
	lines, err := reftrace.Load(refDir + "eager.jsonl.gz")
	if err != nil {
		tb.Skipf("reference trace not available: %v", err)
	}
	tasks := reftrace.Tasks(lines)

	// Entry roots: every (rkind, rid) not created by the trace.
	type key struct {
		kind string
		rid  int
	}
	created := map[int]bool{}
	for _, e := range tasks {
		for _, a := range e.Args {
			if a.Tag == "o" {
				created[a.RID] = true
			}
		}
	}
	ids := map[key]stages.RootID{}
	var entry []stages.Root
	extent := map[stages.RootID]int64{}
	for _, e := range tasks {
		for _, a := range e.Args {
			if a.RKind == "alloc" || created[a.RID] {
				continue
			}
			k := key{a.RKind, a.RID}
			id, ok := ids[k]
			if !ok {
				dt, _ := stages.ParseDType(a.DType)
				kind := stages.RootEntry
				if a.RKind == "out" {
					kind = stages.RootEntryOutput
				}
				id = stages.RootID(len(entry))
				ids[k] = id
				r := stages.Root{Name: a.Root, Kind: kind, DType: dt, Creator: stages.NoTask}
				if sh, ok := sizes[a.Root]; ok {
					r.Shape, r.DType = sh, dtypes[a.Root]
					r.Elems = 1
					for _, d := range sh {
						r.Elems *= d
					}
				}
				entry = append(entry, r)
			}
			n := a.Off
			el := int64(1)
			for _, d := range a.Shape {
				el *= d
			}
			extent[id] = max(extent[id], n+el)
		}
	}
	for id, ext := range extent {
		if entry[id].Elems < ext {
			entry[id].Elems = ext
		}
	}

	b := newBuilder(entry)
	alloc := map[int]stages.RootID{}
	byName := map[string]stages.RootID{}
	shapes := map[stages.RootID][]int64{}
	for i := range entry {
		byName[entry[i].Name] = stages.RootID(i)
		shapes[stages.RootID(i)] = entry[i].Shape
	}
	for ti, e := range tasks {
		args := make([]stages.Arg, len(e.Args))
		for i, a := range e.Args {
			tag, err := stages.ParseTag(a.Tag)
			if err != nil {
				tb.Fatal(err)
			}
			dt, _ := stages.ParseDType(a.DType)
			var r stages.RootID
			if a.Tag == "o" {
				el := int64(1)
				for _, d := range a.Shape {
					el *= d
				}
				r = b.newRoot(dt, el, stages.TaskID(ti))
				alloc[a.RID] = r
				byName[a.Root] = r
				shapes[r] = a.Shape
			} else if a.RKind == "alloc" || created[a.RID] {
				r = alloc[a.RID]
			} else {
				r = ids[key{a.RKind, a.RID}]
			}
			args[i] = stages.Arg{Tag: tag, View: stages.NewView(r, a.Off, dt, a.Shape...)}
		}
		fanin := make([]stages.TaskID, len(e.Fanin))
		for i, f := range e.Fanin {
			fanin[i] = stages.TaskID(f)
		}
		kind, err := stages.ParseKind(e.Kind)
		if err != nil {
			tb.Fatal(err)
		}
		td := stages.TaskDesc{Kind: kind, Kernel: [3]stages.KernelID{stages.KernelID(e.K[0]), stages.KernelID(e.K[1]), stages.KernelID(e.K[2])}, BlockNum: int32(e.BlockNum)}
		if p := e.Pred; p != nil {
			r, ok := byName[p.Root]
			if !ok {
				tb.Fatalf("task %d: predicate on unknown root %q", ti, p.Root)
			}
			sh := shapes[r]
			idx, stride := int64(0), int64(1)
			for k := len(p.Idx) - 1; k >= 0; k-- {
				idx += p.Idx[k] * stride
				if k < len(sh) {
					stride *= sh[k]
				}
			}
			el := int64(1)
			for _, d := range sh {
				el *= d
			}
			td.Pred = stages.Predicate{Valid: true, Op: stages.PredOp(p.Op), View: stages.NewView(r, 0, stages.INT32, el), Index: idx, Target: p.Target}
		}
		b.add(td, args, e.Scalars, fanin)
	}
	return &b.img, entry
}

func TestReferenceDSv4Eager(t *testing.T) {
	img, entry := loadReference(t)
	d := New(DefaultConfig())
	d.RegisterEntry(entry)
	r := launch(t, d, stages.EncodeRunImage(img))
	pred := 0
	for i := range img.Tasks {
		if img.Tasks[i].Pred.Valid {
			pred++
		}
	}
	t.Logf("DSv4 eager: %d device tasks (%d kernels, %d predicated of which %d ran, %d dummies, %d allocs), %d subtasks, wall %.3f ms, critical path %.3f ms, entry %.1f GiB, digest %#x",
		r.Tasks, r.Kernels, pred, pred-r.Skipped, r.Dummies, r.Allocs, r.Subtasks, float64(r.SimNs)/1e6, float64(r.CriticalPathNs)/1e6, float64(d.Stats().EntryBytes)/(1<<30), r.Digest)
	if r.Tasks != 15971 || pred != 8256 || r.Allocs != 3912 || r.Dummies != 86 {
		t.Fatalf("device tasks %d (want 15971), predicated %d (want 8256), allocs %d, dummies %d", r.Tasks, pred, r.Allocs, r.Dummies)
	}
	if ran := pred - r.Skipped; ran < pred/4 || ran > pred*3/4 {
		t.Errorf("%d of %d predicated tasks ran; want roughly half", ran, pred)
	}
	d2 := New(DefaultConfig())
	d2.RegisterEntry(entry)
	again := launch(t, d2, stages.EncodeRunImage(img))
	if again.Digest != r.Digest || again.SimNs != r.SimNs {
		t.Fatal("a second device gave another result")
	}
}

// BenchmarkSimulateDSv4Eager simulates the real 15971-task step.
func BenchmarkSimulateDSv4Eager(b *testing.B) {
	img, entry := loadReference(b)
	d := New(DefaultConfig())
	d.RegisterEntry(entry)
	benchLaunch(b, d, stages.EncodeRunImage(img))
}
