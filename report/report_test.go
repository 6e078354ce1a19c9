package report

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/trace"
)

func sample(form string, hostOrch int64) *trace.Report {
	var passes []trace.Pass
	for round := range 3 {
		p := trace.Pass{Rank: 0, Round: round, Cold: round == 0}
		p.Set(trace.PhaseArgs, 1000)
		p.Set(trace.PhaseHostOrch, hostOrch+int64(round))
		p.Set(trace.PhaseGraphUpload, 20_000)
		p.Set(trace.PhaseArenaH2D, 4000)
		p.Set(trace.PhaseDeviceWall, 68_000_000)
		passes = append(passes, p)
	}
	r := trace.NewReport(trace.RunInfo{Model: "m<odel>", Form: form, Rounds: 3, Ranks: 1}, passes)
	r.Golden = &trace.Golden{Reference: "inline twin", Verdict: "match", Races: 0, DeclaredRaces: 3}
	r.Warnings = append(r.Warnings, `a <b>warning</b> & "quotes"`)
	r.Timeline = trace.NewDeviceTimeline([]trace.TimelineSlice{
		{Core: 0, StartNs: 0, DurNs: 40_000_000, Key: "attn", Kernel: "mm"},
		{Core: 30, StartNs: 1000, DurNs: 10, Key: ""},
	}, 68_000_000, 1000, func(c int) string { return trace.CoreName(c, 24) })
	return r
}

// TestPageSelfContained: the page loads nothing (no script, no link, no
// remote url) and escapes what the model and warnings say.
func TestPageSelfContained(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Write(&b, Compare([]*trace.Report{sample("eager", 9_000_000), sample("full", 200_000)})))
	html := b.String()
	for _, bad := range []string{"<script", "<link", "src=", "@import", "http://", "https://"} {
		if bad == "http://" {
			// The SVG namespace is a name, not a load.
			html := regexp.MustCompile(`xmlns="http://www.w3.org/2000/svg"`).ReplaceAllString(html, "")
			assert.NotContains(t, html, bad)
			continue
		}
		assert.NotContains(t, html, bad)
	}
	for _, m := range regexp.MustCompile(`url\(([^)]*)\)`).FindAllStringSubmatch(html, -1) {
		assert.Equal(t, "#idle", m[1], "only the page's own pattern")
	}
	assert.NotContains(t, html, "<b>warning")
	assert.Contains(t, html, "a &lt;b&gt;warning&lt;/b&gt; &amp;")
	assert.Contains(t, html, "m&lt;odel&gt;")
}

// TestPageHeadlineValues: every headline figure carries the report's exact
// value.
func TestPageHeadlineValues(t *testing.T) {
	full := sample("full", 200_000)
	var b bytes.Buffer
	require.NoError(t, Write(&b, Run(full)))
	html := b.String()
	value := func(field string) string {
		m := regexp.MustCompile(`data-field="` + field + `" data-value="([^"]*)"`).FindStringSubmatch(html)
		require.NotNil(t, m, field)
		return m[1]
	}
	assert.Equal(t, strconv.FormatInt(full.Phases.ControlPlane.MedianNs, 10), value("control_plane_median_ns"))
	assert.Equal(t, "match", value("golden_verdict"))
	assert.Equal(t, "0", value("races"))
	assert.Equal(t, "68000000", value("device_wall_ns"))
	assert.Contains(t, html, "attn")
	assert.Contains(t, html, "ordinary tasks")
}

// TestPageNoTimelineSaysWhy: a report whose device ran but kept no timeline
// (run --json without --html) does not say the device was skipped (the
// code before did), and one whose device was skipped says so.
func TestPageNoTimelineSaysWhy(t *testing.T) {
	r := sample("full", 200_000)
	r.Timeline = nil
	var b bytes.Buffer
	require.NoError(t, Write(&b, Run(r)))
	assert.NotContains(t, b.String(), "skipped")
	assert.Contains(t, b.String(), "The device ran (device wall 68.000 ms simulated)")

	var passes []trace.Pass
	p := trace.Pass{Cold: true}
	p.Set(trace.PhaseHostOrch, 1000)
	passes = append(passes, p)
	skipped := trace.NewReport(trace.RunInfo{Model: "m", Form: "f", Rounds: 1, Ranks: 1}, passes)
	b.Reset()
	require.NoError(t, Write(&b, Run(skipped)))
	assert.Contains(t, b.String(), "the device did not run")
}

// TestPageOneScale: the cold and warm charts share one scale (the cold
// pass's longer host_orch is a longer bar), both carry an axis, and the
// header counts in the singular when there is one rank.
func TestPageOneScale(t *testing.T) {
	r := sample("full", 200_000)
	r.Passes[0].Set(trace.PhaseHostOrch, 2_000_000)
	var b bytes.Buffer
	require.NoError(t, Write(&b, Run(r)))
	html := b.String()
	assert.Contains(t, html, "3 rounds x 1 rank,")
	assert.NotContains(t, html, "1 ranks")
	widths := regexp.MustCompile(`<rect x="[0-9.]+" y="[0-9]+" width="([0-9.]+)" height="14" fill="#2f6db5"><title>rank 0 round (\d)`).FindAllStringSubmatch(html, -1)
	require.Len(t, widths, 3)
	w := map[string]float64{}
	for _, m := range widths {
		w[m[2]], _ = strconv.ParseFloat(m[1], 64)
	}
	assert.Greater(t, w["0"], 5*w["1"], "the cold bar is drawn to the warm bars' scale")
	assert.Equal(t, 2, strings.Count(html, "ms host time"), "an axis under each chart")
}

// TestPageAliveLine: a run's Definitions alive over rounds is a line of
// one point a round, scaled to the most; a run of one round draws none.
func TestPageAliveLine(t *testing.T) {
	r := sample("full", 200_000)
	r.Counts.DefinitionsAlive = []int{0, 2, 3, 3, 1}
	var b bytes.Buffer
	require.NoError(t, Write(&b, Run(r)))
	m := regexp.MustCompile(`<polyline class="alive" data-rounds="(\d+)" data-max="(\d+)" points="([^"]*)"`).FindStringSubmatch(b.String())
	require.NotNil(t, m, "no alive line")
	assert.Equal(t, "5", m[1])
	assert.Equal(t, "3", m[2])
	assert.Len(t, strings.Fields(m[3]), 5)
	assert.Contains(t, b.String(), "Definitions alive over rounds")
	r.Counts.DefinitionsAlive = []int{4}
	b.Reset()
	require.NoError(t, Write(&b, Run(r)))
	assert.NotContains(t, b.String(), `class="alive"`)
}
