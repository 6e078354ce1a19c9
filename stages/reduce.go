package stages

// Transitive reduction of the fanin the host ships.
//
// The TensorMap gives a task an edge to every producer whose region it
// overlaps (upstream's dependency rule), and many of those edges are
// implied by others: a task that reads a tile and its alloc gets an edge to
// both, while the tile's writer already waited on the alloc. Upstream's
// device resolves every edge it is given at completion time; hbg has the
// whole DAG on the host, so it ships only the edges no other path implies,
// which keeps reachability (the happens-before every digest and the race
// detector stand on) and drops the rest.
//
// The reduction is one pass in topological order (submission order for the
// run image, record order for a Definition), a task at a time, so the
// ordinary path reduces each task as it is submitted: a task's ancestors
// are its producers' ancestors and the producers themselves, kept as a
// bitset over the reduceWindow-1 tasks before it (shifted by each
// producer's distance, as npu/race.go's happens-before). A producer is
// implied exactly when it is an ancestor of another producer of the same
// task (never its own: the graph is acyclic), so one union of the
// producers' ancestors decides every edge of the task, in no particular
// order. O(edges × reduceWindow/64) words, fewer in a short run. A
// producer as far back as the window or farther is kept, implied or not:
// its ancestry is outside what the bitsets hold (DSv4 eager: 567 of the
// 20193 implied edges; a Definition, at most GRAPH_MAX_NODES = 1024 nodes,
// always fits, so its reduction is exact).

// reduceWindow is how many tasks back a task's ancestor bitset reaches.
const (
	reduceWindow = 1024
	reduceWords  = reduceWindow / 64
)

// edgeReducer reduces one DAG's fanin a task at a time, in topological
// order. Its storage is reused across reset.
type edgeReducer struct {
	anc [][reduceWords]uint64 // ring: anc[t%reduceWindow] is task t's ancestors at distances 1..reduceWindow-1
	// ancN is how many words of each ring slot are in use, the rest being
	// zero (a task clears what the slot's last task used past its own):
	// task t's ancestors are at most t back, so a short run (a warm Graph
	// pass ships 129 tasks) touches a few words a task, not all of them.
	ancN []uint8
	next int // the next task's index
	nw   int // words of acc in use for the task being added
	// acc is the ring slot of the task being added, built in place: a
	// producer is less than reduceWindow back, so never in the same slot.
	acc *[reduceWords]uint64
	// in and out are a Definition's node fanin as task indices, and what
	// the reduction keeps of it (reduceDefinition's scratch).
	in, out []TaskID
}

func (r *edgeReducer) reset() {
	r.next = 0
	if r.anc == nil {
		r.anc = make([][reduceWords]uint64, reduceWindow)
		r.ancN = make([]uint8, reduceWindow)
	}
}

// add reduces the fanin of the next task (producers are earlier task
// indices, deduplicated, any order) and appends the producers it keeps to
// out, in fanin's order. A producer is implied exactly when it is an
// ancestor of another producer (never of itself: the graph is acyclic), so
// the union of the producers' ancestors, taken in any order, decides every
// edge at once; then the producers join it.
func (r *edgeReducer) add(fanin []TaskID, out []TaskID) []TaskID {
	if r.anc == nil {
		r.reset()
	}
	t := r.next
	r.next++
	r.nw = min(reduceWords, (t+63)/64)
	slot := t % reduceWindow
	r.acc = &r.anc[slot]
	clear(r.acc[:max(r.nw, int(r.ancN[slot]))])
	r.ancN[slot] = uint8(r.nw)
	switch n := len(fanin); {
	case n == 1:
		r.absorb(t, int(fanin[0]))
		r.mark(t, int(fanin[0]))
		return append(out, fanin[0])
	case n <= smallFanin:
		return r.addSmall(t, fanin, out)
	}
	for _, p := range fanin {
		r.absorb(t, int(p))
	}
	for _, p := range fanin {
		if d := t - int(p); d >= reduceWindow || !r.has(d) {
			out = append(out, p)
		}
	}
	for _, p := range fanin {
		r.mark(t, int(p))
	}
	return out
}

// smallFanin is the fanin up to which add takes the producers latest
// first: an implied producer's ancestors are then in acc already, and its
// shift is skipped (most of a step's tasks have a few producers, and about
// half of the edges are implied); past it the sort would cost more.
const smallFanin = 8

// addSmall is add for 2..smallFanin producers: latest first, each
// checked against the ancestors of the later ones (only a later task can
// have an earlier one as ancestor), and only the kept ones absorbed.
func (r *edgeReducer) addSmall(t int, fanin []TaskID, out []TaskID) []TaskID {
	var o [smallFanin]TaskID
	n := copy(o[:], fanin)
	for i := 1; i < n; i++ {
		for j := i; j > 0 && o[j] > o[j-1]; j-- {
			o[j], o[j-1] = o[j-1], o[j]
		}
	}
	var implied uint16 // bit i: o[i] is implied
	for i, p := range o[:n] {
		if d := t - int(p); d < reduceWindow && r.has(d) {
			implied |= 1 << i
			continue
		}
		r.absorb(t, int(p))
		r.mark(t, int(p))
	}
	for _, p := range fanin {
		i := 0
		for o[i] != p {
			i++
		}
		if implied&(1<<i) == 0 {
			out = append(out, p)
		}
	}
	return out
}

// has reports whether the task d back is in acc.
func (r *edgeReducer) has(d int) bool {
	d--
	return r.acc[d>>6]&(1<<(d&63)) != 0
}

// mark adds producer p of task t to acc.
func (r *edgeReducer) mark(t, p int) {
	if d := t - p; d > 0 && d < reduceWindow {
		b := d - 1
		r.acc[b>>6] |= 1 << (b & 63)
	}
}

// absorb adds producer p's ancestors to task t's, acc.
func (r *edgeReducer) absorb(t, p int) {
	d := t - p
	if d >= reduceWindow || d <= 0 {
		return
	}
	src := &r.anc[p%reduceWindow]
	sn := int(r.ancN[p%reduceWindow])
	// acc bit (d+e-1) |= src bit (e-1): a shift left by d bits, over the
	// words either holds (src's past sn are zero; a shift by 64 or more
	// gives 0 in Go, so bs = 0 needs no case of its own).
	ws, bs := d>>6, uint(d&63)
	hi := min(r.nw, sn+ws+1)
	if ws >= hi {
		return
	}
	acc := r.acc
	acc[ws] |= src[0] << bs
	for i := ws + 1; i < hi; i++ {
		j := i - ws
		acc[i] |= src[j&(reduceWords-1)]<<bs | src[(j-1)&(reduceWords-1)]>>(64-bs)
	}
}

// ReduceCSR is the transitive reduction of a DAG given as fanin lists in
// topological order (fanin(i) holds indices < i): the kept producers of
// every task, in order, as a CSR (off has n+1 entries), for tests and
// tools that hold a whole DAG; the ordinary path and the Definition
// builder reduce incrementally with a reducer of their own.
func ReduceCSR(n int, fanin func(i int) []TaskID) (off []uint32, idx []TaskID) {
	var r edgeReducer
	r.reset()
	off = make([]uint32, n+1)
	for i := 0; i < n; i++ {
		idx = r.add(fanin(i), idx)
		off[i+1] = uint32(len(idx))
	}
	return off, idx
}

// reduceDefinition reduces d's fanin in place, in record order: each
// node's Fanin span shrinks to the edges no other path implies (kept in
// their order, so the pool compacts over itself), and Implied counts the
// rest. r is the caller's, reused. A Definition is reduced once, when it
// is built: every replay ships the reduced image.
func reduceDefinition(d *Definition, r *edgeReducer) {
	r.reset()
	w := uint32(0)
	for i := range d.Nodes {
		nd := &d.Nodes[i]
		f := d.Fanin[nd.Fanin.Off : nd.Fanin.Off+nd.Fanin.N]
		r.in = r.in[:0]
		for _, p := range f {
			r.in = append(r.in, TaskID(p))
		}
		r.out = r.add(r.in, r.out[:0])
		kept := r.out
		for k, p := range kept {
			d.Fanin[w+uint32(k)] = uint32(p)
		}
		nd.Implied = nd.Fanin.N - uint32(len(kept)) + nd.Implied
		nd.Fanin = Span{Off: w, N: uint32(len(kept))}
		w += uint32(len(kept))
	}
	d.Fanin = d.Fanin[:w]
}

// ReduceDefinition reduces a built Definition's fanin in place, as a
// Recorder's Publish does unless told to ship every edge; EncodeDefinition
// then ships the reduced graph.
func ReduceDefinition(d *Definition) {
	var r edgeReducer
	reduceDefinition(d, &r)
}

// ReduceFanin makes img ship the transitive reduction of its fanin, as the
// ordinary path's images do unless told to ship every edge: Fanin keeps
// every edge, the image's encoding ships the rest. For images built by
// hand or decoded (tests, tools).
func (img *RunImage) ReduceFanin() {
	var r edgeReducer
	r.reset()
	img.ship, img.shipSpan = img.ship[:0], img.shipSpan[:0]
	for i := range img.Tasks {
		s := img.Tasks[i].Fanin
		off := len(img.ship)
		img.ship = r.add(img.Fanin[s.Off:s.Off+s.N], img.ship)
		img.shipSpan = append(img.shipSpan, Span{Off: uint32(off), N: uint32(len(img.ship) - off)})
	}
}
