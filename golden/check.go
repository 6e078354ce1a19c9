// Package golden is the golden check (ARCHITECTURE §4): a pure function of
// an orchestration and a device configuration that says whether a pass
// ended as its program's inline twin does.
//
// A Graph form must end with the digests of its inline twin: the same
// program with every Graph call's body submitted on the ordinary path,
// ordered as the call orders it. The twin is computed from stages and npu
// alone (no actor, no Definition), once per orchestration, on a device of
// its own.
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
//
// The package is under the purity test: it waits for nothing, so the
// runtime (actors) makes the reference on a goroutine of its own and bounds
// the wait, since the reference runs the caller's code.
package golden

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// Verdict is the golden check's outcome.
type Verdict string

const (
	VerdictMatch    Verdict = "match"
	VerdictMismatch Verdict = "mismatch"
	// VerdictRacy: the form or its reference has a race, so digests
	// prove nothing either way.
	VerdictRacy Verdict = "racy"
)

// ErrMismatch and ErrRacy are what a failed check's error (Check.Err, an
// *Error) matches with errors.Is, by its verdict.
var (
	ErrMismatch = errors.New("golden mismatch")
	ErrRacy     = errors.New("golden check racy")
)

// Error is a failed check, as Check.Err gives it: its text names what
// failed, in one paragraph; errors.As reaches the check itself.
type Error struct {
	Check *Check
	msg   string
}

func (e *Error) Error() string { return e.msg }

// Is makes errors.Is(err, ErrMismatch) or errors.Is(err, ErrRacy) hold, by
// the check's verdict.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrMismatch:
		return e.Check.Verdict == VerdictMismatch
	case ErrRacy:
		return e.Check.Verdict == VerdictRacy
	}
	return false
}

// Check is one pass's golden check.
type Check struct {
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
func (g *Check) OK() bool { return g.Verdict == VerdictMatch }

// Err is nil when the check passed, else an *Error saying what failed.
func (g *Check) Err() error {
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
	return &Error{Check: g, msg: b.String()}
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

// Compare checks a pass's device result against the reference.
func (ref *Reference) Compare(res *npu.Result) *Check {
	return ref.CompareBarriered(res, 0)
}

// CompareBarriered is Compare for a pass that ran barriers dummy tasks of
// its own, as the inline twin does (stages.PassCounts.Barriers: Graph calls
// run on the ordinary path while their keys recorded): they are not the
// program's tasks.
func (ref *Reference) CompareBarriered(res *npu.Result, barriers int) *Check {
	tw := ref.Twin
	g := &Check{
		Reference: "inline twin",
		Digest:    res.Digest, ReferenceDigest: tw.Digest,
		Tasks: res.Tasks - barriers, ReferenceTasks: tw.Tasks - ref.Barriers,
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
