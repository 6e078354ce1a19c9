package stages

import (
	"slices"
	"testing"

	"github.com/hbg-dev/hbg/internal/reftrace"
)

type refEvent = reftrace.Line

func loadRef(t testing.TB, name string) []refEvent {
	t.Helper()
	evs, err := reftrace.Load("../tests/testdata/reference/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// buildReplay turns a reference trace into submissions through OrdinaryPath, mapping
// the trace's roots onto ours. It is the TensorMap's ground truth,
// independent of the model config.
func buildReplay(t testing.TB, evs []refEvent) (entry []Root, seq []func(o *OrdinaryPath)) {
	t.Helper()
	ids := map[[2]any]RootID{}
	alloc := map[int]RootID{} // created roots (alloc tasks, output args) by rid
	created := map[int]bool{}
	for _, e := range evs {
		for _, a := range e.Args {
			if a.Tag == "o" {
				created[a.RID] = true
			}
		}
	}
	for _, e := range evs {
		for _, a := range e.Args {
			if a.RKind == "alloc" || created[a.RID] {
				continue
			}
			k := [2]any{a.RKind, a.RID}
			if _, ok := ids[k]; !ok {
				dt, err := ParseDType(a.DType)
				if err != nil {
					t.Fatal(err)
				}
				ids[k] = RootID(len(entry))
				kind := RootEntry
				if a.RKind == "out" {
					kind = RootEntryOutput
				}
				// The reference does not give entry root sizes; the
				// dependency rule only needs the interval of each view.
				entry = append(entry, Root{Name: a.Root, Kind: kind, DType: dt, Creator: NoTask, ManualDep: a.MDep == 1})
			}
		}
	}
	toArgs := func(ras []reftrace.Arg) []Arg {
		args := make([]Arg, len(ras))
		for i, a := range ras {
			tag, err := ParseTag(a.Tag)
			if err != nil {
				t.Fatal(err)
			}
			dt, _ := ParseDType(a.DType)
			var r RootID
			if a.RKind == "alloc" || created[a.RID] {
				r = alloc[a.RID]
			} else {
				r = ids[[2]any{a.RKind, a.RID}]
			}
			args[i] = Arg{Tag: tag, View: NewView(r, a.Off, dt, a.Shape...)}
		}
		return args
	}
	for _, e := range evs {
		e := e
		switch e.Ev {
		case "scope_begin":
			mode := ScopeAuto
			if e.Mode == 1 {
				mode = ScopeManual
			}
			seq = append(seq, func(o *OrdinaryPath) { o.ScopeBegin(mode) })
		case "scope_end":
			seq = append(seq, func(o *OrdinaryPath) { o.ScopeEnd() })
		case "task":
			if e.Kind == "alloc" {
				specs := make([]RootSpec, len(e.Args))
				for i, a := range e.Args {
					dt, _ := ParseDType(a.DType)
					specs[i] = RootSpec{Name: a.Root, DType: dt, Shape: a.Shape, ManualDep: a.MDep == 1}
				}
				rids := make([]int, len(e.Args))
				for i, a := range e.Args {
					rids[i] = a.RID
				}
				seq = append(seq, func(o *OrdinaryPath) {
					_, first := o.Alloc(specs)
					for i, rid := range rids {
						alloc[rid] = first + RootID(i)
					}
				})
				continue
			}
			kind, err := ParseKind(e.Kind)
			if err != nil {
				t.Fatal(err)
			}
			deps := make([]TaskID, len(e.Deps))
			for i, d := range e.Deps {
				deps[i] = TaskID(d)
			}
			task := Task{Kind: kind, Kernel: [3]KernelID{KernelID(e.K[0]), KernelID(e.K[1]), KernelID(e.K[2])}, BlockNum: int32(e.BlockNum), Deps: deps}
			for _, s := range e.Scalars {
				task.Scalars = append(task.Scalars, Static(s))
			}
			ras := e.Args
			seq = append(seq, func(o *OrdinaryPath) {
				tk := task
				tk.Args = toArgs(ras)
				id := o.Submit(&tk)
				img := o.Image()
				for i, a := range ras {
					if a.Tag == "o" {
						alloc[a.RID] = img.Args[img.Tasks[id].Args.Off+uint32(i)].View.Root
					}
				}
			})
		}
	}
	return entry, seq
}

// TestOrchReproducesReferenceFanin runs the reference eager trace through our
// TensorMap and compares every fanin edge.
func TestOrchReproducesReferenceFanin(t *testing.T) {
	evs := loadRef(t, "eager.jsonl.gz")
	entry, seq := buildReplay(t, evs)
	o := NewOrdinaryPath(entry)
	for _, f := range seq {
		f(o)
	}
	var want [][]int
	for _, e := range evs {
		if e.Ev == "task" {
			want = append(want, e.Fanin)
		}
	}
	if o.NumTasks() != len(want) || len(want) != 15971 {
		t.Fatalf("tasks: got %d, reference %d (want 15971)", o.NumTasks(), len(want))
	}
	edges := 0
	for id, w := range want {
		got := o.Fanin(TaskID(id))
		g := make([]int, len(got))
		for i, p := range got {
			g[i] = int(p)
		}
		slices.Sort(g)
		w = slices.Clone(w)
		slices.Sort(w)
		if !slices.Equal(g, w) {
			t.Fatalf("task %d fanin: got %v, reference %v", id, g, w)
		}
		edges += len(g)
	}
	if edges != 44412 {
		t.Fatalf("edges: got %d, want 44412", edges)
	}
}

// capturingOrch records the calls a replay makes, with the roots already
// resolved, so a benchmark can replay them with no conversion cost.
type capturedOp struct {
	scope   int // 1 begin auto, 2 begin manual, 3 end
	specs   []RootSpec
	task    *Task
	isAlloc bool
}

func captureEager(b testing.TB) ([]Root, []capturedOp) {
	evs := loadRef(b, "eager.jsonl.gz")
	entry, seq := buildReplay(b, evs)
	o := NewOrdinaryPath(entry)
	var ops []capturedOp
	for _, f := range seq {
		nt, depth := o.NumTasks(), o.ScopeDepth()
		f(o)
		switch {
		case o.NumTasks() > nt:
			img := o.Image()
			td := img.Tasks[nt]
			if td.Kind == KindAlloc {
				var specs []RootSpec
				for _, a := range img.Args[td.Args.Off : td.Args.Off+td.Args.N] {
					r := o.Root(a.View.Root)
					specs = append(specs, RootSpec{Name: r.Name, DType: r.DType, Shape: r.Shape, ManualDep: r.ManualDep})
				}
				ops = append(ops, capturedOp{specs: specs, isAlloc: true})
				continue
			}
			tk := &Task{Kind: td.Kind, Kernel: td.Kernel, BlockNum: td.BlockNum, Pred: td.Pred}
			tk.Args = slices.Clone(img.Args[td.Args.Off : td.Args.Off+td.Args.N])
			for _, v := range img.Scalars[td.Scalars.Off : td.Scalars.Off+td.Scalars.N] {
				tk.Scalars = append(tk.Scalars, Static(v))
			}
			ops = append(ops, capturedOp{task: tk})
		case o.ScopeDepth() > depth:
			ops = append(ops, capturedOp{scope: 1 + int(o.scopes.modes[depth])})
		default:
			ops = append(ops, capturedOp{scope: 3})
		}
	}
	// Explicit deps are not in the image: take them from the trace.
	i := 0
	for _, e := range evs {
		if e.Ev != "task" {
			continue
		}
		for ; ops[i].task == nil && !ops[i].isAlloc; i++ {
		}
		if ops[i].task != nil {
			for _, d := range e.Deps {
				ops[i].task.Deps = append(ops[i].task.Deps, TaskID(d))
			}
		}
		i++
	}
	return entry, ops
}

func replayCaptured(o *OrdinaryPath, ops []capturedOp) {
	for i := range ops {
		op := &ops[i]
		switch {
		case op.isAlloc:
			o.Alloc(op.specs)
		case op.task != nil:
			o.Submit(op.task)
		case op.scope == 1:
			o.ScopeBegin(ScopeAuto)
		case op.scope == 2:
			o.ScopeBegin(ScopeManual)
		default:
			o.ScopeEnd()
		}
	}
}

// BenchmarkSubmitEager is the ordinary submit path over the DSv4 eager
// sequence (15971 tasks): ns and allocations per task are reported as
// ns/task and allocs/task.
func BenchmarkSubmitEager(b *testing.B) {
	entry, ops := captureEager(b)
	o := NewOrdinaryPath(entry)
	replayCaptured(o, ops) // warm the buffers
	if o.NumTasks() != 15971 {
		b.Fatalf("tasks %d", o.NumTasks())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		o.Reset()
		replayCaptured(o, ops)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/15971, "ns/task")
}
