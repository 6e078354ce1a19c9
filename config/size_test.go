package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// issue35Model is issue 35's model: a loop of 4000 declaring task lists of
// i*256+1 elements, 2·10^9 elements in all. The sizer multiplied the loop
// out as its first iteration's (bodyVaries ignored tasks: sizes): 1 task,
// then a run of 3-4 s where the work bound exists to refuse it.
const issue35Model = langHeader + `program:
  body:
    - loop: {var: i, to: 4000}
      body:
        - tasks: {L: "i*256+1"}
    - {k: act, args: ["inout x"]}
forms:
  eager: {}
`

// TestWorkOfTaskListsRefused: issue 35's model is refused before it runs,
// naming its loop, in well under a second. Fails on the code before (the
// sizer let it run).
func TestWorkOfTaskListsRefused(t *testing.T) {
	m, err := config.Parse("w.yaml", []byte(issue35Model))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = m.Run(&nopOrch{}, "eager")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused after %v", d)
	}
	wantConfigError(t, err, "w.yaml", lineOf(issue35Model, "loop: {var: i, to: 4000}"), []string{`loop.to "4000"`, "a loop of 4000 iterations", "max_tasks"})
}

// corpusSeeds reads a fuzz corpus directory's string inputs.
func corpusSeeds(tb testing.TB, dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	var out []string
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if q, ok := strings.CutPrefix(line, "string("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(q, ")")); err == nil {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// FuzzSizeMatchesRun holds the sizer to the runner: for every model that
// loads (the parse fuzzer's seeds and corpus, the issue's model, and their
// mutations) and every form, a pass the sizer passes runs, and when it
// runs to its end the runner's own count of what it did (tasks submitted;
// work: tasks, loop iterations, task list elements) is the sizer's.
func FuzzSizeMatchesRun(f *testing.F) {
	seeds := append(parseSeeds(f), corpusSeeds(f, "testdata/fuzz/FuzzParse")...)
	seeds = append(seeds, issue35Model, strings.Replace(issue35Model, "to: 4000", "to: 40", 1),
		strings.Replace(strings.Replace(issue35Model, "to: 4000", "to: 9", 1), `tasks: {L: "i*256+1"}`, `tasks: {L: "i+1"}
        - set: {"L[0:+i+1]": "L[0]"}
        - if: "i % 3"
          body:
            - {k: act, args: ["inout x"]}`, 1))
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		m, err := config.Parse("fuzz.yaml", []byte(src))
		if err != nil {
			return
		}
		m.SetMaxTasks(4096)
		for _, form := range m.Forms() {
			size, ran, sizeErr, runErr := config.SizeAndRun(m, form)
			if sizeErr != nil || runErr != nil {
				if sizeErr == nil && size[0] <= 4096 && strings.Contains(runErr.Error(), "max_tasks") {
					t.Fatalf("form %s: the sizer passes %v, the run refuses it: %v", form, size, runErr)
				}
				continue // a pass refused, or one that fails midway, did not run whole
			}
			if size != ran {
				t.Fatalf("form %s: the sizer counts %v (tasks, work), the runner did %v", form, size, ran)
			}
			checkEdgeBound(t, m, form)
		}
	})
}

// checkEdgeBound holds the edge bound to validate's count of a form's
// dependency edges (the ordinary path's fanin, Graph bodies inline): a
// bound of exactly the count passes, one less is refused with
// stages.ErrTooManyEdges.
func checkEdgeBound(t *testing.T, m *config.Model, form string) {
	t.Helper()
	defer m.LimitEdges(0)
	m.LimitEdges(0)
	sum, err := config.Validate(m)
	if err != nil {
		return // another form's mistake, or the Graph checks
	}
	edges := -1
	for _, f := range sum.Forms {
		if f.Name == form {
			edges = f.Edges
		}
	}
	if edges < 1 {
		return // a hidden form, or nothing to bound
	}
	m.LimitEdges(int64(edges))
	if _, err := config.ValidateForm(m, form); err != nil {
		t.Fatalf("form %s: a bound of its %d edges refused it: %v", form, edges, err)
	}
	m.LimitEdges(int64(edges - 1))
	if _, err := config.ValidateForm(m, form); !errors.Is(err, stages.ErrTooManyEdges) {
		t.Fatalf("form %s: a bound of %d under its %d edges: %v, want ErrTooManyEdges", form, edges-1, edges, err)
	}
}
