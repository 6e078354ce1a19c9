package stages

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// randomDAG is n tasks in topological order, each with up to maxFanin
// distinct producers at most span tasks back.
func randomDAG(rng *rand.Rand, n, maxFanin, span int) [][]TaskID {
	g := make([][]TaskID, n)
	for i := 1; i < n; i++ {
		k := rng.IntN(maxFanin + 1)
		seen := map[TaskID]bool{}
		for j := 0; j < k; j++ {
			p := TaskID(i - 1 - rng.IntN(min(i, span)))
			if !seen[p] {
				seen[p] = true
				g[i] = append(g[i], p)
			}
		}
	}
	return g
}

// closure is every task's ancestor set, exactly.
func closure(fanin func(i int) []TaskID, n int) []*big.Int {
	anc := make([]*big.Int, n)
	for i := 0; i < n; i++ {
		a := new(big.Int)
		for _, p := range fanin(i) {
			a.Or(a, anc[p])
			a.SetBit(a, int(p), 1)
		}
		anc[i] = a
	}
	return anc
}

func csrFanin(off []uint32, idx []TaskID) func(int) []TaskID {
	return func(i int) []TaskID { return idx[off[i]:off[i+1]] }
}

// TestReduceKeepsReachabilityAndDropsEveryImpliedEdge: on random DAGs the
// reduced graph has exactly the full one's reachability, and no edge it
// keeps is implied by the others (every kept producer of a task is an
// ancestor of none of the task's other kept producers); it drops edges
// (the test would pass vacuously on a reducer that kept everything but
// for the count check). Large DAGs with edges longer than the window keep
// reachability too.
func TestReduceKeepsReachabilityAndDropsEveryImpliedEdge(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 1))
	dropped := 0
	for trial := 0; trial < 400; trial++ {
		n := 2 + rng.IntN(80)
		g := randomDAG(rng, n, 1+rng.IntN(6), 1+rng.IntN(n))
		full := func(i int) []TaskID { return g[i] }
		off, idx := ReduceCSR(n, full)
		want, got := closure(full, n), closure(csrFanin(off, idx), n)
		for i := 0; i < n; i++ {
			if want[i].Cmp(got[i]) != 0 {
				t.Fatalf("trial %d task %d: ancestors %s reduced, %s full", trial, i, got[i].Text(2), want[i].Text(2))
			}
			kept := idx[off[i]:off[i+1]]
			for _, p := range kept {
				for _, q := range kept {
					if p != q && got[q].Bit(int(p)) == 1 {
						t.Fatalf("trial %d task %d keeps %d, implied through %d", trial, i, p, q)
					}
				}
				if !contains(g[i], p) {
					t.Fatalf("trial %d task %d ships edge from %d, which it did not have", trial, i, p)
				}
			}
			dropped += len(g[i]) - len(kept)
		}
	}
	if dropped == 0 {
		t.Fatal("no edge was dropped over 400 random DAGs")
	}
	for trial := 0; trial < 3; trial++ {
		n := 3*reduceWindow + rng.IntN(500)
		g := randomDAG(rng, n, 4, 3*reduceWindow)
		full := func(i int) []TaskID { return g[i] }
		off, idx := ReduceCSR(n, full)
		want, got := closure(full, n), closure(csrFanin(off, idx), n)
		for i := 0; i < n; i++ {
			if want[i].Cmp(got[i]) != 0 {
				t.Fatalf("large trial %d task %d: reachability differs", trial, i)
			}
		}
		if len(idx) >= countEdges(g) {
			t.Fatalf("large trial %d: kept all %d edges", trial, len(idx))
		}
	}
}

func contains(s []TaskID, x TaskID) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func countEdges(g [][]TaskID) int {
	n := 0
	for _, f := range g {
		n += len(f)
	}
	return n
}

// TestShippedFaninIsReduced: the ordinary path and the recorder ship the
// reduction of what the TensorMap resolved, and keep every edge where
// the host reads them. smallBody's k2 reads the tile k1 wrote: it waits on
// k1 (TensorMap) and on the tile's alloc (creator retention), which k1
// waited on already. The run image and the Definition both drop that edge,
// and say so (Implied); SetFullEdges ships it.
func TestShippedFaninIsReduced(t *testing.T) {
	entry := []Root{
		{Name: "x", Kind: RootEntry, DType: FP32, Shape: []int64{4, 8}, Elems: 32},
		{Name: "y", Kind: RootEntryOutput, DType: FP32, Shape: []int64{4, 8}, Elems: 32},
	}
	for _, full := range []bool{false, true} {
		o := NewOrdinaryPath(entry)
		o.SetFullEdges(full)
		o.Reset()
		if err := smallBody(o, smallCall(0, 1).NewBoundary()); err != nil {
			t.Fatal(err)
		}
		if f := o.Fanin(2); len(f) != 2 {
			t.Fatalf("full=%v: k2's fanin %v, want the alloc and k1 (the TensorMap's set)", full, f)
		}
		img, err := DecodeRunImage(EncodeRunImage(o.Image()))
		if err != nil {
			t.Fatal(err)
		}
		k2 := img.Tasks[2]
		got := img.Fanin[k2.Fanin.Off : k2.Fanin.Off+k2.Fanin.N]
		rec, shipped := img.EdgeCounts()
		switch {
		case !full && (len(got) != 1 || got[0] != 1 || k2.Implied != 1 || rec != 3 || shipped != 2):
			t.Errorf("reduced run image: k2 ships %v (implied %d), edges %d recorded %d shipped; want [1] (1), 3, 2", got, k2.Implied, rec, shipped)
		case full && (len(got) != 2 || k2.Implied != 0 || rec != 3 || shipped != 3):
			t.Errorf("full run image: k2 ships %v (implied %d), edges %d recorded %d shipped; want both, 3, 3", got, k2.Implied, rec, shipped)
		}

		var r Recorder
		r.SetFullEdges(full)
		call := smallCall(0, 1)
		if err := r.RecordBody(call.Key, 1, call.Boundary, o.BoundaryRoots(call.Boundary), call.Scalars, nil, call.Body); err != nil {
			t.Fatal(err)
		}
		d, err := DecodeDefinition(r.Publish().Image)
		if err != nil {
			t.Fatal(err)
		}
		n2 := d.Nodes[2]
		got32 := d.Fanin[n2.Fanin.Off : n2.Fanin.Off+n2.Fanin.N]
		switch {
		case !full && (len(got32) != 1 || got32[0] != 1 || n2.Implied != 1):
			t.Errorf("reduced Definition: node 2 ships %v (implied %d), want [1] (1)", got32, n2.Implied)
		case full && (len(got32) != 2 || n2.Implied != 0):
			t.Errorf("full Definition: node 2 ships %v (implied %d), want both (0)", got32, n2.Implied)
		}
	}
}

// BenchmarkReduceEager is the reduction alone over DSv4 eager's 15971
// tasks and 44412 TensorMap edges, as the ordinary path runs it on a pass
// (ns/task).
func BenchmarkReduceEager(b *testing.B) {
	evs := loadRef(b, "eager.jsonl.gz")
	entry, seq := buildReplay(b, evs)
	o := NewOrdinaryPath(entry)
	o.SetFullEdges(true)
	for _, f := range seq {
		f(o)
	}
	fanins := make([][]TaskID, o.NumTasks())
	for i := range fanins {
		fanins[i] = append([]TaskID(nil), o.Fanin(TaskID(i))...)
	}
	var r edgeReducer
	var out []TaskID
	kept := 0
	b.ReportAllocs()
	for b.Loop() {
		r.reset()
		kept = 0
		for _, f := range fanins {
			out = r.add(f, out[:0])
			kept += len(out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(fanins)), "ns/task")
	b.ReportMetric(float64(kept), "shipped")
}
