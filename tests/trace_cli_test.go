package tests

import (
	"cmp"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type gzTraceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args"`
	ID   int            `json:"id"`
}

// readGzipTrace reads a --trace-out file that must be gzip.
func readGzipTrace(t *testing.T, path string) []gzTraceEvent {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err, "a --trace-out name ending in .gz is gzip")
	var doc struct {
		TraceEvents []gzTraceEvent `json:"traceEvents"`
	}
	require.NoError(t, json.NewDecoder(zr).Decode(&doc))
	return doc.TraceEvents
}

// TestTraceOverlappedPassesApart walks the Chrome trace of 5 passes run
// two in flight: on no track does a slice of one pass lie inside (or
// across) a slice of another; the wait for the golden reference is a
// named span; only the first --trace-device-passes passes carry device
// slices, each on its own simulated clock, named by Graph key.
func TestTraceOverlappedPassesApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json.gz")
	_, stderr, code := runCLI(t, "run", "--rounds", "5", "--in-flight", "2", "--trace-out", path, "--trace-device-passes", "2", "--store", "off")
	require.Equal(t, 0, code, stderr)
	evs := readGzipTrace(t, path)
	procs := map[int]string{}
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "process_name" {
			procs[e.Pid] = e.Args["name"].(string)
		}
	}
	type slice struct {
		round      float64
		start, end float64
		name       string
	}
	tracks := map[[2]int][]slice{}
	golden, keyed, rounds := 0, 0, map[float64]bool{}
	for _, e := range evs {
		if e.Ph != "X" {
			continue
		}
		if e.Name == "golden_reference" {
			golden++
		}
		if procs[e.Pid] != "host" {
			if _, ok := e.Args["graph_key"]; ok {
				keyed++
			}
			continue
		}
		r, ok := e.Args["hbg.round"].(float64)
		if !ok {
			continue
		}
		rounds[r] = true
		k := [2]int{e.Pid, e.Tid}
		tracks[k] = append(tracks[k], slice{r, e.Ts, e.Ts + e.Dur, e.Name})
	}
	assert.Len(t, rounds, 5)
	assert.Positive(t, golden, "the golden reference's wait is a span")
	cov := hostCoverage(evs, procs)
	t.Logf("host slices cover %.1f%% of the trace", 100*cov)
	assert.GreaterOrEqual(t, cov, 0.9, "the host's slices leave holes in the trace")
	assert.Positive(t, keyed, "device slices name their Graph key")
	for k, ss := range tracks {
		for _, a := range ss {
			for _, b := range ss {
				if a.round != b.round && a.start < b.end && b.start < a.end {
					t.Errorf("track %v: round %v's %s [%.1f, %.1f] overlaps round %v's %s [%.1f, %.1f]",
						k, a.round, a.name, a.start, a.end, b.round, b.name, b.start, b.end)
				}
			}
		}
	}
	var device []string
	for _, p := range procs {
		if strings.Contains(p, "device") {
			device = append(device, p)
			assert.Contains(t, p, "simulated clock")
		}
	}
	assert.Len(t, device, 2, "--trace-device-passes 2: %v", device)
}

// TestTraceFlows: --trace-flows draws an arrow from each device task to
// every task that waited for it, each head after its tail (a consumer
// starts after its producer ends); without the flag there are none.
func TestTraceFlows(t *testing.T) {
	dir := t.TempDir()
	with, without := filepath.Join(dir, "flows.json.gz"), filepath.Join(dir, "plain.json.gz")
	_, stderr, code := runCLI(t, "run", "--rounds", "1", "--trace-out", with, "--trace-flows", "--store", "off")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = runCLI(t, "run", "--rounds", "1", "--trace-out", without, "--store", "off")
	require.Equal(t, 0, code, stderr)
	tails, heads := map[int]gzTraceEvent{}, map[int]gzTraceEvent{}
	for _, e := range readGzipTrace(t, with) {
		switch e.Ph {
		case "s":
			tails[e.ID] = e
		case "f":
			heads[e.ID] = e
		}
	}
	require.NotEmpty(t, tails, "no fanin arrow")
	assert.Equal(t, len(tails), len(heads))
	for id, s := range tails {
		f, ok := heads[id]
		require.True(t, ok, "arrow %v has no head", id)
		assert.GreaterOrEqual(t, f.Ts, s.Ts, "arrow %v points back in time", id)
	}
	for _, e := range readGzipTrace(t, without) {
		assert.NotContains(t, []string{"s", "f"}, e.Ph, "an arrow without --trace-flows")
	}
}

// hostCoverage is the share of the trace, from the process's start (its
// clock's 0) to its last host slice's end, that a host slice other than
// the command's and the runs' (which enclose everything) covers: the
// model's loading, the golden wait, the phases and the actors' work leave
// no stretch unexplained.
func hostCoverage(evs []gzTraceEvent, procs map[int]string) float64 {
	type iv struct{ lo, hi float64 }
	var ivs []iv
	for _, e := range evs {
		if e.Ph == "X" && procs[e.Pid] == "host" && e.Name != "hbgrun" && e.Name != "hbg.run" {
			ivs = append(ivs, iv{e.Ts, e.Ts + e.Dur})
		}
	}
	if len(ivs) == 0 {
		return 0
	}
	slices.SortFunc(ivs, func(a, b iv) int { return cmp.Compare(a.lo, b.lo) })
	covered, lo, hi := 0.0, ivs[0].lo, ivs[0].hi
	first, last := 0.0, ivs[0].hi
	for _, v := range ivs[1:] {
		last = max(last, v.hi)
		if v.lo > hi {
			covered += hi - lo
			lo, hi = v.lo, v.hi
			continue
		}
		hi = max(hi, v.hi)
	}
	covered += hi - lo
	return covered / (last - first)
}
