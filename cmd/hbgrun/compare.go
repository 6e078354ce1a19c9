package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/trace"
)

func init() {
	var f runFlags
	var forms string
	c := &cobra.Command{
		Use:   "compare [MODEL]",
		Short: "Run several forms of a model side by side, passes interleaved, and print each phase's median with its ratio to the first form",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			list := strings.Split(forms, ",")
			for i := range list {
				list[i] = strings.TrimSpace(list[i])
			}
			return compareCmd(c.Context(), c.OutOrStdout(), modelArg(args), list, &f)
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&forms, "forms", "eager,pair,blocks,full", "comma-separated forms; ratios are to the first")
	commands = append(commands, c)
}

func compareCmd(ctx context.Context, out io.Writer, path string, forms []string, f *runFlags) error {
	model, err := loadModel(path)
	if err != nil {
		return err
	}
	orchs := make([]*actors.Orchestration, len(forms))
	for i, form := range forms {
		if orchs[i], err = orchestrationFor(model, form); err != nil {
			return err
		}
	}
	return withSession(ctx, f, func(s *session) error {
		reports, err := compareForms(ctx, s, f, model.Name, forms, orchs)
		if err != nil {
			return err
		}
		if f.json {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				Forms []*trace.Report `json:"forms"`
			}{reports})
		}
		return writeCompare(out, reports)
	})
}

// compareForms runs the forms with their passes interleaved: round r runs
// every form before round r+1, so machine load drifts over all forms alike.
// Each form runs on ranks of its own (form i uses ranks i*R .. i*R+R-1), so
// its devices and submission state are its own.
func compareForms(ctx context.Context, s *session, f *runFlags, model string, forms []string, orchs []*actors.Orchestration) ([]*trace.Report, error) {
	rt, err := actors.Start(s.sys, f.config(s.tracer, f.skipDevice))
	if err != nil {
		return nil, err
	}
	defer rt.Stop(context.Background())
	passes := make([][]*actors.PassResult, len(forms))
	bar := trace.NewProgress(f.rounds*f.ranks*len(forms), "compare")
	for round := 0; round < f.rounds; round++ {
		for i, o := range orchs {
			for rank := 0; rank < f.ranks; rank++ {
				res, err := rt.Pass(ctx, o, i*f.ranks+rank, round)
				if err != nil {
					return nil, fmt.Errorf("form %s: %w", forms[i], err)
				}
				res.Pass.Rank = rank
				passes[i] = append(passes[i], res)
				bar.Add(1)
			}
		}
	}
	bar.Finish()
	reports := make([]*trace.Report, len(forms))
	for i := range forms {
		info := trace.RunInfo{Model: model, Form: forms[i], Rounds: f.rounds, Ranks: f.ranks}
		reports[i] = buildReport(info, passes[i])
		if !f.skipDevice {
			eager, d := passes[0][0].Device, passes[i][0].Device
			match := d.Digest == eager.Digest && d.Tasks-d.Allocs == eager.Tasks-eager.Allocs
			reports[i].Golden = &trace.Golden{Digest: trace.Digest(d.Digest), EagerDigest: trace.Digest(eager.Digest), Match: match && forms[0] == "eager"}
		}
	}
	return reports, nil
}

func writeCompare(out io.Writer, reports []*trace.Report) error {
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "median ms (ratio to "+reports[0].Form+")\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t", r.Form)
	}
	fmt.Fprintln(tw)
	row := func(name string, get func(r *trace.Report) int64) {
		fmt.Fprintf(tw, "%s\t", name)
		base := get(reports[0])
		for _, r := range reports {
			v := get(r)
			ratio := "-"
			if base > 0 {
				ratio = fmt.Sprintf("%.2fx", float64(v)/float64(base))
			}
			fmt.Fprintf(tw, "%.3f (%s)\t", float64(v)/1e6, ratio)
		}
		fmt.Fprintln(tw)
	}
	for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
		row(ph.String(), func(r *trace.Report) int64 { return r.Phases.Phases[ph].MedianNs })
	}
	row("control_plane", func(r *trace.Report) int64 { return r.Phases.ControlPlane.MedianNs })
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
			g = "mismatch"
			if r.Golden.Digest == r.Golden.EagerDigest {
				g = "match"
			}
		}
		fmt.Fprintf(tw, "%s\t", g)
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}
