package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromeDoc is the trace-event JSON as a reader sees it.
type chromeDoc struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  *float64       `json:"dur"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	DisplayTimeUnit string `json:"displayTimeUnit"`
}

// threads maps pid → tid → thread name, from the metadata events.
func (d *chromeDoc) threads() (procs map[int]string, threads map[int]map[int]string) {
	procs, threads = map[int]string{}, map[int]map[int]string{}
	for _, e := range d.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			procs[e.Pid] = e.Args["name"].(string)
		case e.Ph == "M" && e.Name == "thread_name":
			if threads[e.Pid] == nil {
				threads[e.Pid] = map[int]string{}
			}
			threads[e.Pid][e.Tid] = e.Args["name"].(string)
		}
	}
	return procs, threads
}

// deviceSlices is what the simulator hands over: per-core kernels of one
// rank, cores 0, 2 and 10 busy (core 1 idle, so it gets no track).
func deviceSlices(rank int, shift int64) []Slice {
	proc := fmt.Sprintf("rank %d device (simulated)", rank)
	var out []Slice
	for _, core := range []int{10, 2, 0} { // out of order on purpose
		for k := range 3 {
			out = append(out, Slice{
				Process: proc, Track: fmt.Sprintf("aiv %d", core),
				Name:    fmt.Sprintf("kernel_%d", k),
				StartNs: shift + int64(k*1000+core), DurNs: 900,
				Args: map[string]any{"task": k},
			})
		}
	}
	return out
}

func TestChromeTraceFromSpansAndDevice(t *testing.T) {
	p, _ := recorded(t, true)
	runShape(t, p.Tracer(), 2, 2)
	host := p.Slices()
	require.NotEmpty(t, host)

	slices := append(host, deviceSlices(0, 5000)...)
	slices = append(slices, deviceSlices(1, 5000)...)
	var buf bytes.Buffer
	require.NoError(t, WriteChromeTrace(&buf, slices))

	var doc chromeDoc
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc), "output is trace-event JSON")
	procs, threads := doc.threads()
	require.Equal(t, map[int]string{1: "host", 2: "rank 0 device (simulated)", 3: "rank 1 device (simulated)"}, procs)

	hostTracks := map[string]bool{}
	for _, name := range threads[1] {
		hostTracks[name] = true
	}
	assert.Equal(t, map[string]bool{"hbgrun": true, "rank 0": true, "rank 1": true, "recorder-1": true, "builder": true, "uploader": true}, hostTracks)
	for pid := 2; pid <= 3; pid++ {
		var cores []string
		for tid := range len(threads[pid]) + 10 {
			if name, ok := threads[pid][tid]; ok {
				cores = append(cores, name)
			}
		}
		assert.Equal(t, []string{"aiv 0", "aiv 2", "aiv 10"}, cores, "one track per core that did work, in core order")
	}

	perTrack := map[[2]int][]string{}
	lastTs := map[[2]int]float64{}
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		require.NotNil(t, e.Dur)
		k := [2]int{e.Pid, e.Tid}
		assert.GreaterOrEqual(t, e.Ts, lastTs[k], "slices of a track are written by start")
		lastTs[k] = e.Ts
		perTrack[k] = append(perTrack[k], e.Name)
	}
	var rank0 []string
	for tid, name := range threads[1] {
		if name == "rank 0" {
			rank0 = perTrack[[2]int{1, tid}]
		}
	}
	assert.Equal(t, []string{SpanRun,
		"args", "host_orch", "graph_upload", "arena_h2d", "device_wall",
		"args", "host_orch", "graph_upload", "arena_h2d", "device_wall"}, rank0,
		"the run encloses its phases, pass after pass")
}

func TestChromeTraceGolden(t *testing.T) {
	slices := []Slice{
		{Process: "host", Track: "rank 0", Name: "hbg.run", StartNs: 0, DurNs: 10_000, Args: map[string]any{"hbg.rank": 0}},
		{Process: "host", Track: "rank 0", Name: "host_orch", StartNs: 1_000, DurNs: 4_000},
		{Process: "host", Track: "rank 0", Name: "args", StartNs: 0, DurNs: 1_000},
		{Process: "host", Track: "recorder-1", Name: "record", StartNs: 1_500, DurNs: 2_500, Args: map[string]any{"hbg.graph.key": "attn"}},
	}
	slices = append(slices, deviceSlices(0, 6_000)[:4]...)
	var buf bytes.Buffer
	require.NoError(t, WriteChromeTrace(&buf, slices))
	golden(t, "chrome.json", buf.Bytes())

	// The output depends on the slices, not on their order within a track.
	swapped := append([]Slice(nil), slices...)
	swapped[1], swapped[2] = swapped[2], swapped[1]
	var again bytes.Buffer
	require.NoError(t, WriteChromeTrace(&again, swapped))
	assert.Equal(t, buf.String(), again.String())
}

func TestChromeTraceEmpty(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteChromeTrace(&buf, nil))
	assert.JSONEq(t, `{"traceEvents":[]}`, buf.String(), "no displayTimeUnit: timestamps are µs")
}

func TestNaturalCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"aic 2", "aic 10", -1},
		{"aic 10", "aic 2", 1},
		{"aic 2", "aiv 0", -1},
		{"rank 1", "rank 1", 0},
		{"core", "core 0", -1},
		{"x1", "x01", -1},
		{"recorder-9", "recorder-10", -1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, naturalCompare(tt.a, tt.b), "%q vs %q", tt.a, tt.b)
	}
}

// TestNestLanes: two uploads in flight at once on one track go to lanes
// apart; a slice inside another and one after it stay on the track.
func TestNestLanes(t *testing.T) {
	in := []Slice{
		{Process: "host", Track: "uploader-1", Name: "a", StartNs: 0, DurNs: 100},
		{Process: "host", Track: "uploader-1", Name: "b", StartNs: 10, DurNs: 100},
		{Process: "host", Track: "uploader-1", Name: "a.child", StartNs: 20, DurNs: 10},
		{Process: "host", Track: "uploader-1", Name: "c", StartNs: 200, DurNs: 5},
		{Process: "host", Track: "uploader-1", Name: "d", StartNs: 50, DurNs: 100},
	}
	got := map[string]string{}
	for _, s := range NestLanes(in) {
		got[s.Name] = s.Track
	}
	assert.Equal(t, map[string]string{
		"a": "uploader-1", "a.child": "uploader-1", "c": "uploader-1",
		"b": "uploader-1 lane 2", "d": "uploader-1 lane 3",
	}, got)
	assert.Equal(t, "uploader-1", in[1].Track, "the input is not changed")
}
