package config_test

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/config/trace"
)

const (
	modelPath = "models/dsv4_flash_decode.yaml"
	refDir    = "../tests/testdata/reference"
)

// refEvent is a reference trace line, the fields the tests compare.
type refEvent struct {
	Ev       string          `json:"ev"`
	ID       int             `json:"id"`
	Kind     string          `json:"kind"`
	K        []int           `json:"k"`
	Name     string          `json:"name"`
	Args     []refArg        `json:"args"`
	Scalars  []uint64        `json:"scalars"`
	BlockNum int             `json:"block_num"`
	Deps     []int           `json:"deps"`
	Fanin    []int           `json:"fanin"`
	Depth    int             `json:"depth"`
	Manual   int             `json:"manual"`
	Pred     *trace.PredEvent `json:"pred"`
	Graph    *trace.GraphRef  `json:"graph"`
	Key      string          `json:"key"`
	Inst     int             `json:"inst"`
	Boundary []refArg        `json:"boundary"`
	Mode     int             `json:"mode"`
	Tasks    int             `json:"tasks"`
	Edges    int             `json:"edges"`
}

type refArg struct {
	Tag   string  `json:"tag"`
	Root  string  `json:"root"`
	RKind string  `json:"rkind"`
	RID   int     `json:"rid"`
	Off   int64   `json:"off"`
	Shape []int64 `json:"shape"`
	DType string  `json:"dtype"`
	Bytes int64   `json:"bytes"`
	BSlot int     `json:"bslot"`
	MDep  int     `json:"mdep"`
}

func readTrace(t testing.TB, path string) []refEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []refEvent
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e refEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// expand runs a form through the trace writer and returns its events in the
// reference shape (by a JSON round trip, so that the writer's output format
// is what is compared).
func expand(t testing.TB, m *config.Model, form string) []refEvent {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, form+".jsonl.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	w := trace.New(zw, m.EntryRoots(), m.Kernels())
	if err := m.Run(w, form); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return readTrace(t, p)
}

func loadModel(t testing.TB) *config.Model {
	t.Helper()
	m, err := config.Load(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tasksOf(evs []refEvent) []refEvent {
	var out []refEvent
	for _, e := range evs {
		if e.Ev == "task" {
			out = append(out, e)
		}
	}
	return out
}

// rootIdentity names a root independently of RootID numbering: an entry
// root by its name, a runtime root by the task that created it.
func rootIdentities(tasks []refEvent) func(a refArg) string {
	creator := map[int]int{}
	for _, e := range tasks {
		for _, a := range e.Args {
			if a.Tag == "o" {
				creator[a.RID] = e.ID
			}
		}
	}
	return func(a refArg) string {
		if a.RKind == "ext" {
			return "ext:" + a.Root
		}
		return fmt.Sprintf("%s@task%d", a.RKind, creator[a.RID])
	}
}

func TestEagerMatchesReference(t *testing.T) {
	m := loadModel(t)
	got := tasksOf(expand(t, m, "eager"))
	want := tasksOf(readTrace(t, filepath.Join(refDir, "eager.jsonl.gz")))
	if len(got) != len(want) {
		t.Fatalf("eager: %d tasks, reference has %d", len(got), len(want))
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
	if edges != 44412 {
		t.Fatalf("%d fanin edges, want 44412", edges)
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
