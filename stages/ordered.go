package stages

import (
	"fmt"
	"slices"
)

// A Graph call run on the ordinary path while its key records
// (PassConfig.OrdinaryWhileRecording) must order its tasks as the replay
// that later passes run will: a body's tasks wait on nothing outside but
// through the outer GRAPH task, and later tasks wait on the whole body. So
// the body runs between two dummy tasks, as the golden check's inline twin
// runs it (package golden): the first waits as the outer task would (on
// the boundary, by its tags) and every body task waits on it; the second
// waits on every body task and writes each slot the body wrote. Without
// them, a body whose tasks are in a manual scope (Qwen3's layer) races
// with its neighbours where the Graph does not.

// orderedPath is the Submitter such a body runs on: o, with the barrier.
type orderedPath struct {
	o       Submitter
	roots   RootCounter
	in      TaskID
	bnd     []Arg
	written []bool
	tasks   []TaskID
}

var _ RootCounter = (*orderedPath)(nil)

func (b *orderedPath) Alloc(specs []RootSpec) (TaskID, RootID) {
	id, r := b.o.Alloc(specs)
	b.tasks = append(b.tasks, id)
	return id, r
}

func (b *orderedPath) Submit(t *Task) TaskID {
	deps := t.Deps
	t.Deps = append(deps[:len(deps):len(deps)], b.in)
	id := b.o.Submit(t)
	t.Deps = deps
	b.tasks = append(b.tasks, id)
	for _, a := range t.Args {
		if !a.Tag.Writes() || a.Tag == TagOutput {
			continue
		}
		for k := range b.bnd {
			v := &b.bnd[k].View
			if v.Root == a.View.Root && v.Offset < a.View.End() && a.View.Offset < v.End() {
				b.written[k] = true
			}
		}
	}
	return id
}

func (b *orderedPath) ScopeBegin(m ScopeMode) { b.o.ScopeBegin(m) }
func (b *orderedPath) ScopeEnd()              { b.o.ScopeEnd() }

// Graph: a nested call goes its own way (the Host's); the closing barrier
// waits on it.
func (b *orderedPath) Graph(call *GraphCall) TaskID {
	id := b.o.Graph(call)
	b.tasks = append(b.tasks, id)
	return id
}

// NumRoots lets an interpreter predict the roots a task's outputs get.
func (b *orderedPath) NumRoots() int {
	if b.roots == nil {
		panic("stages: a body on the ordinary path asked NumRoots of a Submitter that does not count roots")
	}
	return b.roots.NumRoots()
}

// inlineOrdered runs call's body on the ordinary path between barriers
// (orderedPath), in scopes of its own as a recording's; it returns the
// closing barrier, which later tasks wait on as on the outer task.
func (h *Host) inlineOrdered(call *GraphCall, o Submitter) TaskID {
	none := [3]KernelID{-1, -1, -1}
	bnd := make([]Arg, 0, len(call.Boundary))
	for _, a := range call.Boundary {
		if a.Tag != TagOutput {
			bnd = append(bnd, a)
		}
	}
	b := &orderedPath{o: o, bnd: bnd, written: make([]bool, len(bnd))}
	b.roots, _ = o.(RootCounter)
	b.in = o.Submit(&Task{Kind: KindDummy, Kernel: none, BlockNum: -1, Args: slices.Clone(bnd)})
	// The body reads its own copy: a nested Graph call lends the slots
	// call.Boundary may be.
	c := *call
	c.Boundary = slices.Clone(call.Boundary)
	saved := h.orch.SuspendScopes()
	err := c.Body(b, c.NewBoundary())
	h.orch.ResumeScopes(saved)
	if err != nil {
		h.p.errs = append(h.p.errs, fmt.Errorf("graph %q on the ordinary path: %w", call.Key, err))
	}
	var out []Arg
	for k, a := range bnd {
		if b.written[k] {
			out = append(out, Arg{Tag: TagOutputExisting, View: a.View})
		}
	}
	h.p.Counts.Barriers += 2
	return o.Submit(&Task{Kind: KindDummy, Kernel: none, BlockNum: -1, Args: out, Deps: b.tasks})
}
