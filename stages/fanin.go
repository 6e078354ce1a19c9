package stages

// FaninSet collects one task's fanin, deduplicated, without allocating per
// task: a generation stamp per producer id replaces a per-task set.
type FaninSet struct {
	seen []uint32 // generation at which each producer id was last added
	gen  uint32
	self TaskID
	Out  []TaskID
}

// Begin starts the fanin of task self; Out is reset (its storage reused).
func (fs *FaninSet) Begin(self TaskID) {
	fs.gen++
	if fs.gen == 0 { // wrapped: clear stale stamps
		clear(fs.seen)
		fs.gen = 1
	}
	fs.self = self
	fs.Out = fs.Out[:0]
}

// Add adds producer p, unless it is the task itself or already present.
func (fs *FaninSet) Add(p TaskID) {
	if p == fs.self || p < 0 {
		return
	}
	if int(p) >= len(fs.seen) {
		grown := make([]uint32, max(2*len(fs.seen), int(p)+1, 1024))
		copy(grown, fs.seen)
		fs.seen = grown
	}
	if fs.seen[p] == fs.gen {
		return
	}
	fs.seen[p] = fs.gen
	fs.Out = append(fs.Out, p)
}

// rootMeta is what dependency resolution needs to know about a root.
type rootMeta struct {
	creator   TaskID
	manualDep bool
}

// rootMetas answers rootMeta for any root id the resolver meets.
type rootMetas interface {
	meta(RootID) rootMeta
}

// resolveFanin applies upstream's dependency rule to one task (reference
// README, "The dependency rule"), filling fs, and registers the task's writes
// in tm:
//
//  1. every explicit dependency is an edge;
//  2. inside a manual scope nothing else, and nothing is registered;
//  3. otherwise every non-output argument gets an edge to its root's creator
//     (creator retention), and inputs and inouts of tracked roots get an edge
//     to every overlapping TensorMap entry; an inout that covers an entry
//     retires it;
//  4. then inouts and output-existing args of tracked roots register;
//  5. no self edges; edges are a set.
//
// It is generic so that the ordinary path's root table (rootTable, a slice
// type) is read inline, not through an interface call per argument.
func resolveFanin[M rootMetas](tm *TensorMap, roots M, self TaskID, args []Arg, deps []TaskID, manual bool, fs *FaninSet) {
	fs.Begin(self)
	for _, d := range deps {
		fs.Add(d)
	}
	if manual {
		return
	}
	for i := range args {
		a := &args[i]
		if a.Tag == TagOutput {
			continue
		}
		m := roots.meta(a.View.Root)
		fs.Add(m.creator)
		if m.manualDep || a.View.ManualDep {
			continue
		}
		if a.Tag == TagInput || a.Tag == TagInOut {
			tm.Lookup(&a.View, a.Tag == TagInOut, fs)
		}
	}
	for i := range args {
		a := &args[i]
		if (a.Tag == TagInOut || a.Tag == TagOutputExisting) && !a.View.ManualDep && !roots.meta(a.View.Root).manualDep {
			tm.Register(&a.View, self)
		}
	}
}
