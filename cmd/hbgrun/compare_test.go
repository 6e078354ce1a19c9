package main

import (
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/trace"
)

// TestMsText: compare's values keep three significant digits below 0.1 ms
// (a sub-µs phase printed as 0.000 beside its ratio read as a ratio of
// zeros).
func TestMsText(t *testing.T) {
	for _, c := range []struct {
		ns   int64
		want string
	}{
		{0, "0.000"},
		{210, "0.000210"},
		{19_100, "0.0191"},
		{195_000, "0.195"},
		{39_902_000, "39.902"},
	} {
		if got := msText(c.ns); got != c.want {
			t.Errorf("msText(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
}

// TestCompareHeadline: compare's first line is its headline (the baseline's
// host_orch over the least control plane, golden for every form), its table
// has one unit, and the baseline's column is not called a saving. The code
// before began with "order:", printed ms beside "0.000361" and gave the
// baseline's own column a saving.
func TestCompareHeadline(t *testing.T) {
	rep := func(form string, hostOrch, cp int64, verdict string) *trace.Report {
		var passes []trace.Pass
		for round := range 3 {
			p := trace.Pass{Round: round, Cold: round == 0}
			p.Set(trace.PhaseArgs, 361)
			p.Set(trace.PhaseHostOrch, hostOrch)
			p.Set(trace.PhaseGraphUpload, cp-hostOrch)
			p.Set(trace.PhaseArenaH2D, 0)
			p.Set(trace.PhaseDeviceWall, 30_000_000)
			passes = append(passes, p)
		}
		r := trace.NewReport(trace.RunInfo{Model: "m", Form: form, Rounds: 3, Ranks: 1}, passes)
		r.Golden = &trace.Golden{Verdict: verdict}
		return r
	}
	rs := []*trace.Report{rep("eager", 9_000_000, 11_000_000, "match"), rep("pair", 1_000_000, 2_000_000, "match"), rep("full", 300_000, 400_000, "match")}
	var b strings.Builder
	if err := writeCompare(&b, rs, 3); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	want := "headline: full saves 22.5x: eager host_orch 9.000 ms per pass, full control plane 0.400 ms (warm medians); golden match for all 3 forms"
	if lines[0] != want {
		t.Errorf("first line\n%q\nwant\n%q", lines[0], want)
	}
	out := b.String()
	if table := strings.Join(lines[1:], "\n"); !strings.Contains(table, "median µs") || strings.Contains(table, " ms") {
		t.Errorf("table not in µs:\n%s", out)
	}
	if !strings.Contains(out, "0.36 ") || strings.Contains(out, "0.000361") {
		t.Errorf("args not as µs:\n%s", out)
	}
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "saving") && !strings.Contains(l, "baseline") {
			t.Errorf("the baseline's saving cell is a figure: %q", l)
		}
	}
	rs[1].Golden.Verdict = "mismatch"
	if h := compareHeadline(rs); !strings.HasSuffix(h, "; golden match for eager, full, mismatch for pair") {
		t.Errorf("headline %q", h)
	}
}
