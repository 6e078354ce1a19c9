package actors

import "github.com/hbg-dev/hbg/stages"

// Inline returns orch with every Graph call run on the ordinary path, in
// its caller's scopes and with no barrier: its eager form, runnable on the
// runtime. The golden reference is stricter (golden.go, ComputeReference):
// the inline twin keeps the ordering each call imposes.
func Inline(orch *Orchestration) *Orchestration {
	twin := *orch
	twin.Name = orch.Name + "/inline"
	twin.Run = func(o stages.Submitter) error { return orch.Run(inliner{o}) }
	return &twin
}

type inliner struct{ stages.Submitter }

func (i inliner) Graph(call *stages.GraphCall) stages.TaskID {
	call.Body(i, call.NewBoundary())
	return stages.NoTask
}

// NumRoots forwards to the wrapped Submitter, if it tells.
func (i inliner) NumRoots() int {
	if rc, ok := i.Submitter.(interface{ NumRoots() int }); ok {
		return rc.NumRoots()
	}
	return 0
}
