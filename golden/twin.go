package golden

import (
	"fmt"

	"github.com/hbg-dev/hbg/stages"
)

// twin is the Submitter of the inline twin: the ordinary path, with
// each Graph call's body inline between two barriers.
type twin struct {
	o        *linedPath
	bodies   []*inlineBody
	barriers int
	// err is the first body's error: Graph has no error return of its own,
	// and a twin that went on without the failed body's tasks would end
	// with other digests than the pass, a mismatch that is not one.
	err error
}

var _ stages.RootCounter = (*twin)(nil)

type inlineBody struct {
	in       stages.TaskID
	boundary []stages.Arg
	written  []bool
	tasks    []stages.TaskID
}

func (w *twin) top() *inlineBody {
	if len(w.bodies) == 0 {
		return nil
	}
	return w.bodies[len(w.bodies)-1]
}

func (w *twin) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	id, r := w.o.Alloc(specs)
	if b := w.top(); b != nil {
		b.tasks = append(b.tasks, id)
	}
	return id, r
}

func (w *twin) Submit(t *stages.Task) stages.TaskID {
	b := w.top()
	if b == nil {
		return w.o.Submit(t)
	}
	deps := t.Deps
	t.Deps = append(deps[:len(deps):len(deps)], b.in)
	id := w.o.Submit(t)
	t.Deps = deps
	b.tasks = append(b.tasks, id)
	// Every body on the stack learns which of its slots this task writes.
	for _, a := range t.Args {
		if !a.Tag.Writes() || a.Tag == stages.TagOutput {
			continue
		}
		for _, ob := range w.bodies {
			for k := range ob.boundary {
				v := &ob.boundary[k].View
				if v.Root == a.View.Root && v.Offset < a.View.End() && a.View.Offset < v.End() {
					ob.written[k] = true
				}
			}
		}
	}
	return id
}

func (w *twin) ScopeBegin(m stages.ScopeMode) { w.o.ScopeBegin(m) }
func (w *twin) ScopeEnd()                     { w.o.ScopeEnd() }

// NumRoots lets an interpreter predict the roots a task's outputs get.
func (w *twin) NumRoots() int { return w.o.NumRoots() }

func (w *twin) Graph(call *stages.GraphCall) stages.TaskID {
	none := [3]stages.KernelID{-1, -1, -1}
	bnd := make([]stages.Arg, 0, len(call.Boundary))
	for _, a := range call.Boundary {
		if a.Tag != stages.TagOutput {
			bnd = append(bnd, a)
		}
	}
	w.barriers += 2
	in := w.Submit(&stages.Task{Kind: stages.KindDummy, Kernel: none, BlockNum: -1, Args: bnd})
	b := &inlineBody{in: in, boundary: bnd, written: make([]bool, len(bnd))}
	w.bodies = append(w.bodies, b)
	saved := w.o.SuspendScopes()
	if err := call.Body(w, call.NewBoundary()); err != nil && w.err == nil {
		w.err = fmt.Errorf("graph %q: %w", call.Key, err)
	}
	w.o.ResumeScopes(saved)
	w.bodies = w.bodies[:len(w.bodies)-1]
	var outArgs []stages.Arg
	for k, a := range bnd {
		if b.written[k] {
			outArgs = append(outArgs, stages.Arg{Tag: stages.TagOutputExisting, View: a.View})
		}
	}
	return w.Submit(&stages.Task{Kind: stages.KindDummy, Kernel: none, BlockNum: -1, Args: outArgs, Deps: b.tasks})
}

var _ stages.HostWaiter = (*twin)(nil)

// HostWait orders a host access on the twin's ordinary path, as the pass
// does on its own.
func (w *twin) HostWait(v stages.View, consumers bool) stages.TaskID {
	return w.o.HostWait(v, consumers)
}
