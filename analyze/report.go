package analyze

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/hbg-dev/hbg/config"
)

// AutoForm is the name under which commands run the proposed form.
const AutoForm = "auto"

// DefaultHorizon is the passes a recording is amortised over by default.
// A run's passes are the least a Definition serves (hbgrun run: 5; the
// store on disk keeps it for later runs): a recording that pays for itself
// within two such runs is worth it. It also sets how far apart the two
// kinds of block are on a loaded box: a large block called once pays back
// in under one pass here (recording runs off the submitting thread, at
// about a submit's cost a node), a one-task block never or after dozens.
const DefaultHorizon = 10

// MapAll expands and maps the step under each setting.
func MapAll(m *config.Model, settings []Setting) ([]*Map, error) {
	out := make([]*Map, len(settings))
	for i, s := range settings {
		st, err := Expand(m, s)
		if err != nil {
			return nil, err
		}
		out[i] = Build(st)
	}
	return out, nil
}

// unitCosts make a replay free and a task cost one: the calibration form
// they choose makes a Graph of every block that can be one (the most
// tasks, no block in another), so that the calibration measures replays,
// recordings and uploads wherever there are any.
var unitCosts = Costs{SubmitNs: 1, AllocNs: 1, SubmitSmallNs: 1, AllocSmallNs: 1}

// CalibrationForms names the two forms a calibration runs, adding them to
// m (hidden) where the model has none: its eager form (the first without
// Graphs whose params are the first setting's), and a form with Graphs
// ("" when nothing can be a Graph).
func CalibrationForms(m *config.Model, maps []*Map) (eager, graph string, err error) {
	for _, f := range m.Forms() {
		v, _ := m.FormParams(f)
		if len(m.FormGraphs(f)) == 0 && fmt.Sprint(v) == fmt.Sprint(maps[0].Step.Setting.Values) {
			eager = f
			break
		}
	}
	if eager == "" {
		eager = probeName(m, "calibrate")
		if err := m.AddForm(eager, []byte("params: "+paramsYAML(maps[0].Step.Params, maps[0].Step.Setting)+"\n"), true); err != nil {
			return "", "", err
		}
	}
	p := Propose(maps, unitCosts, 1<<30)
	p.Step = nil // the calibration measures Graph calls, not one step
	if len(p.Graphs) == 0 {
		return eager, "", nil
	}
	graph = probeName(m, "calibrate")
	if err := m.AddForm(graph, []byte(p.Form()), true); err != nil {
		return "", "", fmt.Errorf("analyze: the calibration form does not load (a bug of the analysis): %w", err)
	}
	return eager, graph, nil
}

// Summary is the proposal in a line.
func (p *Proposal) Summary() string {
	if sc := p.Step; sc != nil {
		var gs []string
		for _, g := range p.Graphs {
			gs = append(gs, g.Block)
		}
		return fmt.Sprintf("program params %s; the whole step one Graph (key %s) of Graphs %s (%d Definitions, its children by hash); 1 host submission (%d without the step), warm control plane %.3f ms predicted (%.3f ms without), break-even after %.2f passes",
			p.Setting.Text(p.Map.Step.Params), sc.Key, orNone(gs), sc.Definitions, sc.Flat.HostSubmissions(), p.PredictedNs/1e6, sc.FlatNs/1e6, sc.BreakEven)
	}
	if len(p.Graphs) == 0 {
		why := "no block call repeats"
		if len(p.Rejected) > 0 {
			why = p.Rejected[0].Block + ": " + p.Rejected[0].Why
		}
		return fmt.Sprintf("no Graph (%s); %d host submissions, warm control plane %.3f ms predicted", why, p.Shape.HostSubmissions(), p.PredictedNs/1e6)
	}
	var gs []string
	defs := 0
	for _, g := range p.Graphs {
		gs = append(gs, g.Block)
		defs += g.Definitions
	}
	return fmt.Sprintf("program params %s; Graphs %s (%d Definitions); %d host submissions (%d ordinary, %d Graph calls), warm control plane %.3f ms predicted",
		p.Setting.Text(p.Map.Step.Params), strings.Join(gs, ", "), defs, p.Shape.HostSubmissions(), p.Shape.OrdinaryTasks, p.Shape.GraphCalls, p.PredictedNs/1e6)
}

// Report is what hbgrun analyze prints: the map, and when calibrated the
// cost model and the proposal.
type Report struct {
	Map      *Map
	Costs    *Costs
	Proposal *Proposal
	// Forms is the model's own forms, each with its predicted warm
	// control plane (Predict); set with the cost model.
	Forms []FormPrediction
	// Noise is the calibration repeated (nil without one); a withheld
	// proposal is kept for its figures but not offered as a form.
	Noise *Noise
}

// FormPrediction is one form's shape and predicted warm control plane.
type FormPrediction struct {
	Form        string  `json:"form"`
	Shape       Shape   `json:"shape"`
	Host        int     `json:"host_submissions"`
	PredictedNs float64 `json:"predicted_warm_control_plane_ns"`
	// Spread is the prediction over the repeated calibrations (nil with
	// one).
	Spread *FormSpread `json:"spread,omitempty"`
}

// PredictForms predicts the warm control plane of each named form of m.
func PredictForms(m *config.Model, forms []string, c Costs) ([]FormPrediction, error) {
	var out []FormPrediction
	for _, f := range forms {
		s, err := FormShape(m, f)
		if err != nil {
			return nil, err
		}
		out = append(out, FormPrediction{Form: f, Shape: s, Host: s.HostSubmissions(), PredictedNs: c.Predict(s)})
	}
	return out, nil
}

// occurrences describes calls' params compactly ("layer=0; layer=1",
// "i=0..19").
func occurrences(info config.BlockInfo, calls []*Call) string {
	names := keyNames(info)
	if len(names) == 0 {
		return fmt.Sprintf("%d calls", len(calls))
	}
	var parts []string
	for i, n := range names {
		vals := make([]string, len(calls))
		for j, c := range calls {
			vals[j] = keyValue(info, c, i)
		}
		parts = append(parts, n+"="+compact(vals))
	}
	return strings.Join(parts, " ")
}

// compact lists values, "a..b" for a run of consecutive integers and
// "v" for one repeated value.
func compact(vals []string) string {
	same := true
	for _, v := range vals {
		same = same && v == vals[0]
	}
	if same {
		return vals[0]
	}
	var ints []int64
	for _, v := range vals {
		var x int64
		if _, err := fmt.Sscan(v, &x); err != nil {
			ints = nil
			break
		}
		ints = append(ints, x)
	}
	if len(ints) > 2 {
		step := ints[1] - ints[0]
		arith := step != 0
		for i := 2; i < len(ints) && arith; i++ {
			arith = ints[i]-ints[i-1] == step
		}
		if arith {
			if step == 1 {
				return fmt.Sprintf("%d..%d", ints[0], ints[len(ints)-1])
			}
			return fmt.Sprintf("%d..%d step %d", ints[0], ints[len(ints)-1], step)
		}
	}
	if len(vals) > 6 {
		return strings.Join(vals[:3], ",") + ",...," + vals[len(vals)-1]
	}
	return strings.Join(vals, ",")
}

// canShare is the seed table's last column.
func (b *BlockMap) canShare() string {
	switch {
	case b.RecordErr != "":
		return "no: its body cannot be recorded"
	case len(b.Calls) == 1:
		return "n/a (one occurrence)"
	case b.Shareable():
		s := fmt.Sprintf("yes: %d/%d positions the same code", b.Classes[0].Nodes, b.Classes[0].Nodes)
		var also []string
		if b.NameOnly > 0 {
			also = append(also, fmt.Sprintf("%d kernels differ in name only", b.NameOnly))
		}
		if b.DirectionOnly > 0 {
			also = append(also, fmt.Sprintf("%d arguments in declared direction only", b.DirectionOnly))
		}
		if len(also) > 0 {
			s += " (" + strings.Join(also, ", ") + ")"
		}
		return s
	}
	sizes := make([]string, len(b.Classes))
	for i, k := range b.Classes {
		sizes[i] = fmt.Sprint(len(k.Calls))
	}
	if len(sizes) > 6 {
		sizes = append(sizes[:5], "...")
	}
	return fmt.Sprintf("no: %d classes (%s), told apart by %s", len(b.Classes), strings.Join(sizes, "+"), orNone(b.Separating))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

// WriteText prints the report.
func (r *Report) WriteText(w io.Writer) error {
	st := r.Map.Step
	fmt.Fprintf(w, "model %s: a step of %d tasks (%d allocs), %d block calls; program params %s (forms %s)\n",
		st.Model.Name, st.Tasks, st.Allocs, len(st.Calls), st.Setting.Text(st.Params), strings.Join(st.Setting.Forms, ", "))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "block\toccurrences\tstatic sites\tnodes\tboundary\tcan share one Definition?")
	for _, b := range r.Map.Blocks {
		nodes, width := "-", "-"
		if len(b.Classes) > 0 {
			nodes = fmt.Sprint(b.Classes[0].Nodes)
			width = fmt.Sprintf("%d+%d", b.Classes[0].Width, b.Classes[0].Scalars)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", b.Info.Name, len(b.Calls), len(b.Sites), nodes, width, b.canShare())
	}
	tw.Flush()
	fmt.Fprintln(w, "(boundary: tensors+scalars; positions compared on each recording: kernel code, each argument's tag, source and layout, each scalar, fanin, predicate)")
	for _, b := range r.Map.Blocks {
		fmt.Fprintf(w, "\n%s (line %d): %s at %s %s: %s\n", b.Info.Name, b.Info.Line, plural(len(b.Calls), "occurrence"), pluralWord(len(b.Sites), "line"), joinInts(b.Sites), occurrences(b.Info, b.Calls))
		if len(b.Within) > 0 {
			fmt.Fprintf(w, "  called inside %s\n", strings.Join(b.Within, ", "))
		}
		if b.RecordErr != "" {
			fmt.Fprintf(w, "  cannot be a Graph: %s\n", b.RecordErr)
			continue
		}
		for i, k := range b.Classes {
			fmt.Fprintf(w, "  class %d: %s (%s), %s, boundary %s and %s\n", i+1, plural(len(k.Calls), "occurrence"), occurrences(b.Info, k.Calls), plural(k.Nodes, "node"), plural(k.Width, "tensor"), plural(k.Scalars, "scalar"))
			if i > 0 {
				for _, d := range b.Diffs[i-1] {
					fmt.Fprintf(w, "    differs from class 1 at %s\n", d)
				}
			}
			if len(k.Patched) > 0 {
				fmt.Fprintf(w, "    boundary (patched at replay): %s\n", patchedText(k))
			}
			for _, p := range k.Patched {
				if p.Roots != nil {
					fmt.Fprintf(w, "    slot %s views another tensor in some occurrences: %s\n", p.Slot, rootsText(st, p))
				}
			}
		}
		if b.Inseparable != "" {
			fmt.Fprintf(w, "  cannot be a Graph: %s\n", b.Inseparable)
			continue
		}
		key := "none (one Definition)"
		if len(b.Construction) > 0 {
			key = strings.Join(b.Construction, ", ")
			if len(b.Separating) < len(b.Construction) {
				if len(b.Separating) == 0 {
					key += " (its recordings here do not differ; the static checks find the body's structure depends on it)"
				} else {
					key += fmt.Sprintf(" (%s tell the classes apart; the static checks add the rest)", strings.Join(b.Separating, ", "))
				}
			}
		}
		fmt.Fprintf(w, "  key (construction values): %s; a Graph of it records %s\n", key, plural(len(b.Definitions), "Definition"))
		for i, n := range b.Info.Structural {
			if slices.Contains(b.Separating, n) {
				fmt.Fprintf(w, "    the body's structure depends on %s at line %d: a choice the host settles when the body is recorded, so it must be in the key\n", n, b.Info.StructuralLines[i])
			}
		}
	}
	if r.Costs != nil {
		c := r.Costs
		fmt.Fprintf(w, "\ncost model (ns): submit_task %s (%s in a small pass), alloc_tensors %s (%s), graph_submit %s, record_node %s, build_definition %s, upload %s/byte, walk %s/submission (%s)\n",
			rate(c.SubmitNs, "%.0f"), rate(c.SubmitSmallNs, "%.0f"), rate(c.AllocNs, "%.0f"), rate(c.AllocSmallNs, "%.0f"), rate(c.ReplayNs, "%.0f"),
			rate(c.RecordNodeNs, "%.0f"), rate(c.BuildNs, "%.0f"), rate(c.UploadByteNs, "%.3f"), rate(c.TaskWalkNs, "%.0f"), rate(c.TaskWalkSmallNs, "%.0f"))
		for _, s := range c.Source {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(r.Forms) > 0 {
		fmt.Fprintf(w, "\npredicted warm control plane of the model's forms (the cost model above):\n")
		for _, f := range r.Forms {
			spread := ""
			if f.Spread != nil && r.Noise != nil {
				spread = fmt.Sprintf(" (%.3f..%.3f over %d calibrations)", f.Spread.MinNs/1e6, f.Spread.MaxNs/1e6, r.Noise.Repeats)
			}
			fmt.Fprintf(w, "  %-10s %.3f ms%s  (%s: %d ordinary, %s)\n", f.Form, f.PredictedNs/1e6, spread, plural(f.Host, "host submission"), f.Shape.OrdinaryTasks, plural(f.Shape.GraphCalls, "Graph call"))
		}
	}
	if n := r.Noise; n != nil && n.Repeats > 1 {
		fmt.Fprintf(w, "\nnoise: the calibration ran %d times; the proposal's predicted saving a warm pass was %s µs (median %.2f µs, spread %.2f µs)\n",
			n.Repeats, savingsText(n.SavingNs), n.MedianSavingNs/1e3, n.SpreadNs/1e3)
	}
	if n := r.Noise; n != nil && n.Withheld != "" {
		fmt.Fprintf(w, "\n%s\n", n.Withheld)
		return nil
	}
	if p := r.Proposal; p != nil {
		fmt.Fprintf(w, "\nproposed form (recordings amortised over %d passes): %s\n", p.Horizon, p.Summary())
		for _, g := range p.Graphs {
			fmt.Fprintf(w, "  Graph %s: key %s, config [%s]: %s, %s of %s; saves %.1f us a warm pass, records for %.1f us once, break-even after %.2f passes\n",
				g.Block, g.Key, strings.Join(g.Config, ", "), plural(g.Calls, "call"), plural(g.Definitions, "Definition"), plural(g.Nodes, "node"), g.SavingNs/1e3, g.ColdNs/1e3, g.BreakEven)
		}
		for _, rj := range p.Rejected {
			fmt.Fprintf(w, "  no Graph %s: %s\n", rj.Block, rj.Why)
		}
		if p.NoStep != "" {
			fmt.Fprintf(w, "  no step: %s\n", p.NoStep)
		}
		if sc := p.Step; sc != nil {
			fmt.Fprintf(w, "  step (key %s): the whole step one Graph of %s (%s, its children by hash) and %d ordinary tasks: 1 host submission for %d; saves %.1f us a warm pass over the form without it (%.3f ms predicted), records and flattens for %.1f us once, break-even after %.2f passes\n",
				sc.Key, plural(sc.Children, "Graph call"), plural(sc.Definitions, "Definition"), sc.Ordinary, sc.Flat.HostSubmissions(), sc.SavingNs/1e3, sc.FlatNs/1e6, sc.ColdNs/1e3, sc.BreakEven)
		}
		for _, a := range p.Alternatives {
			if a.Excluded != "" {
				fmt.Fprintf(w, "  under params %s (forms %s): %s\n", a.Setting.Text(st.Params), strings.Join(a.Setting.Forms, ", "), a.Excluded)
				continue
			}
			fmt.Fprintf(w, "  under params %s (forms %s): Graphs [%s], %d host submissions, %.3f ms predicted\n",
				a.Setting.Text(st.Params), strings.Join(a.Setting.Forms, ", "), strings.Join(a.Graphs, ", "), a.Shape.HostSubmissions(), a.PredictedNs/1e6)
		}
		fmt.Fprintf(w, "\n%s", p.Emit(AutoForm))
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func patchedText(k *Class) string {
	var slots, scalars []string
	for _, p := range k.Patched {
		if p.Scalar {
			scalars = append(scalars, p.Slot)
		} else {
			slots = append(slots, p.Slot)
		}
	}
	s := fmt.Sprintf("%d tensors", len(slots))
	if len(k.Uses) > 0 {
		s += " moved by " + strings.Join(k.Uses, " and ")
	}
	if len(slots) > 0 {
		s += " (" + compactNames(slots) + ")"
	}
	if len(scalars) > 0 {
		s += fmt.Sprintf("; %d scalars (%s)", len(scalars), compactNames(scalars))
	}
	return s
}

func compactNames(n []string) string {
	if len(n) > 8 {
		return strings.Join(n[:6], ", ") + fmt.Sprintf(", ... %d more", len(n)-6)
	}
	return strings.Join(n, ", ")
}

func rootsText(st *Step, p Patched) string {
	parts := make([]string, len(p.Roots))
	for i, r := range p.Roots {
		var where []string
		for _, ci := range p.RootAt[i] {
			c := st.Calls[ci]
			where = append(where, occurrences(st.blockInfo(c.Block), []*Call{c}))
		}
		if len(where) > 3 {
			where = append(where[:2], fmt.Sprintf("... %d occurrences", len(p.RootAt[i])))
		}
		parts[i] = fmt.Sprintf("%s at %s", r, strings.Join(where, "; "))
	}
	return strings.Join(parts, " | ")
}

// plural is n and its noun, in the plural unless n is 1 ("1 occurrence").
func plural(n int, noun string) string {
	return strconv.Itoa(n) + " " + pluralWord(n, noun)
}

// pluralWord is noun, in the plural unless n is 1.
func pluralWord(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
