package main

import (
	"fmt"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/trace"
)

// The golden check runs in the library (actors.Config.Golden): every pass
// comes back with its check. The command reports the first pass that
// failed it (else the first pass) and fails the run when any did.

// goldenFailed marks a run whose golden check failed: exit 1, after the
// report is written.
type goldenFailed struct{ err error }

func (e goldenFailed) Error() string { return e.err.Error() }
func (e goldenFailed) Unwrap() error { return e.err }

// reportGolden fills rep's golden check and races from the passes; it
// returns the first failure (nil when every pass passed).
func reportGolden(rep *trace.Report, passes []*actors.PassResult) error {
	var shown *actors.PassResult
	var failed error
	for _, p := range passes {
		if p == nil || p.Golden == nil {
			continue
		}
		if shown == nil {
			shown = p
		}
		if err := p.Golden.Err(); err != nil && failed == nil {
			shown = p
			failed = fmt.Errorf("rank %d round %d: %w", p.Pass.Rank, p.Pass.Round, err)
		}
	}
	if shown == nil {
		return nil
	}
	g := shown.Golden
	tg := &trace.Golden{
		Reference: g.Reference, Verdict: string(g.Verdict),
		Digest: trace.Digest(g.Digest), ReferenceDigest: trace.Digest(g.ReferenceDigest), Match: g.Match,
		Tasks: g.Tasks, ReferenceTasks: g.ReferenceTasks,
		Races: g.RaceCount, ReferenceRaces: g.ReferenceRaceCount, DeclaredRaces: g.DeclaredRaces,
		EagerDigest: trace.Digest(g.Eager.Digest), EagerMatch: g.Eager.Match, EagerRaces: g.Eager.RaceCount,
		EagerRaceList: traceRaces(g.Eager.Races),
	}
	if d := g.Diff; d != nil {
		tg.Diff = &trace.GoldenDiff{Root: int(d.Root), Name: d.Name, Lo: d.Lo, Hi: d.Hi,
			Writer: taskText(&d.Writer), ReferenceWriter: taskText(&d.Theirs)}
	}
	rep.Golden = tg
	rep.Races = traceRaces(g.Races)
	if rep.Races == nil {
		rep.Races = []trace.Race{}
	}
	if g.ReferenceRaceCount > 0 && g.RaceCount == 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the %s races (%d races), the form does not: first %s", g.Reference, g.ReferenceRaceCount, g.ReferenceRaces[0].String()))
	}
	if failed != nil {
		return goldenFailed{failed}
	}
	return nil
}

// traceRaces lists races for the report. The device names each side's
// kernel (TaskInfo.KernelName) and the runtime its op, so a line here reads
// as npu.Race.String does.
func traceRaces(rs []npu.Race) []trace.Race {
	if len(rs) == 0 {
		return nil
	}
	out := make([]trace.Race, len(rs))
	for i := range rs {
		r := &rs[i]
		out[i] = trace.Race{Kind: r.Kind.String(), A: raceTask(&r.A), B: raceTask(&r.B),
			Root: int(r.Root), Lo: r.Lo, Hi: r.Hi, Text: fmt.Sprintf("%s %s", r.Kind, r.Detail())}
		if r.Root < 0 {
			out[i].Graph, out[i].Internal = int(r.Graph), int(r.Internal)
		}
	}
	return out
}

func raceTask(a *npu.RaceAccess) trace.RaceTask {
	return trace.RaceTask{Task: int(a.Task.Task), Node: int(a.Task.Node), Key: a.Key, Kernel: a.KernelName, Arg: int(a.Arg), Tag: a.Tag.String(), Op: a.Op}
}

// taskText names a task for a person: its submission index, Graph key and
// node, op and kernel.
func taskText(t *npu.TaskInfo) string {
	if t.Task.Task < 0 {
		return "no task (initial contents)"
	}
	return t.String()
}
