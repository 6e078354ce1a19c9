package analyze_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/analyze"
)

// TestProposeRepeatedWithholdsNoise: three calibrations of DSv4 a Graph
// replay apart (one where replaying costs more than submitting) propose
// nothing: the median saving is within the spread; the same costs three
// times keep the proposal (a spread of 0).
func TestProposeRepeatedWithholdsNoise(t *testing.T) {
	maps := dsv4(t)
	steady := []analyze.Costs{seedCosts, seedCosts, seedCosts}
	_, p, n := analyze.ProposeRepeated(maps, steady, analyze.DefaultHorizon)
	if n.Withheld != "" || n.SpreadNs != 0 || n.MedianSavingNs <= 0 || len(p.Graphs) == 0 {
		t.Fatalf("steady costs: %+v, %d Graphs; want a proposal with no spread", n, len(p.Graphs))
	}
	dear, cheap := seedCosts, seedCosts
	dear.SubmitNs, dear.SubmitSmallNs, dear.AllocNs, dear.AllocSmallNs = 5, 5, 5, 5
	cheap.ReplayNs = 1
	noisy := []analyze.Costs{dear, seedCosts, cheap}
	_, _, n = analyze.ProposeRepeated(maps, noisy, analyze.DefaultHorizon)
	if n.Withheld == "" || !strings.Contains(n.Withheld, "within the noise") {
		t.Fatalf("noisy costs: %+v; want the proposal withheld as within the noise", n)
	}
	r := &analyze.Report{Map: maps[0], Costs: &dear, Noise: &n}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no form proposed") || strings.Contains(b.String(), "proposed by hbgrun analyze") {
		t.Errorf("the text proposes a form the noise withheld:\n%s", b.String())
	}
}

// TestZeroRateIsNoFigure: a rate the calibration left at 0 prints as "—",
// never "0.000 ns/byte".
func TestZeroRateIsNoFigure(t *testing.T) {
	c := seedCosts
	c.UploadByteNs = 0
	var b bytes.Buffer
	if err := (&analyze.Report{Map: dsv4(t)[0], Costs: &c}).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "0.000") || !strings.Contains(b.String(), "upload —/byte") {
		t.Errorf("a zero rate printed as a figure:\n%s", b.String())
	}
}
