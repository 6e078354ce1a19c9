package actors

import (
	"fmt"

	"github.com/hbg-dev/hbg/stages"
)

// Inline returns orch with every Graph call run on the ordinary path, in
// its caller's scopes and with no barrier: its eager form, runnable on the
// runtime. The golden reference is stricter (golden.go, ComputeReference):
// the inline twin keeps the ordering each call imposes. A body's error
// fails the pass, naming its key, as it does on the Graph path.
func Inline(orch *Orchestration) *Orchestration {
	twin := *orch
	twin.Name = orch.Name + "/inline"
	twin.Run = func(o stages.Submitter) error {
		in := &inliner{Submitter: o}
		if err := orch.Run(in); err != nil {
			return err
		}
		return in.err
	}
	return &twin
}

type inliner struct {
	stages.Submitter
	err error // the first body error; Graph has no error return of its own
}

func (i *inliner) Graph(call *stages.GraphCall) stages.TaskID {
	if err := call.Body(i, call.NewBoundary()); err != nil && i.err == nil {
		i.err = fmt.Errorf("graph %q run inline: %w", call.Key, err)
	}
	return stages.NoTask
}

// NumRoots forwards to the wrapped Submitter, if it tells.
func (i *inliner) NumRoots() int {
	if rc, ok := i.Submitter.(interface{ NumRoots() int }); ok {
		return rc.NumRoots()
	}
	return 0
}
