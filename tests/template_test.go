package tests

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// wholeSubmitter is a hostSubmitter that takes no call by template: the
// interpreter evaluates every Graph boundary whole, as before templates.
type wholeSubmitter struct{ hostSubmitter }

func (s wholeSubmitter) GraphLocs() {} // hides hostSubmitter's LocWriter

var (
	_ stages.LocWriter = hostSubmitter{}
	_ stages.Submitter = wholeSubmitter{}
)

// TestCallsByTemplate: every form of every model builds, pass for pass, the
// same run image bytes and counts when its Graph calls pass their
// boundaries by template (a warm call replayed with no layout compared) as
// when they pass them whole; a warm DSv4 full pass replays all 86 of its
// calls by template, none materialized; and a call site whose tensor
// param changes layout or root size under its template falls back and
// mismatches as a call passed whole does.
func TestCallsByTemplate(t *testing.T) {
	paths, err := filepath.Glob("testdata/models/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatal(paths, err)
	}
	const shifting = "testdata/template/shifting.yaml"
	paths = append(paths, dsv4, qwen3, shifting)
	for _, path := range paths {
		m, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range m.Forms() {
			t.Run(filepath.Base(path)+"/"+form, func(t *testing.T) {
				orch := orchestration(m, form)
				ht, hw := stages.NewHost(0, stages.PassConfig{SkipDevice: true}), stages.NewHost(0, stages.PassConfig{SkipDevice: true})
				var rt, rw stages.Recorder
				for round := range 3 {
					pt := hostPass(t, ht, &rt, orch, round, hostSubmitter{ht})
					pw := hostPass(t, hw, &rw, orch, round, wholeSubmitter{hostSubmitter{hw}})
					if pt.Counts != pw.Counts {
						t.Fatalf("round %d: counts %+v by template, %+v whole", round, pt.Counts, pw.Counts)
					}
					if !bytes.Equal(stages.EncodeRunImage(pt.Image), stages.EncodeRunImage(pw.Image)) {
						t.Fatalf("round %d: the run images differ", round)
					}
					if pw.ByTemplate() != 0 {
						t.Fatalf("round %d: %d calls by template through a Submitter that takes none", round, pw.ByTemplate())
					}
					if round == 2 && path == dsv4 && form == "full" && pt.ByTemplate() != 86 {
						t.Errorf("warm DSv4 full: %d of 86 Graph calls replayed by template", pt.ByTemplate())
					}
					// Its call site passes a layout that does not fit the
					// template and a root of another size: both mismatch,
					// and the calls between them replay by template.
					if round == 2 && path == shifting && form == "graph" && (pt.Counts.BoundaryMismatches != 6 || pt.ByTemplate() != 6) {
						t.Errorf("shifting: %d boundary mismatches and %d calls by template, want 6 and 6", pt.Counts.BoundaryMismatches, pt.ByTemplate())
					}
				}
			})
		}
	}
}

// hostPass runs one pass of orch on h through s, recording what it asks
// for in line.
func hostPass(t *testing.T, h *stages.Host, rec *stages.Recorder, orch *actors.Orchestration, round int, s stages.Submitter) *stages.Pass {
	t.Helper()
	h.Begin(orch.Name, orch.Entry, len(orch.Kernels), round)
	err := orch.Run(s)
	ls := recordJobs(t, h, rec)
	p := h.End(err)
	if err != nil || p.Err != nil {
		t.Fatal(err, p.Err)
	}
	h.Learn(ls)
	return p
}
