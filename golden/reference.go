package golden

import (
	"fmt"

	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// Reference is an orchestration's golden reference on the device.
type Reference struct {
	// Twin is the inline twin's result; Barriers the dummy tasks it adds
	// (two per Graph call).
	Twin     *npu.Result
	Barriers int
	// Eager is the eager form's result.
	Eager *npu.Result
}

// Compute runs orch's inline twin and eager form, each on a fresh device
// of configuration cfg. A body's error, or a panic of the orchestration or
// a body, fails it (the error wraps it): the reference of a program that
// does not run is no reference, and a pass checked against it would show
// a false mismatch.
//
// Each run's races name the model line of both tasks' ops, as a pass's
// do: both runs are ordinary paths that note each task's line as they
// submit it (an int32 a task, once per orchestration), which is all the
// provenance an ordinary path needs.
func Compute(orch *stages.Orchestration, cfg npu.Config) (*Reference, error) {
	tw := &twin{o: newLinedPath(orch)}
	if err := runGuarded(orch, tw); err != nil {
		return nil, fmt.Errorf("golden reference of %q: inline twin: %w", orch.Name, err)
	}
	if tw.err != nil {
		return nil, fmt.Errorf("golden reference of %q: inline twin: %w", orch.Name, tw.err)
	}
	twinRes, err := launchImage(orch, tw.o.Image(), cfg)
	if err != nil {
		return nil, fmt.Errorf("golden reference of %q: inline twin: %w", orch.Name, err)
	}
	eo := newLinedPath(orch)
	if err := runGuarded(orch, eo); err != nil {
		return nil, fmt.Errorf("golden reference of %q: eager form: %w", orch.Name, err)
	}
	if eo.err != nil {
		return nil, fmt.Errorf("golden reference of %q: eager form: %w", orch.Name, eo.err)
	}
	eagerRes, err := launchImage(orch, eo.Image(), cfg)
	if err != nil {
		return nil, fmt.Errorf("golden reference of %q: eager form: %w", orch.Name, err)
	}
	if orch.File != "" {
		(&Source{File: orch.File, Tasks: tw.o.lines}).nameAll(twinRes.Races)
		(&Source{File: orch.File, Tasks: eo.lines}).nameAll(eagerRes.Races)
	}
	return &Reference{Twin: twinRes, Barriers: tw.barriers, Eager: eagerRes}, nil
}

// runGuarded runs orch on o; a panic is its error. A runtime.Goexit is not
// caught here (nothing can stop one): the caller's goroutine ends, and the
// runtime's goroutine that computes the reference says so.
func runGuarded(orch *stages.Orchestration, o stages.Submitter) (err error) {
	defer func() {
		p := recover()
		if b, ok := p.(*stages.EdgeBoundError); ok {
			err = b
		} else if p != nil {
			err = fmt.Errorf("orchestration panicked: %w", stages.PanicError(p))
		}
	}()
	return orch.Run(o)
}

func launchImage(orch *stages.Orchestration, img *stages.RunImage, cfg npu.Config) (*npu.Result, error) {
	d := npu.New(cfg)
	d.RegisterEntry(orch.Entry)
	d.RegisterKernels(orch.Kernels)
	if err := d.CopyRun(stages.EncodeRunImage(img)); err != nil {
		return nil, err
	}
	return d.Launch()
}
