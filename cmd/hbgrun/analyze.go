package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/analyze"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/trace"
)

// analyzeFlags are analyze's own flags.
type analyzeFlags struct {
	cut     string
	json    bool
	emit    string
	horizon int
	rounds  int
	repeats int
	setting string
	noCalib bool
}

func init() {
	var af analyzeFlags
	cmd := &cobra.Command{
		Use:   "analyze MODEL [--cut KERNEL] [--json] [--emit-form NAME]",
		Short: "The structural map of a model's step, a cost model measured here, and a proposed form",
		Long: `analyze expands MODEL's step on the ordinary path (its eager form's
program params), records every block call's body as a Graph of it would be
recorded, and groups each block's occurrences into classes that can share one
Definition: the same operation sequence, interchangeable kernels (by code
identity), the same arguments position by position (tag, source, layout,
scalars). It names what differs between classes, which values must go into a
Graph's key (construction) and which a replay patches (boundary).

It then runs a short calibration on this machine (the eager form and a form
with Graphs, --calibrate-rounds passes each, device skipped, no store) and
takes the cost model from the runtime's operation counters: per task
submitted, per Graph call replayed, per node recorded, per Definition built,
per byte uploaded. With it, it proposes the form (the program params of one
of the model's forms, and which block calls are Graphs with which keys) with
the least predicted warm control plane, each recording amortised over
--horizon passes. --emit-form NAME prints that form as YAML to paste under
the model's forms:, and run, compare, expand and validate take --form auto
to run it without editing the file.

--cut KERNEL maps the step cut before every task of that kernel (by name or
code) instead of at block calls, as the seed cut at hc_pre_rms; a cut
segment is no block call, so it proposes no form.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Each flag is named alone: a message about a flag the user did
			// not give (its default is fine) sends them looking for it.
			if af.horizon < 1 {
				return usageError{fmt.Errorf("--horizon %d: want at least 1", af.horizon)}
			}
			if af.repeats < 1 {
				return usageError{fmt.Errorf("--calibrate-repeats %d: want at least 1", af.repeats)}
			}
			if af.rounds < 2 {
				return usageError{fmt.Errorf("--calibrate-rounds %d: want at least 2 (the first pass is cold)", af.rounds)}
			}
			m, err := loadModel(args[0])
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("emit-form") {
				if err := checkEmitName(m, af.emit); err != nil {
					return err
				}
			}
			return analyzeCmd(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), m, &af)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&af.cut, "cut", "", "cut the step before every task of this kernel (name or code) instead of at block calls")
	fl.BoolVar(&af.json, "json", false, "write the map, the cost model and the proposal as JSON")
	fl.StringVar(&af.emit, "emit-form", "", "print only the proposed form, as a forms: entry named NAME")
	fl.IntVar(&af.horizon, "horizon", analyze.DefaultHorizon, "passes a Definition's recording is amortised over")
	fl.IntVar(&af.rounds, "calibrate-rounds", calibrateRounds, "passes of each calibration run (the first is cold)")
	fl.IntVar(&af.repeats, "calibrate-repeats", calibrateRepeats, "calibrations to run: the proposal is the median one's, withheld when its saving is within their spread")
	fl.StringVar(&af.setting, "setting", "", "map the step under this form's program params (default: the model's first form's)")
	fl.BoolVar(&af.noCalib, "no-calibrate", false, "print the structural map only: no calibration run, no cost model, no proposal")
	addMaxTasks(cmd)
	commands = append(commands, cmd)
}

func analyzeCmd(ctx context.Context, out, stderr io.Writer, m *config.Model, af *analyzeFlags) error {
	settings, err := analyze.Settings(m)
	if err != nil {
		return usageError{err}
	}
	first := 0
	if af.setting != "" {
		first = slices.IndexFunc(settings, func(s analyze.Setting) bool { return slices.Contains(s.Forms, af.setting) })
		if first < 0 {
			return usageError{fmt.Errorf("--setting %q: no such form (want one of %v)", af.setting, m.Forms())}
		}
	}
	if af.cut != "" {
		st, err := analyze.Expand(m, settings[first])
		if err != nil {
			return usageError{err}
		}
		cm, err := analyze.Cut(st, af.cut)
		if err != nil {
			return usageError{err}
		}
		if af.json {
			return writeJSON(out, cm.JSON())
		}
		return cm.WriteText(out)
	}
	maps, err := analyze.MapAll(m, settings)
	if err != nil {
		return usageError{err}
	}
	mp := maps[first]
	rep := &analyze.Report{Map: mp}
	if !af.noCalib {
		all := make([]analyze.Costs, af.repeats)
		for i := range all {
			if all[i], err = calibrate(ctx, m, maps, af.rounds); err != nil {
				return err
			}
		}
		mid, p, noise := analyze.ProposeRepeated(maps, all, af.horizon)
		costs := all[mid]
		if af.repeats > 1 {
			costs.Source = append(costs.Source, fmt.Sprintf("the calibration ran %d times: these are the figures of the run whose proposal's predicted saving is the median", af.repeats))
		}
		rep.Costs, rep.Proposal, rep.Noise = &costs, p, &noise
		if rep.Forms, err = analyze.PredictForms(m, m.Forms(), costs); err != nil {
			return usageError{err}
		}
		if af.repeats > 1 {
			analyze.SpreadForms(rep.Forms, all)
		}
	}
	switch {
	case af.emit != "":
		if rep.Proposal == nil {
			return usageError{fmt.Errorf("--emit-form with --no-calibrate: a form is chosen with the cost model")}
		}
		if w := rep.Noise.Withheld; w != "" {
			return fmt.Errorf("--emit-form: %s", w)
		}
		_, err := io.WriteString(out, rep.Proposal.Emit(af.emit))
		return err
	case af.json:
		return writeJSON(out, rep.JSON())
	}
	return rep.WriteText(out)
}

// checkEmitName refuses an --emit-form NAME that would not paste as the
// key of a new forms: entry: printed unquoted, a name that is not an
// identifier reads as another key (x#y), a flow mapping ({a}) or no
// YAML at all, and an existing form's name makes a duplicate key.
func checkEmitName(m *config.Model, name string) error {
	if !isIdentifier(name) {
		return usageError{fmt.Errorf("--emit-form %q: want an identifier (an ASCII letter or _, then ASCII letters, digits or _)", name)}
	}
	if slices.Contains(m.Forms(), name) {
		return usageError{fmt.Errorf("--emit-form %q: the model already has a form of that name (want a new one: one of %v is there)", name, m.Forms())}
	}
	return nil
}

// isIdentifier is the model language's rule for a name (config's isIdent).
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// calibrate measures the cost model on this machine: the model's eager
// form (or its eager setting as a hidden form) and a form with Graphs (a
// proposal under unit costs, which covers what repeats), each for rounds
// passes on one rank, the device skipped and no store.
func calibrate(ctx context.Context, m *config.Model, maps []*analyze.Map, rounds int) (analyze.Costs, error) {
	eager, graph, err := analyze.CalibrationForms(m, maps)
	if err != nil {
		return analyze.Costs{}, usageError{err}
	}
	var ms []analyze.Measured
	for i, form := range []string{eager, graph, graph} {
		if form == "" {
			continue
		}
		rep, err := measure(ctx, m, form, rounds, i == 2)
		if err != nil {
			return analyze.Costs{}, fmt.Errorf("analyze: calibration run of %s: %w", form, err)
		}
		ms = append(ms, measured(form, rep))
	}
	var gm, rm *analyze.Measured
	if len(ms) > 2 {
		gm, rm = &ms[1], &ms[2]
		rm.Form += " (--no-retain)"
	}
	c, err := analyze.Calibrate(ms[0], gm, rm)
	if err != nil {
		return c, err
	}
	c.Source = append([]string{fmt.Sprintf("calibrated on this machine: forms %s and %s (and %s recording every pass), %d passes each on one rank, device skipped, no store", eager, graph, graph, rounds)}, c.Source...)
	return c, nil
}

// measure runs form for rounds passes on one rank, the device skipped and
// no store; noRetain records every pass.
func measure(ctx context.Context, m *config.Model, form string, rounds int, noRetain bool) (*trace.Report, error) {
	orch, err := m.Orchestration(form)
	if err != nil {
		return nil, err
	}
	f := &runFlags{rounds: rounds, ranks: 1, skipDevice: true, defects: "warn", inFlight: 2, noRetain: noRetain}
	s, err := newSession(ctx, f, io.Discard)
	if err != nil {
		return nil, err
	}
	defer s.finish()
	rep, _, err := runForm(ctx, s, f, orch, trace.RunInfo{Model: m.Name, Form: form, Rounds: rounds, Ranks: 1})
	return rep, err
}

func measured(form string, rep *trace.Report) analyze.Measured {
	ms := analyze.Measured{Form: form, Ops: map[string]analyze.OpFigure{}, WarmOps: map[string]analyze.OpFigure{},
		WarmPasses: rep.Phases.Passes, ControlPlane: rep.Phases.ControlPlane.MedianNs,
		ColdGraphUpload: rep.ColdPhases.Phases[trace.PhaseGraphUpload].MedianNs,
		HostSubmissions: rep.Counts.HostSubmissions, OrdinaryTasks: rep.Counts.OrdinaryTasks, GraphSubmissions: rep.Counts.GraphSubmissions}
	for op := trace.Op(0); op < trace.NumOps; op++ {
		ms.Ops[op.String()] = analyze.OpFigure{Count: rep.Ops[op].Count, TotalNs: rep.Ops[op].TotalNs}
		ms.WarmOps[op.String()] = analyze.OpFigure{Count: rep.WarmOps[op].Count, TotalNs: rep.WarmOps[op].TotalNs}
	}
	for _, p := range rep.Passes {
		if p.Cold {
			ms.UploadedBytes = max(ms.UploadedBytes, p.UploadedDefinitionBytes)
		}
		pf := analyze.PassFigure{Cold: p.Cold, Ops: map[string]analyze.OpFigure{}, GraphUploadNs: p.Phases[trace.PhaseGraphUpload], UploadedBytes: p.UploadedDefinitionBytes}
		for op := trace.Op(0); op < trace.NumOps; op++ {
			pf.Ops[op.String()] = analyze.OpFigure{Count: p.Ops[op].Count, TotalNs: p.Ops[op].TotalNs}
		}
		ms.Passes = append(ms.Passes, pf)
	}
	return ms
}

// calibrateRounds is each calibration run's passes: medians over five
// warm or recording passes, about a tenth of a second for DSv4's eager form.
const calibrateRounds = 6

// calibrateRepeats is how many times analyze calibrates: three give a
// median and a spread for about three times one calibration's time.
const calibrateRepeats = 3

// autoForm adds the model's form auto, the one analyze proposes, when a
// command asks for it and the model has none of its own: the calibration
// and the analysis run first, and stderr says what was chosen.
func autoForm(ctx context.Context, m *config.Model, forms []string, stderr io.Writer) error {
	if !slices.Contains(forms, analyze.AutoForm) || slices.Contains(m.Forms(), analyze.AutoForm) {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	settings, err := analyze.Settings(m)
	if err != nil {
		return usageError{err}
	}
	maps, err := analyze.MapAll(m, settings)
	if err != nil {
		return usageError{err}
	}
	costs, err := calibrate(ctx, m, maps, calibrateRounds)
	if err != nil {
		return err
	}
	p := analyze.Propose(maps, costs, analyze.DefaultHorizon)
	fmt.Fprintf(stderr, "hbgrun: form auto: %s\n", p.Summary())
	if err := m.AddForm(analyze.AutoForm, []byte(p.Form()), false); err != nil {
		return fmt.Errorf("analyze: the proposed form does not load (a bug of the analysis): %w", err)
	}
	return nil
}

// autoWarnings says, in a report of form auto, what the runtime refused
// that the analysis had called shareable: each is a bug of the analysis,
// not of the model.
func autoWarnings(rep *trace.Report) {
	if rep == nil || rep.Form != analyze.AutoForm {
		return
	}
	c := rep.Counts
	if c.BoundaryMismatches > 0 || c.Demoted > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("form auto: %d boundary mismatches and %d demoted Graph calls: the runtime refused a class hbgrun analyze called shareable (a bug of the analysis)", c.BoundaryMismatches, c.Demoted))
	}
}
