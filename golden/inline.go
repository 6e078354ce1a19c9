package golden

import (
	"fmt"

	"github.com/hbg-dev/hbg/stages"
)

// Inline returns orch with every Graph call run on the ordinary path, in
// its caller's scopes and with no barrier: its eager form, runnable on the
// runtime. The golden reference is stricter (Compute): the inline twin
// keeps the ordering each call imposes. A body's error fails the pass,
// naming its key, as it does on the Graph path.
func Inline(orch *stages.Orchestration) *stages.Orchestration {
	twin := *orch
	twin.Name = orch.Name + "/inline"
	twin.Run = func(o stages.Submitter) error {
		in := &inliner{Submitter: o}
		in.roots, _ = o.(stages.RootCounter)
		if err := orch.Run(in); err != nil {
			return err
		}
		return in.err
	}
	return &twin
}

type inliner struct {
	stages.Submitter
	roots stages.RootCounter // the wrapped Submitter, if it counts its roots
	err   error              // the first body error; Graph has no error return of its own
}

var _ stages.RootCounter = (*inliner)(nil)

func (i *inliner) Graph(call *stages.GraphCall) stages.TaskID {
	if err := call.Body(i, call.NewBoundary()); err != nil && i.err == nil {
		i.err = fmt.Errorf("graph %q run inline: %w", call.Key, err)
	}
	return stages.NoTask
}

// NumRoots forwards to the wrapped Submitter. One that does not count its
// roots writes each output's root back into its arg (stages.Submitter),
// and the interpreter never needs the count; 0 then stands for unknown.
func (i *inliner) NumRoots() int {
	if i.roots == nil {
		return 0
	}
	return i.roots.NumRoots()
}

// HostWait forwards to the wrapped Submitter's (stages.HostWaiter); one
// without it orders nothing.
func (i *inliner) HostWait(v stages.View, consumers bool) stages.TaskID {
	if w, ok := i.Submitter.(stages.HostWaiter); ok {
		return w.HostWait(v, consumers)
	}
	return stages.NoTask
}
