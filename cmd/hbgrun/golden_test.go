package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/stages"
)

// testFlags parses args as run's flags, with the disk store off.
func testFlags(t *testing.T, args ...string) *runFlags {
	t.Helper()
	var f runFlags
	c := &cobra.Command{}
	f.register(c, true)
	if err := c.Flags().Parse(append([]string{"--store", "off", "--rounds", "1", "--recorders", "2"}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := f.check(); err != nil {
		t.Fatal(err)
	}
	return &f
}

// wrongScalar patches the first Graph submission that passes a boundary
// scalar with another value: a replay that would compute something else.
func wrongScalar(img *stages.RunImage) {
	for _, g := range img.Graphs {
		if g.Scalars.N > 0 {
			img.Scalars[g.Scalars.Off]++
			return
		}
	}
}

// exitsOne checks that err is what main exits 1 for: a failed golden check,
// not a user's mistake (exit 2).
func exitsOne(t *testing.T, err error, want ...string) {
	t.Helper()
	var ue usageError
	var gf goldenFailed
	if err == nil || errors.As(err, &ue) || !errors.As(err, &gf) {
		t.Fatalf("got %v, want a failed golden check (exit 1)", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not name %q", err, w)
		}
	}
}

// TestGoldenMismatchFailsRun: a replay patched with a wrong scalar makes
// run and compare fail (exit 1), naming the first differing root interval
// and its last writer in each run. The race detector is off, so that the
// default model's races (tests/race_test.go) do not decide the verdict.
func TestGoldenMismatchFailsRun(t *testing.T) {
	ctx := context.Background()
	f := testFlags(t, "--race=false")
	var out bytes.Buffer
	if err := runCmd(ctx, &out, io.Discard, "", f); err != nil {
		t.Fatalf("untampered: %v", err)
	}
	if !strings.Contains(out.String(), "golden: match (digest ") {
		t.Fatalf("untampered report:\n%s", out.String())
	}

	f.tamper = wrongScalar
	out.Reset()
	err := runCmd(ctx, &out, io.Discard, "", f)
	exitsOne(t, err, "golden: mismatch against the inline twin", "first difference in root", "here, by ")
	if !strings.Contains(out.String(), "golden: MISMATCH") || !strings.Contains(out.String(), "golden: first difference in root") {
		t.Errorf("report:\n%s", out.String())
	}

	out.Reset()
	err = compareCmd(ctx, &out, io.Discard, "", []string{"full"}, 1, f)
	exitsOne(t, err, "form full", "golden: mismatch")
	if !strings.Contains(out.String(), "mismatch") {
		t.Errorf("compare table:\n%s", out.String())
	}
}

// TestCompareRunsItsReference: compare --forms full checks full against its
// own inline twin, not against itself.
func TestCompareRunsItsReference(t *testing.T) {
	f := testFlags(t, "--race=false", "--json")
	var out bytes.Buffer
	if err := compareCmd(context.Background(), &out, io.Discard, "", []string{"full"}, 1, f); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"reference": "inline twin"`, `"verdict": "match"`, `"reference_tasks": 15972`} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("no %s in\n%.2000s", w, out.String())
		}
	}
}

// TestRaceLinesNameOps: every race line of run's report, the form's own
// and the eager form's alike, names both tasks by the model file:line of
// the op that submitted each and by kernel, and the error's first race
// reads as the first race line. Qwen3's eager form races across layers;
// its graph form does not, but its eager reference does (the eager race
// lines).
func TestRaceLinesNameOps(t *testing.T) {
	const model = "../../config/models/qwen3_14b_decode.yaml"
	task := `task \d+( \(graph "[^"]+" node \d+\))? \[` + regexp.QuoteMeta(model) + `:\d+\] [a-z][a-z0-9_]* (arg \d+ \([a-z]+\)|predicate)`
	line := regexp.MustCompile(`^(eager )?race: ((write-write|read-write) on (root \d+|internal root \d+ of GRAPH task \d+) \[\d+, \d+\): ` + task + ` and ` + task + `)$`)
	for _, c := range []struct {
		form   string
		prefix string
		fails  bool
	}{
		{"eager", "race: ", true},
		{"graph", "eager race: ", false},
	} {
		t.Run(c.form, func(t *testing.T) {
			var out bytes.Buffer
			err := runCmd(context.Background(), &out, io.Discard, model, testFlags(t, "--form", c.form))
			var first string
			n := 0
			for _, l := range strings.Split(out.String(), "\n") {
				if !strings.Contains(l, "race: ") || strings.Contains(l, " more") {
					continue
				}
				m := line.FindStringSubmatch(l)
				if m == nil || !strings.HasPrefix(l, c.prefix) {
					t.Errorf("race line names no op or kernel of a side: %s", l)
					continue
				}
				if n == 0 {
					first = m[3] + " race " + strings.TrimPrefix(m[2], m[3]+" ")
				}
				n++
			}
			if n == 0 {
				t.Fatalf("no %slines in\n%s", c.prefix, out.String())
			}
			if !c.fails {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			exitsOne(t, err, "golden: racy", "; first: "+first)
		})
	}
}
