package analyze

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Proposal is the form Propose chooses: a program-param setting and the
// blocks whose calls become Graph scopes, with their keys.
type Proposal struct {
	Map     *Map
	Setting Setting
	Graphs  []*Choice
	// Rejected is every other block with occurrences, and why it is no
	// Graph.
	Rejected []Rejection
	Shape    Shape
	// PredictedNs is the warm control plane the cost model predicts; the
	// settings considered are in Alternatives.
	PredictedNs  float64
	Horizon      int
	Alternatives []Alternative
	// Step, when set, makes the whole step one Graph of the Graphs above
	// (a form's step:, config/step.go): it pays where one replay of the
	// step costs less than the form's ordinary tasks and Graph calls, by
	// more than recording the step costs over the horizon. Shape and
	// PredictedNs are then the step's; Step.Flat the form's without it.
	Step *StepChoice
	// NoStep says why the step is not one Graph (Step nil).
	NoStep string
}

// StepChoice is the step made one Graph of Graphs.
type StepChoice struct {
	Key string
	// Children is the Graph calls inside the step, Definitions their
	// Definitions (its children by hash), Ordinary the tasks it records
	// besides them.
	Children, Definitions, Ordinary int
	// Flat is the form without the step, FlatNs its predicted warm control
	// plane; SavingNs what the step saves a warm pass over it, ColdNs what
	// recording and flattening the step costs once, BreakEven the passes
	// after which the saving has paid it.
	Flat                     Shape
	FlatNs, SavingNs, ColdNs float64
	BreakEven                float64
}

// Choice is one block made a Graph.
type Choice struct {
	Block       string
	Key         string
	Config      []string
	Calls       int
	Definitions int
	Nodes       int // over its Definitions
	// SavingNs is the warm control plane it saves per pass; ColdNs what
	// recording, building and uploading its Definitions costs once;
	// BreakEven the passes after which the saving has paid the recording.
	SavingNs, ColdNs float64
	BreakEven        float64
}

// Rejection says why a block is no Graph.
type Rejection struct {
	Block string
	Why   string
}

// Alternative is the best form under one setting.
type Alternative struct {
	Setting     Setting
	Graphs      []string
	Shape       Shape
	PredictedNs float64
	// Excluded says why the setting was not considered ("" when it was).
	Excluded string
}

// value is one candidate block's figures under a map.
type value struct {
	bm               *BlockMap
	saving, cold     float64 // per pass warm; once
	net              float64 // saving - cold/horizon
	calls, tasks, al int
	nodes            int
	breakEven        float64
}

func (m *Map) values(c *Costs, horizon int) ([]*value, []Rejection) {
	var out []*value
	var rej []Rejection
	for _, bm := range m.Blocks {
		switch {
		case c.Uncalibrated != "":
			rej = append(rej, Rejection{bm.Info.Name, c.Uncalibrated})
			continue
		case bm.RecordErr != "":
			rej = append(rej, Rejection{bm.Info.Name, "its body cannot be recorded: " + bm.RecordErr})
			continue
		case bm.Inseparable != "":
			rej = append(rej, Rejection{bm.Info.Name, bm.Inseparable})
			continue
		}
		v := &value{bm: bm}
		for _, d := range bm.Definitions {
			v.cold += c.cold(len(d[0].Def.Nodes), d[0].ImageBytes)
			v.nodes += len(d[0].Def.Nodes)
		}
		for _, call := range bm.Calls {
			v.saving += c.ordinary(call.Tasks(), call.Allocs, c.small()) - c.replay(c.small())
			v.calls++
			v.tasks += call.Tasks()
			v.al += call.Allocs
		}
		v.net = v.saving - v.cold/float64(horizon)
		v.breakEven = math.Inf(1)
		if v.saving > 0 {
			v.breakEven = v.cold / v.saving
		}
		if v.net <= 0 {
			why := fmt.Sprintf("break-even not reached: %d occurrences in %d Definitions save %.1f us a warm pass; recording them costs %.1f us once",
				v.calls, len(bm.Definitions), v.saving/1e3, v.cold/1e3)
			if v.saving <= 0 {
				why = fmt.Sprintf("break-even not reached: its %d replays (%.2f us each) cost at least what its %d tasks cost submitted (%.2f us a pass)",
					v.calls, c.replay(c.small())/1e3, v.tasks, (v.saving+float64(v.calls)*c.replay(c.small()))/1e3)
			} else {
				why += fmt.Sprintf(", paid back after %.1f passes (the horizon is %d)", v.breakEven, horizon)
			}
			rej = append(rej, Rejection{bm.Info.Name, why})
			continue
		}
		out = append(out, v)
	}
	return out, rej
}

// conflict: one block's occurrences contain the other's.
func conflict(a, b *BlockMap) bool {
	return slices.Contains(a.Contains, b.Info.Name) || slices.Contains(b.Contains, a.Info.Name)
}

// choose picks the candidates, no two in conflict, with the greatest total
// net saving: every subset when there are few, else greedily.
func choose(vs []*value) []*value {
	if len(vs) <= 16 {
		var best []*value
		bestNet := 0.0
		for mask := 1; mask < 1<<len(vs); mask++ {
			var set []*value
			net, ok := 0.0, true
			for i, v := range vs {
				if mask&(1<<i) == 0 {
					continue
				}
				for _, u := range set {
					if conflict(u.bm, v.bm) {
						ok = false
					}
				}
				set = append(set, v)
				net += v.net
			}
			if ok && net > bestNet {
				best, bestNet = set, net
			}
		}
		return best
	}
	sorted := slices.Clone(vs)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].net > sorted[j].net })
	var set []*value
	for _, v := range sorted {
		if !slices.ContainsFunc(set, func(u *value) bool { return conflict(u.bm, v.bm) }) {
			set = append(set, v)
		}
	}
	return set
}

// Propose picks, over the maps of each setting, the form with the least
// predicted warm control plane, each Definition's recording amortised over
// horizon passes. Ties go to the earlier setting (the eager form's first).
func Propose(maps []*Map, c Costs, horizon int) *Proposal {
	if horizon < 1 {
		horizon = 1
	}
	var best *Proposal
	var alts []Alternative
	for _, m := range maps {
		if m.Step.Code != maps[0].Step.Code {
			alts = append(alts, Alternative{Setting: m.Step.Setting, Excluded: fmt.Sprintf("not the same step: its kernel sequence (by code) differs from that of forms %s", strings.Join(maps[0].Step.Setting.Forms, ", "))})
			continue
		}
		vs, rej := m.values(&c, horizon)
		set := choose(vs)
		p := &Proposal{Map: m, Setting: m.Step.Setting, Horizon: horizon}
		shape := Shape{OrdinaryTasks: m.Step.Tasks, Allocs: m.Step.Allocs}
		amort := 0.0
		for _, v := range set {
			bm := v.bm
			p.Graphs = append(p.Graphs, &Choice{Block: bm.Info.Name, Key: bm.Info.Name, Config: bm.Construction, Calls: v.calls,
				Definitions: len(bm.Definitions), Nodes: v.nodes, SavingNs: v.saving, ColdNs: v.cold, BreakEven: v.breakEven})
			shape.OrdinaryTasks -= v.tasks
			shape.Allocs -= v.al
			shape.GraphCalls += v.calls
			amort += v.cold / float64(horizon)
		}
		for _, v := range vs {
			if slices.Contains(set, v) {
				continue
			}
			var by []string
			for _, u := range set {
				if conflict(u.bm, v.bm) {
					by = append(by, u.bm.Info.Name)
				}
			}
			rel := "contains"
			if slices.Contains(v.bm.Within, by[0]) {
				rel = "is called inside"
			}
			rej = append(rej, Rejection{v.bm.Info.Name, fmt.Sprintf("it %s %s, made Graphs instead: together they save more (a block is a Graph or contains Graphs, not both)", rel, strings.Join(by, ", "))})
		}
		slices.SortFunc(rej, func(a, b Rejection) int { return strings.Compare(a.Block, b.Block) })
		p.Rejected, p.Shape = rej, shape
		p.PredictedNs = c.Predict(shape)
		alts = append(alts, Alternative{Setting: p.Setting, Graphs: p.blocks(), Shape: shape, PredictedNs: p.PredictedNs})
		if best == nil || p.PredictedNs+amort < best.PredictedNs+best.amortised()-1e-9 {
			best = p
		}
	}
	best.Alternatives = alts
	best.step(&c)
	return best
}

// stepKey is the key a proposed step gets.
const stepKey = "step"

// step makes p's form one step Graph when that pays over the horizon.
func (p *Proposal) step(c *Costs) {
	if len(p.Graphs) == 0 {
		return // a step of Graphs: with none, the form stays as it is
	}
	st := p.Map.Step
	recorded, bytes := 0, 0
	for _, g := range p.Graphs {
		recorded += g.Nodes
	}
	defs := 0
	for _, bm := range p.Map.Blocks {
		if !slices.Contains(p.blocks(), bm.Info.Name) {
			continue
		}
		for _, d := range bm.Definitions {
			bytes += d[0].ImageBytes
			defs++
		}
	}
	perNode := 200.0 // a Definition's bytes a node, when none is chosen
	if recorded > 0 {
		perNode = float64(bytes) / float64(recorded)
	}
	// The step records its ordinary tasks, a node per child call and each
	// child Definition once, then flattens every task of the step into the
	// image it uploads.
	recorded += p.Shape.OrdinaryTasks + p.Shape.GraphCalls
	cold := c.cold(recorded+st.Tasks, int(perNode*float64(st.Tasks)))
	one := Shape{GraphCalls: 1}
	ns := c.Predict(one)
	saving := p.PredictedNs - ns
	if saving <= 0 {
		p.NoStep = fmt.Sprintf("one replay of the whole step (%.2f us) saves nothing over the form's %d host submissions (%.2f us)", ns/1e3, p.Shape.HostSubmissions(), p.PredictedNs/1e3)
		return
	}
	if ns+cold/float64(p.Horizon) >= p.PredictedNs+p.amortised() {
		p.NoStep = fmt.Sprintf("break-even not reached: the whole step as one Graph of %s would save %.1f us a warm pass (1 host submission for %d) and records and flattens for %.1f us once, paid back after %.1f passes (the horizon is %d; --horizon sets it)",
			plural(p.Shape.GraphCalls, "Graph call"), saving/1e3, p.Shape.HostSubmissions(), cold/1e3, cold/saving, p.Horizon)
		return
	}
	p.Step = &StepChoice{Key: stepKey, Children: p.Shape.GraphCalls, Definitions: defs, Ordinary: p.Shape.OrdinaryTasks,
		Flat: p.Shape, FlatNs: p.PredictedNs, SavingNs: saving, ColdNs: cold, BreakEven: cold / saving}
	p.Shape, p.PredictedNs = one, ns
}

func (p *Proposal) amortised() float64 {
	s := 0.0
	for _, g := range p.Graphs {
		s += g.ColdNs / float64(p.Horizon)
	}
	return s
}

func (p *Proposal) blocks() []string {
	var out []string
	for _, g := range p.Graphs {
		out = append(out, g.Block)
	}
	return out
}

// Form is the proposal as the YAML of one forms: entry's value, which
// config.Model.AddForm takes.
func (p *Proposal) Form() string {
	var b strings.Builder
	b.WriteString("params: " + paramsYAML(p.Map.Step.Params, p.Setting) + "\n")
	if p.Step != nil {
		b.WriteString("step: {key: " + p.Step.Key + "}\n")
	}
	if len(p.Graphs) == 0 {
		b.WriteString("graphs: {}\n")
		return b.String()
	}
	b.WriteString("graphs:\n")
	for _, g := range p.Graphs {
		fmt.Fprintf(&b, "  %s: {key: %s", g.Block, g.Key)
		if len(g.Config) > 0 {
			fmt.Fprintf(&b, ", config: [%s]", strings.Join(g.Config, ", "))
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// Emit is the proposal as a forms: entry named name, with a comment on
// where it came from, to paste under a model's forms: key.
func (p *Proposal) Emit(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  # proposed by hbgrun analyze: warm control plane %.3f ms predicted (%d host submissions: %d ordinary, %d Graph calls)\n",
		p.PredictedNs/1e6, p.Shape.HostSubmissions(), p.Shape.OrdinaryTasks, p.Shape.GraphCalls)
	fmt.Fprintf(&b, "  %s:\n", name)
	for _, l := range strings.Split(strings.TrimRight(p.Form(), "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}
