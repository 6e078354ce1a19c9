package stages

import (
	"slices"
	"testing"
)

// fuzzDAG reads a DAG in topological order from in: in[0]&7 is how many
// producer-free tasks follow each described one (so a short input reaches
// past reduceWindow); then per task a byte c (c&7 producers; c&8: each
// distance is 64 times its byte, far beyond the window) and a byte per
// producer, its distance back less one (clamped to the task's index).
func fuzzDAG(in []byte) [][]TaskID {
	if len(in) == 0 {
		return nil
	}
	fill := int(in[0] & 7)
	in = in[1:]
	g := [][]TaskID{nil}
	for len(in) > 0 && len(g) < 8*reduceWindow {
		c := in[0]
		in = in[1:]
		i := len(g)
		var f []TaskID
		for k := 0; k < int(c&7) && len(in) > 0; k++ {
			d := int(in[0]) + 1
			in = in[1:]
			if c&8 != 0 {
				d *= 64
			}
			p := TaskID(i - min(d, i))
			if !slices.Contains(f, p) {
				f = append(f, p)
			}
		}
		g = append(g, f)
		for range fill {
			g = append(g, nil)
		}
	}
	return g
}

// FuzzReduce: on any DAG, the reduction keeps reachability exactly, ships
// only edges the DAG had, keeps each edge within the window that no other
// kept producer implies, and a Definition reduced in place ships the same
// edges and counts the rest as Implied.
func FuzzReduce(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 0, 1, 3, 0, 1, 2})
	f.Add([]byte{7, 0, 9, 3, 10, 2, 0, 11, 1, 2, 3, 14, 0, 0, 0, 0})
	f.Add([]byte{3, 7, 0, 1, 2, 3, 4, 5, 6, 15, 16, 17, 18, 19, 20, 21, 22, 7, 1, 2, 3, 4, 5, 6, 7})
	f.Fuzz(func(t *testing.T, in []byte) {
		g := fuzzDAG(in)
		n := len(g)
		full := func(i int) []TaskID { return g[i] }
		off, idx := ReduceCSR(n, full)
		want, got := closure(full, n), closure(csrFanin(off, idx), n)
		for i := 0; i < n; i++ {
			if want[i].Cmp(got[i]) != 0 {
				t.Fatalf("task %d: ancestors differ after reduction (fanin %v, kept %v)", i, g[i], idx[off[i]:off[i+1]])
			}
			kept := idx[off[i]:off[i+1]]
			for _, p := range kept {
				if !slices.Contains(g[i], p) {
					t.Fatalf("task %d ships edge from %d, which it did not have", i, p)
				}
				if i-int(p) >= reduceWindow {
					continue
				}
				for _, q := range kept {
					if p != q && got[q].Bit(int(p)) == 1 {
						t.Fatalf("task %d keeps %d, implied through %d", i, p, q)
					}
				}
			}
			for _, p := range g[i] {
				if !slices.Contains(kept, p) && i-int(p) >= reduceWindow {
					t.Fatalf("task %d drops edge from %d, beyond the window", i, p)
				}
			}
		}
		if n > 1024 {
			return // a Definition holds at most GRAPH_MAX_NODES nodes
		}
		d := &Definition{Nodes: make([]NodeDesc, n)}
		for i, fi := range g {
			d.Nodes[i].Fanin = Span{Off: uint32(len(d.Fanin)), N: uint32(len(fi))}
			for _, p := range fi {
				d.Fanin = append(d.Fanin, uint32(p))
			}
		}
		ReduceDefinition(d)
		for i := range d.Nodes {
			nd := d.Nodes[i]
			var ship []TaskID
			for _, p := range d.Fanin[nd.Fanin.Off : nd.Fanin.Off+nd.Fanin.N] {
				ship = append(ship, TaskID(p))
			}
			if !slices.Equal(ship, idx[off[i]:off[i+1]]) || int(nd.Implied) != len(g[i])-len(ship) {
				t.Fatalf("Definition node %d ships %v (implied %d), ReduceCSR %v of %v", i, ship, nd.Implied, idx[off[i]:off[i+1]], g[i])
			}
		}
	})
}
