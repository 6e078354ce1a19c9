package tests

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nestModels are every model a user is shown: config/models and the
// test models.
func nestModels(t *testing.T) []string {
	t.Helper()
	root := jaegerRepoRoot(t)
	var ms []string
	for _, glob := range []string{"config/models/*.yaml", "tests/testdata/models/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		require.NoError(t, err)
		ms = append(ms, m...)
	}
	require.NotEmpty(t, ms)
	return ms
}

// unnested says where slices on one track overlap without one containing
// the other (what a viewer draws as a child that sticks out of its
// parent), "" when every track nests.
func unnested(evs []gzTraceEvent, procs map[int]string, tracks map[[2]int]string) []string {
	type sl struct {
		start, end float64
		name       string
	}
	by := map[[2]int][]sl{}
	for _, e := range evs {
		if e.Ph == "X" {
			k := [2]int{e.Pid, e.Tid}
			by[k] = append(by[k], sl{e.Ts, e.Ts + e.Dur, e.Name})
		}
	}
	var bad []string
	for k, ss := range by {
		slices.SortStableFunc(ss, func(a, b sl) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end)) })
		// open is the stack of slices that contain the next one's start.
		var open []sl
		for _, s := range ss {
			for len(open) > 0 && open[len(open)-1].end <= s.start {
				open = open[:len(open)-1]
			}
			if len(open) > 0 && open[len(open)-1].end < s.end {
				p := open[len(open)-1]
				bad = append(bad, procs[k[0]]+" / "+tracks[k]+": "+p.name+" and "+s.name+" overlap without nesting")
				continue
			}
			open = append(open, s)
		}
	}
	slices.Sort(bad)
	return bad
}

// TestTraceNestsEveryModel: on every track of every model's --trace-out
// (the host's tracks and the simulated device's cores) no two slices
// overlap unless one contains the other.
func TestTraceNestsEveryModel(t *testing.T) {
	for _, m := range nestModels(t) {
		t.Run(strings.TrimSuffix(filepath.Base(m), ".yaml"), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.json.gz")
			_, stderr, code := runCLI(t, "run", m, "--rounds", "3", "--ranks", "2", "--in-flight", "2",
				"--trace-out", path, "--trace-device-passes", "3", "--store", "off")
			if code != 0 {
				// A model that fails its run (a race it declares) still
				// writes its trace; one that wrote none is the failure.
				if _, err := os.Stat(path); err != nil {
					t.Fatalf("exit %d and no trace: %s", code, stderr)
				}
			}
			evs := readGzipTrace(t, path)
			procs, tracks := map[int]string{}, map[[2]int]string{}
			for _, e := range evs {
				switch {
				case e.Ph == "M" && e.Name == "process_name":
					procs[e.Pid] = e.Args["name"].(string)
				case e.Ph == "M" && e.Name == "thread_name":
					tracks[[2]int{e.Pid, e.Tid}] = e.Args["name"].(string)
				}
			}
			bad := unnested(evs, procs, tracks)
			if len(bad) > 0 {
				t.Errorf("%d overlaps, first: %s", len(bad), strings.Join(bad[:min(len(bad), 8)], "\n"))
			}
		})
	}
}
