package config_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
	"github.com/hbg-dev/hbg/internal/refwriter"
)

const (
	modelPath = "models/dsv4_flash_decode.yaml"
	refDir    = "../tests/testdata/reference"
)

// refEvent and refArg are the reference trace's lines and arguments.
type (
	refEvent = reftrace.Line
	refArg   = reftrace.Arg
)

// readTrace reads a reference trace, once per test binary: several tests
// compare against one (Qwen3's Graph trace is both forms' reference), and
// reading one is seconds under -race. The events are only read.
func readTrace(t testing.TB, path string) []refEvent {
	t.Helper()
	return sharedEvents(t, "trace "+path, func() ([]refEvent, error) { return reftrace.Load(path) })
}

// expand runs a form through the trace writer and returns its events in the
// reference shape (by a JSON round trip, so that the writer's output format
// is what is compared).
func expand(t testing.TB, m *config.Model, form string) []refEvent {
	t.Helper()
	evs, err := expansion(m, form)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// expandFile is expand of the model file at path, once per test binary
// and form: the DSv4 and Qwen3 forms are each compared by more than one
// test (the full form against the reference and for its published
// counts), and an expansion is seconds under -race.
func expandFile(t testing.TB, path, form string) []refEvent {
	t.Helper()
	return sharedEvents(t, "expand "+path+" "+form, func() ([]refEvent, error) {
		m, err := config.Load(path)
		if err != nil {
			return nil, err
		}
		return expansion(m, form)
	})
}

func expansion(m *config.Model, form string) ([]refEvent, error) {
	var buf bytes.Buffer
	w := refwriter.New(&buf, m.EntryRoots(), m.Kernels())
	if err := m.Run(w, form); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return reftrace.Read(&buf)
}

var shared struct {
	mu   sync.Mutex
	vals map[string]*sharedVal
}

type sharedVal struct {
	once sync.Once
	evs  []refEvent
	err  error
}

// sharedEvents computes the events named key once per test binary.
func sharedEvents(t testing.TB, key string, f func() ([]refEvent, error)) []refEvent {
	t.Helper()
	shared.mu.Lock()
	if shared.vals == nil {
		shared.vals = map[string]*sharedVal{}
	}
	v := shared.vals[key]
	if v == nil {
		v = &sharedVal{}
		shared.vals[key] = v
	}
	shared.mu.Unlock()
	v.once.Do(func() { v.evs, v.err = f() })
	if v.err != nil {
		t.Fatalf("%s: %v", key, v.err)
	}
	return v.evs
}

func loadModel(t testing.TB) *config.Model { t.Helper(); return mustLoad(t, modelPath) }

// mustLoad loads a model file or fails the test.
func mustLoad(t testing.TB, path string) *config.Model {
	t.Helper()
	m, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rootIdentity names a root independently of RootID numbering: an entry
// root by its name, a runtime root by the task that created it and its
// position among that task's outputs (one alloc may create two roots of one
// name: Qwen3's next_hidden pair).
func rootIdentities(tasks []refEvent) func(a refArg) string {
	type birth struct{ task, pos int }
	creator := map[int]birth{}
	for _, e := range tasks {
		pos := 0
		for _, a := range e.Args {
			if a.Tag == "o" {
				creator[a.RID] = birth{e.ID, pos}
				pos++
			}
		}
	}
	return func(a refArg) string {
		if a.RKind == "ext" {
			return "ext:" + a.Root
		}
		b, ok := creator[a.RID]
		if !ok {
			return fmt.Sprintf("%s:unborn%d", a.RKind, a.RID)
		}
		return fmt.Sprintf("%s@task%d#%d", a.RKind, b.task, b.pos)
	}
}

// TestEagerMatchesReference expands the eager form and compares it with the
// reference eager trace task by task, fanin included. Every one of the 44412
// reference edges is reproduced by stages.OrdinaryPath's TensorMap, and no other: on
// this trace the reference and the rule of workloads.md §6 do not disagree.
func TestEagerMatchesReference(t *testing.T) {
	gotEv := expandFile(t, modelPath, "eager")
	wantEv := readTrace(t, filepath.Join(refDir, "eager.jsonl.gz"))
	compareTasks(t, reftrace.Tasks(gotEv), reftrace.Tasks(wantEv), 44412)
	compareEvents(t, gotEv, wantEv)
}

// compareEvents compares the sequence of events: scopes (mode, depth), Graph
// begin/end, host reads and the position of every task among them.
func compareEvents(t *testing.T, got, want []refEvent) {
	t.Helper()
	sig := func(evs []refEvent) []string {
		var out []string
		for _, e := range evs {
			switch e.Ev {
			case "task":
				out = append(out, "task")
			case "scope_begin":
				out = append(out, fmt.Sprintf("scope_begin mode=%d depth=%d", e.Mode, e.Depth))
			case "scope_end":
				out = append(out, fmt.Sprintf("scope_end depth=%d", e.Depth))
			case "graph_begin", "graph_end":
				out = append(out, fmt.Sprintf("%s %s#%d", e.Ev, e.Key, e.Inst))
			case "get_tensor_data":
				out = append(out, "get_tensor_data")
			}
		}
		return out
	}
	g, w := sig(got), sig(want)
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			t.Fatalf("event %d: %s, want %s", i, g[i], w[i])
		}
	}
	if len(g) != len(w) {
		t.Fatalf("%d events, want %d", len(g), len(w))
	}
}

// TestFullMatchesReference compares the full form with the reference Graph
// trace (HEAD, 8 Definitions): every task (15972: layer 42's call site
// allocates its own buffers), the Graph each task belongs to, and every
// Graph call with its key and boundary.
func TestFullMatchesReference(t *testing.T) {
	gotEv := expandFile(t, modelPath, "full")
	wantEv := readTrace(t, filepath.Join(refDir, "graph.jsonl.gz"))
	got, want := reftrace.Tasks(gotEv), reftrace.Tasks(wantEv)
	compareTasks(t, got, want, 44413)
	compareEvents(t, gotEv, wantEv)
	compareGraphCalls(t, gotEv, wantEv, 86, 8)
	ordinary := 0
	for i := range want {
		if got[i].Graph == nil {
			ordinary++
		}
		for j := range want[i].Args {
			if j < len(got[i].Args) && got[i].Args[j].BSlot != want[i].Args[j].BSlot {
				t.Errorf("task %d arg %d: boundary slot %d, want %d", i, j, got[i].Args[j].BSlot, want[i].Args[j].BSlot)
			}
		}
	}
	if ordinary != 43 {
		t.Errorf("%d ordinary tasks, want 43", ordinary)
	}
}

// compareGraphCalls checks every Graph call (key, instance, Definition,
// boundary slot by slot, scalars), the number of distinct keys, and that
// every task belongs to the same Graph call as the reference's.
func compareGraphCalls(t *testing.T, gotEv, wantEv []refEvent, calls, nkeys int) {
	t.Helper()
	got, want := reftrace.Tasks(gotEv), reftrace.Tasks(wantEv)
	gid, wid := rootIdentities(got), rootIdentities(want)
	gg, wg := graphCalls(gotEv), graphCalls(wantEv)
	if len(gg) != calls || len(wg) != calls {
		t.Fatalf("%d Graph calls, reference %d, want %d", len(gg), len(wg), calls)
	}
	keys := map[string]bool{}
	for i := range wg {
		g, w := gg[i], wg[i]
		keys[g.Key] = true
		if g.Key != w.Key || g.Inst != w.Inst || g.Def != w.Def {
			t.Fatalf("Graph call %d: %s key %s#%d, want %s key %s#%d", i, g.Def, g.Key, g.Inst, w.Def, w.Key, w.Inst)
		}
		if len(g.Boundary) != len(w.Boundary) {
			t.Fatalf("Graph call %d (%s): %d boundary slots, want %d", i, w.Key, len(g.Boundary), len(w.Boundary))
		}
		for s := range w.Boundary {
			ga, wa := g.Boundary[s], w.Boundary[s]
			if ga.Tag != wa.Tag || gid(ga) != wid(wa) || ga.Off != wa.Off || !reflect.DeepEqual(ga.Shape, wa.Shape) || ga.DType != wa.DType {
				t.Errorf("Graph call %d (%s) slot %d: got %s %s off=%d %v %s, want %s %s off=%d %v %s", i, w.Key, s,
					ga.Tag, gid(ga), ga.Off, ga.Shape, ga.DType, wa.Tag, wid(wa), wa.Off, wa.Shape, wa.DType)
			}
		}
		if !reflect.DeepEqual(nz(g.Scalars), nz(w.Scalars)) {
			t.Errorf("Graph call %d (%s): scalars %v, want %v", i, w.Key, g.Scalars, w.Scalars)
		}
	}
	if len(keys) != nkeys {
		t.Errorf("%d distinct keys, want %d", len(keys), nkeys)
	}
	for i := range want {
		if (got[i].Graph == nil) != (want[i].Graph == nil) || got[i].Graph != nil && *got[i].Graph != *want[i].Graph {
			t.Fatalf("task %d: graph %+v, want %+v", i, got[i].Graph, want[i].Graph)
		}
	}
}

func graphCalls(evs []refEvent) []refEvent { return reftrace.Events(evs, "graph_begin") }

func compareTasks(t *testing.T, got, want []refEvent, wantEdges int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d tasks, reference has %d", len(got), len(want))
	}
	gid, wid := rootIdentities(got), rootIdentities(want)
	edges, bad := 0, 0
	report := func(i int, format string, a ...any) {
		bad++
		if bad <= 20 {
			t.Errorf("task %d (%s): %s", i, want[i].Name, fmt.Sprintf(format, a...))
		}
	}
	for i := range want {
		g, w := &got[i], &want[i]
		if g.Kind != w.Kind || g.Name != w.Name || !reflect.DeepEqual(g.K, w.K) || g.BlockNum != w.BlockNum {
			report(i, "got %s %s k=%v bn=%d, want %s %s k=%v bn=%d", g.Kind, g.Name, g.K, g.BlockNum, w.Kind, w.Name, w.K, w.BlockNum)
			continue
		}
		if g.Early != w.Early || g.Sync != w.Sync {
			report(i, "launch flags early=%d sync_start=%d, want early=%d sync_start=%d", g.Early, g.Sync, w.Early, w.Sync)
		}
		if g.Depth != w.Depth || g.Manual != w.Manual {
			report(i, "depth/manual %d/%d, want %d/%d", g.Depth, g.Manual, w.Depth, w.Manual)
		}
		if len(g.Args) != len(w.Args) {
			report(i, "%d args, want %d", len(g.Args), len(w.Args))
			continue
		}
		for j := range w.Args {
			ga, wa := g.Args[j], w.Args[j]
			if ga.Tag != wa.Tag || gid(ga) != wid(wa) || ga.Off != wa.Off || !reflect.DeepEqual(ga.Shape, wa.Shape) || ga.DType != wa.DType || ga.Bytes != wa.Bytes || ga.MDep != wa.MDep {
				report(i, "arg %d: got %s %s off=%d %v %s %dB mdep=%d, want %s %s off=%d %v %s %dB mdep=%d", j,
					ga.Tag, gid(ga), ga.Off, ga.Shape, ga.DType, ga.Bytes, ga.MDep, wa.Tag, wid(wa), wa.Off, wa.Shape, wa.DType, wa.Bytes, wa.MDep)
			}
			if wa.RKind == "ext" && ga.RID != wa.RID {
				report(i, "arg %d: entry root %s has RootID %d, want %d", j, wa.Root, ga.RID, wa.RID)
			}
		}
		if !reflect.DeepEqual(nz(g.Scalars), nz(w.Scalars)) {
			report(i, "scalars %v, want %v", g.Scalars, w.Scalars)
		}
		if !reflect.DeepEqual(nzi(g.Deps), nzi(w.Deps)) {
			report(i, "deps %v, want %v", g.Deps, w.Deps)
		}
		if (g.Pred == nil) != (w.Pred == nil) || g.Pred != nil && (!reflect.DeepEqual(g.Pred.Idx, w.Pred.Idx) || g.Pred.Op != w.Pred.Op || g.Pred.Target != w.Pred.Target) {
			report(i, "pred %+v, want %+v", g.Pred, w.Pred)
		}
		gf, wf := sorted(g.Fanin), sorted(w.Fanin)
		if !reflect.DeepEqual(gf, wf) {
			report(i, "fanin %v, want %v", gf, wf)
		}
		edges += len(gf)
	}
	if bad > 0 {
		t.Fatalf("%d mismatches", bad)
	}
	if edges != wantEdges {
		t.Fatalf("%d fanin edges, want %d", edges, wantEdges)
	}
}

func nz(s []uint64) []uint64 {
	if len(s) == 0 {
		return nil
	}
	return s
}

func nzi(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return s
}

func sorted(s []int) []int {
	out := append([]int(nil), s...)
	sort.Ints(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// TestPairAndBlocksForms checks the published figures of the two other Graph
// forms (reference README, "Figures these traces pin down").
func TestPairAndBlocksForms(t *testing.T) {
	for _, tc := range []struct {
		form                    string
		calls, hostSubmits      int
		bodyTasks, boundaryTens int // checked when non-zero (every call)
		tasks                   int
	}{
		{form: "pair", calls: 20, hostSubmits: 1131, bodyTasks: 743, boundaryTens: 118, tasks: 15971},
		{form: "blocks", calls: 82, hostSubmits: 835, tasks: 15972},
		{form: "full", calls: 86, hostSubmits: 129, tasks: 15972},
	} {
		t.Run(tc.form, func(t *testing.T) {
			evs := expandFile(t, modelPath, tc.form)
			calls, ordinary, tasks := 0, 0, 0
			for _, e := range evs {
				switch e.Ev {
				case "graph_begin":
					calls++
					if tc.boundaryTens > 0 && len(e.Boundary) != tc.boundaryTens {
						t.Errorf("call %s#%d: %d boundary tensors, want %d", e.Key, e.Inst, len(e.Boundary), tc.boundaryTens)
					}
				case "task":
					tasks++
					if e.Graph == nil {
						ordinary++
					}
				}
			}
			if calls != tc.calls || ordinary+calls != tc.hostSubmits || tasks != tc.tasks {
				t.Fatalf("%d Graph calls, %d host submissions, %d device tasks; want %d, %d, %d", calls, ordinary+calls, tasks, tc.calls, tc.hostSubmits, tc.tasks)
			}
			if tc.bodyTasks > 0 {
				per := map[string]int{}
				for _, e := range evs {
					if e.Ev == "task" && e.Graph != nil {
						per[fmt.Sprintf("%s#%d", e.Graph.Key, e.Graph.Inst)]++
					}
				}
				for k, n := range per {
					if n != tc.bodyTasks {
						t.Errorf("%s: %d body tasks, want %d", k, n, tc.bodyTasks)
					}
				}
			}
		})
	}
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEntryTensorsMatchReference: the model's entry tensors are the reference
// rank's, in order (they are RootIDs 0..91), and its entry scalars and host
// read value are the fixture's.
func TestEntryTensorsMatchReference(t *testing.T) {
	m := loadModel(t)
	roots := m.EntryRoots()
	var tensors, scalars []string
	for _, line := range strings.Split(readFile(t, filepath.Join(refDir, "entry_tensors.txt")), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 2 && f[0] == "tensor":
			tensors = append(tensors, strings.Join(f[1:], " "))
		case len(f) == 2 && f[0] == "scalar":
			scalars = append(scalars, f[1])
		}
	}
	if len(roots) != len(tensors) {
		t.Fatalf("%d entry tensors, want %d", len(roots), len(tensors))
	}
	for i, r := range roots {
		got := r.Name + " " + r.DType.String()
		for _, d := range r.Shape {
			got += fmt.Sprintf(" %d", d)
		}
		if got != tensors[i] {
			t.Errorf("entry tensor %d: %q, want %q", i, got, tensors[i])
		}
	}
	src := readFile(t, modelPath)
	for i, v := range scalars {
		name := "rank"
		if i > 0 {
			name = fmt.Sprintf("ctx%d", i-1)
		}
		if !strings.Contains(src, fmt.Sprintf("{name: %s, value: %s}", name, v)) {
			t.Errorf("entry scalar %d (%s) is not %s", i, name, v)
		}
	}
	if !strings.Contains(src, "{name: num_tokens_per_owner, dtype: int32, shape: [2], role: metadata, value: 8}") {
		t.Error("num_tokens_per_owner does not read 8")
	}
}
