package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/report"
	"github.com/hbg-dev/hbg/trace"
)

func init() {
	var f runFlags
	var forms string
	var block int
	c := &cobra.Command{
		Use:   "compare [MODEL]",
		Short: "Run several forms of a model in one process and print each phase's median with its ratio to the first form",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if block < 0 {
				return usageError{fmt.Errorf("--block %d: want 0 (all the rounds) or more", block)}
			}
			if block == 0 || block > f.rounds {
				block = f.rounds
			}
			var list []string // empty: the model's forms
			if forms != "" {
				list = strings.Split(forms, ",")
				for i := range list {
					list[i] = strings.TrimSpace(list[i])
					// A form named twice is more likely a typo than a wish:
					// it would be compared with itself.
					if j := slices.Index(list[:i], list[i]); j >= 0 {
						return usageError{fmt.Errorf("--forms %q: form %q is named twice (at %d and %d): name each form once", forms, list[i], j+1, i+1)}
					}
				}
			}
			return compareCmd(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), modelArg(args), list, block, &f)
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&forms, "forms", "", "comma-separated forms; ratios are to the first (default: every form of the model, in its order)")
	c.Flags().IntVar(&block, "block", 0, "rounds of one form run back to back before the next form's (0: all of them, each form step after step as a deployment runs it; 1: every pass follows another form's)")
	addMaxTasks(c)
	commands = append(commands, c)
}

func compareCmd(ctx context.Context, out, stderr io.Writer, path string, forms []string, block int, f *runFlags) error {
	t0 := time.Now()
	model, err := loadModel(path)
	if err != nil {
		return err
	}
	if len(forms) == 0 {
		forms = model.Forms()
	}
	if err := autoForm(ctx, model, forms, stderr); err != nil {
		return err
	}
	orchs := make([]*actors.Orchestration, len(forms))
	for i, form := range forms {
		if orchs[i], err = orchestrationFor(model, form, f.defects == "warn", stderr); err != nil {
			return err
		}
	}
	loaded := time.Now()
	htmlOut, err := createOutput("--html", f.html)
	if err != nil {
		return err
	}
	s, traceOut, err := openSession(ctx, f, stderr)
	if err != nil {
		htmlOut.discard()
		return err
	}
	info := trace.RunInfo{Model: modelName(model), Form: strings.Join(forms, ","), Rounds: f.rounds, Ranks: f.ranks}
	cctx, cmdSpan := s.tracer.StartCommandAt(ctx, info, t0)
	s.tracer.LoadedModel(cctx, info.Model, t0, loaded)
	reports, passes, err := compareForms(cctx, s, f, model.Name, forms, orchs, block)
	var failed error
	if gf := (goldenFailed{}); errors.As(err, &gf) {
		failed, err = err, nil
	}
	if err != nil {
		cmdSpan.Fail(err)
	}
	traceID := ""
	if sc := cmdSpan.OTel().SpanContext(); sc.IsValid() {
		traceID = sc.TraceID().String()
	}
	cmdSpan.End()
	if err == nil {
		err = traceOut.write(func(w io.Writer) error {
			return writeChromeTrace(w, s.provider, passes, forms, orchs[0].Kernels, f.devicePasses)
		})
	} else {
		traceOut.discard()
		htmlOut.discard()
	}
	dest, ferr := s.finish()
	if err != nil {
		return errors.Join(err, ferr)
	}
	for i, r := range reports {
		r.TraceID, r.Exporter = traceID, dest
		r.Timeline = timelineOf(passes[i], i*f.ranks, orchs[i].Kernels)
	}
	ferr = errors.Join(ferr, htmlOut.write(func(w io.Writer) error { return report.Write(w, report.Compare(reports)) }))
	if f.json {
		doc := compareJSON{Baseline: forms[0], Block: block, Forms: reports, MedianRatios: make([]trace.PhaseRatios, len(reports))}
		for i, r := range reports {
			doc.MedianRatios[i] = trace.MedianRatios(r, reports[0])
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return errors.Join(ferr, enc.Encode(doc), failed)
	}
	return errors.Join(ferr, writeCompare(out, reports, block), failed)
}

// compareJSON is `compare --json`: every form's report, and each form's
// warm medians over the baseline's (the first form), as the text table's
// ratios.
type compareJSON struct {
	Baseline     string              `json:"baseline"`
	Block        int                 `json:"block"`
	Forms        []*trace.Report     `json:"forms"`
	MedianRatios []trace.PhaseRatios `json:"median_ratios"`
}

// compareForms runs the forms block rounds of a form at a time: rounds
// r..r+block-1 run for every form before the next block. The default block
// is all the rounds: each form runs step after step, as a deployment runs
// one form and as upstream measures each form (a run of its own, warm
// passes back to back). A shorter block lets machine load drift over all
// forms alike, but with block 1 every pass follows another form's, whose
// working set has pushed its own out of the caches (a warm DSv4 full pass
// after an eager one: ~1.7x its control plane back to back), which no
// deployment sees. Each form runs on ranks of its own
// (form i uses ranks i*R .. i*R+R-1), so its devices and submission state
// are its own. The passes keep their runtime rank (the host spans' rank);
// the reports number ranks per form.
func compareForms(ctx context.Context, s *session, f *runFlags, model string, forms []string, orchs []*actors.Orchestration, block int) ([]*trace.Report, [][]*actors.PassResult, error) {
	rt, err := actors.Start(s.sys, f.config(s.tracer, f.skipDevice))
	if err != nil {
		return nil, nil, err
	}
	st := &stopper{rt: rt}
	defer st.stop()
	pre := make([]*trace.Preload, len(forms))
	for i := range orchs {
		info := trace.RunInfo{Model: model, Form: forms[i], Rounds: f.rounds, Ranks: f.ranks}
		if pre[i], err = preload(ctx, rt, f, orchs[i], info); err != nil {
			return nil, nil, err
		}
	}
	passes := make([][]*actors.PassResult, len(forms))
	bar := trace.NewProgress(f.rounds*f.ranks*len(forms), "compare")
	defer bar.Finish()
	pass := func(i, round, rank int) error {
		if interrupted(ctx) {
			return errInterrupted
		}
		res, err := rt.Pass(ctx, orchs[i], i*f.ranks+rank, round)
		if err != nil {
			if interrupted(ctx) {
				return errInterrupted
			}
			return fmt.Errorf("form %s: %w", forms[i], err)
		}
		passes[i] = append(passes[i], res)
		bar.Add(1)
		if f.verbose {
			fmt.Fprintf(s.stderr, "hbgrun: pass ended: form %s rank %d round %d\n", forms[i], rank, round)
		}
		return nil
	}
	for first := 0; first < f.rounds; first += block {
		for i := range orchs {
			for round := first; round < min(first+block, f.rounds); round++ {
				for rank := 0; rank < f.ranks; rank++ {
					if err := pass(i, round, rank); err != nil {
						return nil, nil, err
					}
				}
			}
		}
	}
	reports := make([]*trace.Report, len(forms))
	var failed error // a golden check's (goldenFailed): reported, then exit 1
	for i := range forms {
		info := trace.RunInfo{Model: model, Form: forms[i], Rounds: f.rounds, Ranks: f.ranks}
		own := make([]*actors.PassResult, len(passes[i]))
		for k, p := range passes[i] {
			c := *p
			c.Pass.Rank -= i * f.ranks
			own[k] = &c
		}
		reports[i] = buildReport(info, own)
		reports[i].Preload = pre[i]
		autoWarnings(reports[i])
		if base := reports[0].Phases.Phases[trace.PhaseHostOrch]; base.N > 0 {
			reports[i].Baseline = &trace.Baseline{Form: forms[0], HostOrchNs: base.MedianNs}
			if i > 0 {
				// The baseline's host_orch over its own control plane is
				// no saving: it is the measure of the others.
				reports[i].Baseline.Saving = trace.Ratio(base, reports[i].Phases.ControlPlane)
			}
		}
		// Each form is checked against its own reference (its inline
		// twin) in the library, whichever forms are listed.
		if err := reportGolden(reports[i], own); err != nil && failed == nil {
			failed = fmt.Errorf("form %s: %w", forms[i], err)
		}
	}
	return reports, passes, failed
}

// msText is ns in ms with three decimals, or more for a value under 0.1 ms,
// to three significant digits: a sub-µs phase (args) printed as 0.000 next
// to its ratio read as a ratio of zeros.
func msText(ns int64) string {
	ms := float64(ns) / 1e6
	d := 3
	for v := ms; v != 0 && v < 0.1 && d < 9; v *= 10 {
		d++
	}
	return strconv.FormatFloat(ms, 'f', d, 64)
}

// compareHeadline is compare's first line: the baseline's (the ordinary
// path's) host_orch over the best other form's warm control plane, and the
// golden verdict of every form. For example:
//
//	headline: full saves 25.2x: eager host_orch 9.111 ms per pass, full control plane 0.361 ms (warm medians); golden match for all 4 forms
func compareHeadline(reports []*trace.Report) string {
	base := reports[0]
	var best *trace.Report
	for _, r := range reports[1:] {
		if r.Phases.ControlPlane.N == 0 {
			continue
		}
		if best == nil || r.Phases.ControlPlane.MedianNs < best.Phases.ControlPlane.MedianNs {
			best = r
		}
	}
	var b strings.Builder
	b.WriteString("headline: ")
	saving := (*float64)(nil)
	if best != nil {
		saving = trace.Ratio(base.Phases.Phases[trace.PhaseHostOrch], best.Phases.ControlPlane)
	}
	switch {
	case best == nil:
		fmt.Fprintf(&b, "no form beside %s with a warm control plane to measure against its host_orch (give two forms and two rounds or more)", base.Form)
	case saving == nil:
		fmt.Fprintf(&b, "%s has the least warm control plane (%s ms per pass); %s's host_orch was not measured", best.Form, msText(best.Phases.ControlPlane.MedianNs), base.Form)
	default:
		fmt.Fprintf(&b, "%s saves %.3gx: %s host_orch %s ms per pass, %s control plane %s ms (warm medians)",
			best.Form, *saving, base.Form, msText(base.Phases.Phases[trace.PhaseHostOrch].MedianNs), best.Form, msText(best.Phases.ControlPlane.MedianNs))
	}
	verdicts := map[string][]string{}
	var order []string
	for _, r := range reports {
		v := "skipped"
		if r.Golden != nil {
			v = r.Golden.Verdict
		}
		if verdicts[v] == nil {
			order = append(order, v)
		}
		verdicts[v] = append(verdicts[v], r.Form)
	}
	if len(order) == 1 {
		n := len(reports)
		if n == 1 {
			fmt.Fprintf(&b, "; golden %s for its one form", order[0])
		} else {
			fmt.Fprintf(&b, "; golden %s for all %d forms", order[0], n)
		}
	} else {
		b.WriteString("; golden")
		for i, v := range order {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s for %s", sep, v, strings.Join(verdicts[v], ", "))
		}
	}
	return b.String()
}

// usText is ns in µs with two decimals: the table's one unit, so that a
// sub-µs args and a 30 ms device wall read on one scale.
func usText(ns int64) string {
	return strconv.FormatFloat(float64(ns)/1e3, 'f', 2, 64)
}

func writeCompare(out io.Writer, reports []*trace.Report, block int) error {
	fmt.Fprintln(out, compareHeadline(reports))
	order := "each form's rounds back to back, as a deployment runs it"
	if block < reports[0].Rounds {
		order = fmt.Sprintf("%d round(s) of a form at a time, then the next form's", block)
	}
	fmt.Fprintf(out, "order: %s (--block %d)\n", order, block)
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "median µs (ratio to "+reports[0].Form+")\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t", r.Form)
	}
	fmt.Fprintln(tw)
	ratios := make([]trace.PhaseRatios, len(reports))
	for i, r := range reports {
		ratios[i] = trace.MedianRatios(r, reports[0])
	}
	row := func(name string, get func(r *trace.Report) int64, ratio func(pr *trace.PhaseRatios) *float64) {
		fmt.Fprintf(tw, "%s\t", name)
		for i, r := range reports {
			if i == 0 {
				// The baseline's own column: its ratio to itself is no figure.
				fmt.Fprintf(tw, "%s\t", usText(get(r)))
				continue
			}
			x := "-"
			if v := ratio(&ratios[i]); v != nil {
				x = fmt.Sprintf("%.3gx", *v)
			}
			fmt.Fprintf(tw, "%s (%s)\t", usText(get(r)), x)
		}
		fmt.Fprintln(tw)
	}
	for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
		row(ph.String(), func(r *trace.Report) int64 { return r.Phases.Phases[ph].MedianNs }, func(pr *trace.PhaseRatios) *float64 { return pr.Phase(ph) })
	}
	row("control_plane", func(r *trace.Report) int64 { return r.Phases.ControlPlane.MedianNs }, func(pr *trace.PhaseRatios) *float64 { return pr.ControlPlane })
	fmt.Fprintf(tw, "saving (%s host_orch / control_plane)\t", reports[0].Form)
	for i := range reports {
		x := "baseline"
		if v := ratios[i].Saving; i > 0 && v != nil {
			x = fmt.Sprintf("%.3gx", *v)
		} else if i > 0 {
			x = "-"
		}
		fmt.Fprintf(tw, "%s\t", x)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "host_submissions\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%d\t", r.Counts.HostSubmissions)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "device_tasks\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%d\t", r.Counts.DeviceTasks)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "golden\t")
	for _, r := range reports {
		g := "skipped"
		if r.Golden != nil {
			g = r.Golden.Verdict
		}
		fmt.Fprintf(tw, "%s\t", g)
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}
