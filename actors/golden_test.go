package actors

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// TestGoldenMatch: every pass of a Graph form ends with its inline twin's
// digests and task count, and its eager form's digest.
func TestGoldenMatch(t *testing.T) {
	orch := keysModel{keys: 3, calls: 4}.orchestration("golden")
	rt := newRuntime(t, Config{Golden: true}, nil)
	for round := 0; round < 2; round++ {
		g := runPass(t, rt, orch, round).Golden
		if g == nil || !g.OK() || g.Err() != nil || !g.Match || !g.Eager.Match || g.Diff != nil {
			t.Fatalf("round %d: %+v", round, g)
		}
		if g.Tasks != g.ReferenceTasks || g.Tasks == 0 {
			t.Fatalf("tasks %d, reference %d", g.Tasks, g.ReferenceTasks)
		}
	}
}

// TestGoldenTeeth: a replay patched with a wrong scalar or a moved view
// fails the check, which names where the output first differs and who
// wrote it in each run.
func TestGoldenTeeth(t *testing.T) {
	orch := keysModel{keys: 2, calls: 3}.orchestration("teeth")
	rt := newRuntime(t, Config{Golden: true}, nil)
	if g := runPass(t, rt, orch, 0).Golden; !g.OK() {
		t.Fatalf("untampered: %v", g.Err())
	}
	// Graph submission 3 is key-1's second call: rows 12..15 of y.
	for name, f := range map[string]func(img *stages.RunImage){
		"scalar": func(img *stages.RunImage) { img.Scalars[img.Graphs[3].Scalars.Off]++ },
		"offset": func(img *stages.RunImage) {
			i := int(img.Graphs[3].Boundary.Off)
			a := img.BoundArg(i)
			a.Offset += 16
			img.SetBoundArg(i, a)
		},
	} {
		rt.imageHook = f
		g := runPass(t, rt, orch, 1).Golden
		rt.imageHook = nil
		if g.Verdict != golden.VerdictMismatch || g.Err() == nil || g.Diff == nil {
			t.Fatalf("%s: %+v", name, g)
		}
		d := g.Diff
		if d.Root != 1 || d.Lo != 12*16 || d.Hi != 16*16 || d.Writer.Task.Node < 0 || d.Writer.Key != "key-1" || d.Theirs.Task.Node >= 0 {
			t.Errorf("%s: diff %s", name, d.String())
		}
		if !strings.Contains(g.Err().Error(), "root 1 (y) elements [192, 256)") {
			t.Errorf("%s: %v", name, g.Err())
		}
	}
}

// manualCaller is a program whose ordering comes from its Graph calls: it
// calls its block inside a manual scope, chained by nothing but the Graph
// calls themselves. As Graphs (and as the inline twin) each call's body
// is ordered inside; with the Graph calls removed, the body's own tasks
// run in the caller's manual scope and lose their edges. With a file, it
// is a model file's program, whose body's ops are on lines 11 and 12.
func manualCaller(file string) *Orchestration {
	m := keysModel{keys: 1, calls: 2}
	if file != "" {
		m.body = linedBody
	}
	orch := m.orchestration("manual")
	orch.File = file
	run := orch.Run
	orch.Run = func(o stages.Submitter) error {
		o.ScopeBegin(stages.ScopeManual)
		defer o.ScopeEnd()
		return run(o)
	}
	return orch
}

// linedBody is rowBody with its kernel tasks made by the ops on lines 11
// and 12 of a model file.
func linedBody(o stages.Submitter, b *stages.Boundary) error {
	return rowBody(&lineSetter{Submitter: o, next: 11}, b)
}

// lineSetter gives each task it submits the next line, as the config
// interpreter gives each the line of its op.
type lineSetter struct {
	stages.Submitter
	next int32
}

func (l *lineSetter) Submit(t *stages.Task) stages.TaskID {
	t.Line = l.next
	l.next++
	return l.Submitter.Submit(t)
}

// TestGoldenEagerRaces: the eager form of a program that relies on its
// Graph calls for ordering is reported racy, naming the pair: both tasks'
// kernels, and their ops' lines when the program is a model file's (the
// eager form is submitted once, for the reference, and notes them as it
// goes); the twin is race-free and the Graph form matches it.
func TestGoldenEagerRaces(t *testing.T) {
	// Each call's vector kernel writes its tmp, which the cube kernel
	// reads: tasks 2 and 3 (first call, after the dummy and the alloc),
	// 5 and 6 (second call).
	for _, c := range []struct {
		file string
		want []string
	}{
		{"", []string{
			"read-write race on root 3 [0, 64): task 2 scale arg 1 (oe) and task 3 mm arg 0 (i)",
			"read-write race on root 4 [0, 64): task 5 scale arg 1 (oe) and task 6 mm arg 0 (i)",
		}},
		{"models/manual.yaml", []string{
			"read-write race on root 3 [0, 64): task 2 [models/manual.yaml:11] scale arg 1 (oe) and task 3 [models/manual.yaml:12] mm arg 0 (i)",
			"read-write race on root 4 [0, 64): task 5 [models/manual.yaml:11] scale arg 1 (oe) and task 6 [models/manual.yaml:12] mm arg 0 (i)",
		}},
	} {
		t.Run(cmp.Or(c.file, "no model file"), func(t *testing.T) {
			orch := manualCaller(c.file)
			ref, err := golden.Compute(orch, npu.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if ref.Twin.RaceCount != 0 {
				t.Fatalf("twin races: %v", ref.Twin.Races)
			}
			if got := raceStrings(ref.Eager.Races); !slices.Equal(got, c.want) {
				t.Errorf("eager races\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			rt := newRuntime(t, Config{Golden: true}, nil)
			g := runPass(t, rt, orch, 0).Golden
			if !g.OK() || g.Eager.RaceCount == 0 {
				t.Fatalf("%+v", g)
			}
			if got := raceStrings(g.Eager.Races); !slices.Equal(got, c.want) {
				t.Errorf("a pass's eager races\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func raceStrings(rs []npu.Race) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = rs[i].String()
	}
	return out
}

// TestGoldenRacy: a form that races is reported racy with its races, not
// as a mismatch, and the check fails. Its error's first race names both
// tasks' kernels, and their ops' lines for a model file's program, as the
// race lines do; so do the inline twin's races, which run as ordinary
// tasks only.
func TestGoldenRacy(t *testing.T) {
	for _, c := range []struct {
		file            string
		first, twinRace string
	}{
		{"", "golden: racy: the form has 2 races, its reference (inline twin) 2; " +
			`first: write-write race on root 1 [0, 16): task 1 (graph "key-0" node 2) mm arg 1 (x) and task 2 scale arg 1 (oe)`,
			"write-write race on root 1 [0, 16): task 4 mm arg 1 (x) and task 6 scale arg 1 (oe)"},
		{"racy.yaml", "golden: racy: the form has 2 races, its reference (inline twin) 2; " +
			`first: write-write race on root 1 [0, 16): task 1 (graph "key-0" node 2) [racy.yaml:12] mm arg 1 (x) and task 2 [racy.yaml:21] scale arg 1 (oe)`,
			"write-write race on root 1 [0, 16): task 4 [racy.yaml:12] mm arg 1 (x) and task 6 [racy.yaml:21] scale arg 1 (oe)"},
	} {
		t.Run(cmp.Or(c.file, "no model file"), func(t *testing.T) {
			m := keysModel{keys: 1, calls: 1}
			if c.file != "" {
				m.body = linedBody
			}
			orch := m.orchestration("racy")
			orch.File = c.file
			run := orch.Run
			orch.Run = func(o stages.Submitter) error {
				if err := run(o); err != nil {
					return err
				}
				// Two writers of y's first rows, unordered with each other
				// and with the Graph call's, by the ops on lines 21 and 22.
				o.ScopeBegin(stages.ScopeManual)
				defer o.ScopeEnd()
				for i := 0; i < 2; i++ {
					o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 0, -1}, BlockNum: 1, Line: int32(21 + i),
						Args: []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(0, 0, stages.FP32, 16)}, {Tag: stages.TagOutputExisting, View: stages.NewView(1, 0, stages.FP32, 16)}}})
				}
				return nil
			}
			rt := newRuntime(t, Config{Golden: true}, nil)
			g := runPass(t, rt, orch, 0).Golden
			if g.Verdict != golden.VerdictRacy || g.RaceCount == 0 || g.ReferenceRaceCount == 0 || g.OK() {
				t.Fatalf("%+v", g)
			}
			if err := g.Err(); err == nil || err.Error() != c.first {
				t.Errorf("err  %v\nwant %s", err, c.first)
			}
			if got := g.ReferenceRaces[0].String(); got != c.twinRace {
				t.Errorf("twin race %s\nwant      %s", got, c.twinRace)
			}
		})
	}
}
