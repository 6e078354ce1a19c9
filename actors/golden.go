package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// The golden check (ARCHITECTURE §4). A Graph form must end with the
// digests of its inline twin: the same program with every Graph call's body
// submitted on the ordinary path, ordered as the call orders it. The twin
// is computed here from stages and npu alone (no actor, no Definition), once
// per orchestration, on a device of its own.
//
// The call's ordering is two dummy barriers: one before the body, with the
// boundary as its arguments, so it waits on what the outer task would wait
// on (and, in an auto scope, registers as the producer of what the outer
// task would); every body task waits on it. One after the body, waiting on
// every body task, that registers as the producer of each boundary slot
// the body wrote: later readers wait on all of the body. The body runs
// with a scope stack of its own, as it does when it records. Barriers are
// dummies, device tasks without a core; the twin's task count is compared
// without them.
//
// The eager form (the same program with its Graph calls run as plain
// ordinary code, in their callers' scopes, no barrier) is compared too: a
// program whose ordering relies on its Graph calls races there, and the
// check says so rather than calling a digest difference a mismatch.

// Verdict is the golden check's outcome.
type Verdict string

const (
	VerdictMatch    Verdict = "match"
	VerdictMismatch Verdict = "mismatch"
	// VerdictRacy: the form or its reference has a race, so digests
	// prove nothing either way.
	VerdictRacy Verdict = "racy"
)

// Golden is one pass's golden check.
type Golden struct {
	// Reference names what the pass was checked against.
	Reference string
	Verdict   Verdict
	// Match: same digest and same device task count as the reference.
	Match                   bool
	Digest, ReferenceDigest uint64
	Tasks, ReferenceTasks   int
	// Races are the pass's races, ReferenceRaces the reference's (each at
	// most npu's cap; the counts are all of them).
	Races              []npu.Race
	RaceCount          int
	ReferenceRaces     []npu.Race
	ReferenceRaceCount int
	// DeclaredRaces counts the pass's races among kernels the model
	// declares may race (its races: section): reported, not failed.
	DeclaredRaces int
	// Diff is where the pass first differs from the reference, when the
	// digests differ.
	Diff *Diff
	// Eager is the comparison with the eager form.
	Eager EagerCheck
}

// EagerCheck compares a pass with its program's eager form.
type EagerCheck struct {
	Digest    uint64
	Match     bool
	Races     []npu.Race
	RaceCount int
	Diff      *Diff
}

// Diff is the first element interval of an output root where two runs
// end with different contents, and the task that last wrote it in each.
type Diff struct {
	Root   stages.RootID
	Name   string
	Lo, Hi int64
	// Writer wrote the interval last in the pass, Theirs in the run it is
	// compared with (Against: "reference" or "eager form").
	Writer, Theirs npu.TaskInfo
	Against        string
}

// OK reports whether the check passed.
func (g *Golden) OK() bool { return g.Verdict == VerdictMatch }

// Err is nil when the check passed, else what failed, in one paragraph.
func (g *Golden) Err() error {
	var b strings.Builder
	switch g.Verdict {
	case VerdictMatch:
		return nil
	case VerdictRacy:
		fmt.Fprintf(&b, "golden: racy: the form has %d races, its reference (%s) %d", g.RaceCount, g.Reference, g.ReferenceRaceCount)
		if len(g.Races) > 0 {
			fmt.Fprintf(&b, "; first: %s", g.Races[0].String())
		} else if len(g.ReferenceRaces) > 0 {
			fmt.Fprintf(&b, "; first in the reference: %s", g.ReferenceRaces[0].String())
		}
	default:
		fmt.Fprintf(&b, "golden: mismatch against the %s: digest %016x, reference %016x; %d device tasks, reference %d",
			g.Reference, g.Digest, g.ReferenceDigest, g.Tasks, g.ReferenceTasks)
		if d := g.Diff; d != nil {
			fmt.Fprintf(&b, "; %s", d.String())
		}
	}
	return errors.New(b.String())
}

func (d *Diff) String() string {
	return fmt.Sprintf("first difference in root %d (%s) elements [%d, %d): last written by %s here, by %s in the %s",
		d.Root, d.Name, d.Lo, d.Hi, writerString(&d.Writer), writerString(&d.Theirs), d.Against)
}

func writerString(t *npu.TaskInfo) string {
	if t.Task.Task < 0 {
		return "no task"
	}
	return t.String()
}

// Reference is an orchestration's golden reference on the device.
type Reference struct {
	// Twin is the inline twin's result; Barriers the dummy tasks it adds
	// (two per Graph call).
	Twin     *npu.Result
	Barriers int
	// Eager is the eager form's result.
	Eager *npu.Result
	// Source names the ops of the form's tasks (nil: not a model file),
	// made the first time a pass races: a clean run never pays for it.
	Source func() *Source
}

// ComputeReference runs orch's inline twin and eager form, each on a fresh
// device of configuration cfg. It is a pure function of orch and cfg.
//
// Each run's races name the model line of both tasks' ops, as a pass's
// do: both runs are ordinary paths that note each task's line as they
// submit it (an int32 a task, once per orchestration), which is all the
// provenance an ordinary path needs.
func ComputeReference(orch *Orchestration, cfg npu.Config) (*Reference, error) {
	tw := &twin{o: &linedPath{OrdinaryPath: stages.NewOrdinaryPath(orch.Entry)}}
	if err := runGuarded(orch, tw); err != nil {
		return nil, fmt.Errorf("golden reference of %q: %w", orch.Name, err)
	}
	twinRes, err := launchImage(orch, tw.o.Image(), cfg)
	if err != nil {
		return nil, fmt.Errorf("golden reference of %q: inline twin: %w", orch.Name, err)
	}
	eo := &linedPath{OrdinaryPath: stages.NewOrdinaryPath(orch.Entry)}
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
	return &Reference{Twin: twinRes, Barriers: tw.barriers, Eager: eagerRes,
		Source: sync.OnceValue(func() *Source { return sourceOf(orch) })}, nil
}

func runGuarded(orch *Orchestration, o stages.Submitter) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("orchestration panicked: %w", panicError(p))
		}
	}()
	return orch.Run(o)
}

func launchImage(orch *Orchestration, img *stages.RunImage, cfg npu.Config) (*npu.Result, error) {
	d := npu.New(cfg)
	d.RegisterEntry(orch.Entry)
	d.RegisterKernels(orch.Kernels)
	if err := d.CopyRun(stages.EncodeRunImage(img)); err != nil {
		return nil, err
	}
	return d.Launch()
}

// Check compares a pass's device result with the reference.
func (ref *Reference) Check(res *npu.Result) *Golden {
	tw := ref.Twin
	g := &Golden{
		Reference: "inline twin",
		Digest:    res.Digest, ReferenceDigest: tw.Digest,
		Tasks: res.Tasks, ReferenceTasks: tw.Tasks - ref.Barriers,
		Races: res.Races, RaceCount: res.RaceCount,
		ReferenceRaces: tw.Races, ReferenceRaceCount: tw.RaceCount,
		DeclaredRaces: res.DeclaredRaces,
	}
	g.Match = g.Digest == g.ReferenceDigest && g.Tasks == g.ReferenceTasks
	switch {
	case g.RaceCount > 0 || g.ReferenceRaceCount > 0:
		g.Verdict = VerdictRacy
	case !g.Match:
		g.Verdict = VerdictMismatch
	default:
		g.Verdict = VerdictMatch
	}
	if g.Digest != g.ReferenceDigest {
		g.Diff = firstDiff(res, tw)
		if g.Diff != nil {
			g.Diff.Against = "reference"
		}
	}
	e := ref.Eager
	g.Eager = EagerCheck{Digest: e.Digest, Match: e.Digest == res.Digest, Races: e.Races, RaceCount: e.RaceCount}
	if !g.Eager.Match {
		g.Eager.Diff = firstDiff(res, e)
		if g.Eager.Diff != nil {
			g.Eager.Diff.Against = "eager form"
		}
	}
	return g
}

// firstDiff is the first interval, in root order then element order, where
// a and b end with different contents.
func firstDiff(a, b *npu.Result) *Diff {
	i, j := 0, 0
	for i < len(a.Outputs) || j < len(b.Outputs) {
		var x, y *npu.RootDigest
		switch {
		case j == len(b.Outputs) || (i < len(a.Outputs) && a.Outputs[i].Root < b.Outputs[j].Root):
			x = &a.Outputs[i]
			i++
		case i == len(a.Outputs) || b.Outputs[j].Root < a.Outputs[i].Root:
			y = &b.Outputs[j]
			j++
		default:
			x, y = &a.Outputs[i], &b.Outputs[j]
			i++
			j++
		}
		if x != nil && y != nil && x.Digest == y.Digest {
			continue
		}
		if x == nil || y == nil {
			// Written in one run only: its first segment differs.
			r := x
			if r == nil {
				r = y
			}
			d := &Diff{Root: r.Root, Name: r.Name}
			if len(r.Segments) > 0 {
				s := r.Segments[0]
				d.Lo, d.Hi = s.Lo, s.Hi
				if x != nil {
					d.Writer, d.Theirs = s.Writer, noWriter
				} else {
					d.Writer, d.Theirs = noWriter, s.Writer
				}
			}
			return d
		}
		return segDiff(x, y)
	}
	return nil
}

var noWriter = npu.TaskInfo{Task: npu.TaskRef{Task: stages.NoTask, Node: -1}}

// segDiff walks two runs' segments of one root to the first piece whose
// digests differ.
func segDiff(x, y *npu.RootDigest) *Diff {
	d := &Diff{Root: x.Root, Name: x.Name}
	i, j := 0, 0
	for i < len(x.Segments) && j < len(y.Segments) {
		s, t := &x.Segments[i], &y.Segments[j]
		lo, hi := max(s.Lo, t.Lo), min(s.Hi, t.Hi)
		if s.Digest != t.Digest {
			d.Lo, d.Hi, d.Writer, d.Theirs = lo, hi, s.Writer, t.Writer
			return d
		}
		if s.Hi == hi {
			i++
		}
		if t.Hi == hi {
			j++
		}
	}
	// Same pieces, yet the digests differ (a segment boundary alone).
	if len(x.Segments) > 0 && len(y.Segments) > 0 {
		d.Lo, d.Hi, d.Writer, d.Theirs = x.Segments[0].Lo, x.Segments[0].Hi, x.Segments[0].Writer, y.Segments[0].Writer
	}
	return d
}

// checkGolden fills a pass's golden check, with Config.Golden. The
// reference is made by then: the pass was sent only after it was.
func (rt *Runtime) checkGolden(orch *Orchestration, res *PassResult) {
	if !rt.cfg.Golden || res.Err != nil || res.Device == nil {
		return
	}
	e := rt.golden.start(orch, rt.cfg.Device)
	<-e.done
	if e.err != nil {
		res.Err = e.err
		return
	}
	if len(res.Device.Races) > 0 {
		e.ref.Source().nameRaces(res)
	}
	res.Golden = e.ref.Check(res.Device)
}

// reference waits for orch's golden reference, started the first time a
// pass of orch is asked for. The reference runs the caller's orchestration
// and bodies, which may block, so the wait ends with ctx, Stop or
// Config.PassTimeout like any pass's; the reference goes on and is there
// for the next pass that asks, once the caller's code returns.
func (rt *Runtime) reference(ctx context.Context, orch *Orchestration, rank, round int) error {
	e := rt.golden.start(orch, rt.cfg.Device)
	select {
	case <-e.done:
		return nil // an error is the pass's: checkGolden reports it
	default:
	}
	// The wait is the trace's: without its span, a run's first pass starts
	// after a blank stretch as long as the reference took.
	span := rt.tracer.StartGoldenReference(ctx, orch.Name, rank, round)
	defer span.End()
	t := time.NewTimer(rt.cfg.PassTimeout)
	defer t.Stop()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rank %d round %d: golden reference of %q: %w", rank, round, orch.Name, ctx.Err())
	case <-t.C:
		return fmt.Errorf("rank %d round %d: golden reference of %q: not made after %v (Config.PassTimeout): %w", rank, round, orch.Name, rt.cfg.PassTimeout, context.DeadlineExceeded)
	case <-rt.stopped:
		return fmt.Errorf("rank %d round %d: %w", rank, round, ErrStopped)
	}
}

// goldenCache computes each orchestration's reference once (its Name is
// its identity), each in a goroutine of its own.
type goldenCache struct {
	mu   sync.Mutex
	refs map[string]*goldenEntry
}

type goldenEntry struct {
	done chan struct{} // closed when ref or err is set
	ref  *Reference
	err  error
}

// start gives orch's entry, starting its computation if none has.
func (c *goldenCache) start(orch *Orchestration, cfg npu.Config) *goldenEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == nil {
		c.refs = map[string]*goldenEntry{}
	}
	e := c.refs[orch.Name]
	if e == nil {
		e = &goldenEntry{done: make(chan struct{})}
		c.refs[orch.Name] = e
		go func() {
			e.ref, e.err = ComputeReference(orch, cfg)
			close(e.done)
		}()
	}
	return e
}

// twin is the Submitter of the inline twin: the ordinary path, with
// each Graph call's body inline between two barriers.
type twin struct {
	o        *linedPath
	bodies   []*inlineBody
	barriers int
}

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
	call.Body(w, call.NewBoundary())
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
