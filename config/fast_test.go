package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// logOrch records what a run submits, as text, running Graph bodies
// inline: two runs that submit the same record the same.
type logOrch struct {
	tasks, roots int
	log          strings.Builder
}

func (o *logOrch) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	fmt.Fprintf(&o.log, "alloc %v\n", specs)
	id, r := o.tasks, o.roots
	o.tasks++
	o.roots += len(specs)
	return stages.TaskID(id), stages.RootID(r)
}

func (o *logOrch) Submit(t *stages.Task) stages.TaskID {
	fmt.Fprintf(&o.log, "task %v %v %v %v %v %v %v %v %v\n", t.Kind, t.Kernel, t.BlockNum, t.Launch, t.Args, t.Scalars, t.Deps, t.Pred, t.Line)
	for i, a := range t.Args {
		if a.Tag == stages.TagOutput {
			t.Args[i].View.Root = stages.RootID(o.roots)
			o.roots++
		}
	}
	o.tasks++
	return stages.TaskID(o.tasks - 1)
}

func (o *logOrch) NumRoots() int { return o.roots }

func (o *logOrch) ScopeBegin(m stages.ScopeMode) { fmt.Fprintf(&o.log, "scope %v\n", m) }
func (o *logOrch) ScopeEnd()                     { o.log.WriteString("end\n") }
func (o *logOrch) Graph(c *stages.GraphCall) stages.TaskID {
	fmt.Fprintf(&o.log, "graph %s %v %v %v %v\n", c.Key, c.Config, c.Boundary, c.Scalars, c.ExtDeps)
	if err := c.Body(o, c.NewBoundary()); err != nil {
		fmt.Fprintf(&o.log, "body error %v\n", err)
	}
	return stages.TaskID(o.tasks - 1)
}

// generalOnly turns off m's boundary slots' fast forms (run_fast.go): every
// slot is evaluated by the general path.
func generalOnly(m *Model) {
	for _, b := range m.blocks {
		for i, f := range b.fastBoundary {
			b.fastBoundary[i] = fastSlot{kind: slotGeneral, tag: f.tag}
		}
	}
}

// FuzzFastMatchesGeneral holds the boundary slots' fast forms to the
// general path over whole runs: every form of every model that loads (the
// repository's models, the parse fuzzer's corpus, their mutations) submits
// the same tasks, allocs, scopes and Graph calls, boundaries and all, and
// fails with the same error, with the fast forms as without them.
// (TestFastBoundary compares the two slot by slot over the shipped
// models' blocks at chosen params; tests' TestCallsByTemplate the calls by
// template against the ordinary path.)
func FuzzFastMatchesGeneral(f *testing.F) {
	var paths []string
	for _, g := range []string{"models/*.yaml", "testdata/*/*.yaml", "../tests/testdata/*/*.yaml"} {
		ps, _ := filepath.Glob(g)
		paths = append(paths, ps...)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	corpus, _ := filepath.Glob("testdata/fuzz/FuzzParse/*")
	for _, p := range corpus {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if q, ok := strings.CutPrefix(line, "string("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(q, ")")); err == nil {
					f.Add(s)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		fast, err := Parse("fuzz.yaml", []byte(src))
		if err != nil {
			return
		}
		general, err := Parse("fuzz.yaml", []byte(src))
		if err != nil {
			t.Fatalf("parses once, not twice: %v", err)
		}
		generalOnly(general)
		fast.SetMaxTasks(1 << 14)
		general.SetMaxTasks(1 << 14)
		for _, form := range fast.Forms() {
			a, b := &logOrch{}, &logOrch{}
			errA, errB := fast.Run(a, form), general.Run(b, form)
			if fmt.Sprint(errA) != fmt.Sprint(errB) {
				t.Fatalf("form %s: %v with the fast forms, %v without", form, errA, errB)
			}
			if a.log.String() != b.log.String() {
				t.Fatalf("form %s: the fast forms submit\n%s\nthe general path\n%s", form, a.log.String(), b.log.String())
			}
		}
	})
}
