package trace

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeadline pins the one line `hbgrun run` prints first, with and
// without the ordinary path measured.
func TestHeadline(t *testing.T) {
	r := sampleReport()
	cp := r.Phases.ControlPlane
	require.Positive(t, cp.N)
	assert.Equal(t, "dsv4_flash_decode blocks: control plane "+ms(cp.MedianNs)+" ms per pass (warm median of 8); "+
		"the ordinary path's host_orch not measured here (hbgrun compare measures it); golden match, 0 races; device wall 53.306 ms (simulated)",
		r.Headline())

	saving := 30.5
	r.Baseline = &Baseline{Form: "eager", HostOrchNs: 7_310_000, Saving: &saving}
	r.Golden.DeclaredRaces = 12
	assert.Equal(t, "dsv4_flash_decode blocks: control plane "+ms(cp.MedianNs)+" ms per pass (warm median of 8); "+
		"eager host_orch 7.310 ms, 30.5x saving; golden match, 0 races (12 declared); device wall 53.306 ms (simulated)",
		r.Headline())

	r.Sim, r.Golden = nil, nil
	r.Phases.Phases[PhaseDeviceWall] = Stat{}
	r.ColdPhases.Phases[PhaseDeviceWall] = Stat{}
	assert.True(t, strings.HasSuffix(r.Headline(), "; golden not checked; device skipped"), r.Headline())
}

// TestTextBrief: without -v the headline leads and the all-zero rows are
// left out; with it every row is there, as before.
func TestTextBrief(t *testing.T) {
	r := sampleReport()
	var brief, all bytes.Buffer
	require.NoError(t, r.WriteTextRows(&brief, false))
	require.NoError(t, r.WriteTextRows(&all, true))
	first, _, _ := strings.Cut(brief.String(), "\n")
	assert.Equal(t, r.Headline(), first)
	for _, row := range []string{"store_load", "peer_fetch", "fetched_definitions", "loaded_definitions"} {
		assert.NotContains(t, brief.String(), row)
		assert.Contains(t, all.String(), row)
	}
	assert.Contains(t, brief.String(), "submit_task")
	var plain bytes.Buffer
	require.NoError(t, r.WriteText(&plain))
	assert.Equal(t, r.Headline()+"\n"+plain.String(), all.String())
}

// TestDeviceTimelineMerges: slices a column wide or more stay as they
// are; narrower ones on a core merge, one segment per column, named by the
// key that kept the core busiest.
func TestDeviceTimelineMerges(t *testing.T) {
	sl := []TimelineSlice{
		{Core: 1, StartNs: 0, DurNs: 300, Key: "a", Kernel: "k1"},
		{Core: 1, StartNs: 300, DurNs: 10, Key: "b"},
		{Core: 1, StartNs: 310, DurNs: 30, Key: "a"},
		{Core: 1, StartNs: 340, DurNs: 20, Key: "b"},
		{Core: 1, StartNs: 500, DurNs: 50, Key: ""},
		{Core: 0, StartNs: 0, DurNs: 1000, Key: "", Kernel: "k0"},
	}
	tl := NewDeviceTimeline(sl, 1000, 10, func(c int) string { return CoreName(c, 1) })
	assert.Equal(t, []string{"", "a", "b"}, tl.Keys)
	require.Len(t, tl.Cores, 2)
	assert.Equal(t, "aic 0", tl.Cores[0].Name)
	assert.Equal(t, []TimelineSegment{{StartNs: 0, DurNs: 1000, BusyNs: 1000, Key: 0, Slices: 1, Kernel: "k0"}}, tl.Cores[0].Segments)
	assert.Equal(t, []TimelineSegment{
		{StartNs: 0, DurNs: 300, BusyNs: 300, Key: 1, Slices: 1, Kernel: "k1"},
		{StartNs: 300, DurNs: 60, BusyNs: 60, Key: 1, Slices: 3},
		{StartNs: 500, DurNs: 50, BusyNs: 50, Key: 0, Slices: 1},
	}, tl.Cores[1].Segments)
	assert.Equal(t, int64(410), tl.Cores[1].BusyNs)
	assert.Equal(t, 6, tl.Slices)
}

// TestHeadlineEagerRaces: a Graph form with no race of its own whose eager
// form races says so (the code before headlined "golden match, 0 races").
func TestHeadlineEagerRaces(t *testing.T) {
	p := Pass{Cold: true}
	p.Set(PhaseHostOrch, 1000)
	r := NewReport(RunInfo{Model: "m", Form: "full", Rounds: 1, Ranks: 1}, []Pass{p})
	r.Golden = &Golden{Reference: "inline twin", Verdict: "match", EagerRaces: 3}
	if h := r.Headline(); !strings.Contains(h, "golden match, 0 races, but its eager form races (3 races)") {
		t.Errorf("headline %q", h)
	}
}
