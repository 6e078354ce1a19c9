package analyze

import (
	"fmt"
	"slices"
)

// Noise is the calibration repeated: the cost model measured Repeats times
// on this machine, each proposing its own form. A small model's control
// plane is tens of µs, where one preempted pass moves a median by as much
// as a Graph saves, and three reruns flipped which form was predicted
// faster; the spread over the repeats is what a prediction is worth.
type Noise struct {
	Repeats int `json:"repeats"`
	// SavingNs is each repeat's predicted saving of its proposal a warm
	// pass (recordings amortised) over the same step with no Graph, in
	// the order measured; MedianSavingNs and SpreadNs (max less min) are
	// over them.
	SavingNs       []float64 `json:"saving_ns"`
	MedianSavingNs float64   `json:"median_saving_ns"`
	SpreadNs       float64   `json:"spread_ns"`
	// Withheld says why no form is proposed ("" when one is): the saving
	// is negative or within the spread.
	Withheld string `json:"withheld,omitempty"`
}

// saving is what p saves a warm pass, recordings amortised, over its
// step's own tasks submitted with no Graph.
func saving(p *Proposal, c *Costs) float64 {
	st := p.Map.Step
	none := Shape{OrdinaryTasks: st.Tasks, Allocs: st.Allocs}
	return c.Predict(none) - (p.PredictedNs + p.amortised())
}

// ProposeRepeated proposes a form from each repeat's cost model and keeps
// the median repeat's (by predicted saving): its index, and the noise. A
// proposal is withheld when any repeat predicts no saving (the range of
// the savings reaches zero: the saving is within the noise): Noise.Withheld
// says so in a sentence. A spread alone withholds nothing: DSv4's saving
// of milliseconds spreads by more than itself on a busy machine, and is
// still a saving in every repeat.
func ProposeRepeated(maps []*Map, costs []Costs, horizon int) (int, *Proposal, Noise) {
	n := Noise{Repeats: len(costs)}
	props := make([]*Proposal, len(costs))
	for i := range costs {
		props[i] = Propose(maps, costs[i], horizon)
		n.SavingNs = append(n.SavingNs, saving(props[i], &costs[i]))
	}
	order := make([]int, len(costs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case n.SavingNs[a] < n.SavingNs[b]:
			return -1
		case n.SavingNs[a] > n.SavingNs[b]:
			return 1
		}
		return 0
	})
	mid := order[(len(order)-1)/2]
	n.MedianSavingNs = n.SavingNs[mid]
	n.SpreadNs = n.SavingNs[order[len(order)-1]] - n.SavingNs[order[0]]
	p := props[mid]
	switch {
	case len(p.Graphs) == 0:
	case n.MedianSavingNs <= 0:
		n.Withheld = fmt.Sprintf("no form proposed: its Graphs are predicted to save %.2f µs a warm pass, which is no saving", n.MedianSavingNs/1e3)
	case n.SavingNs[order[0]] <= 0:
		n.Withheld = fmt.Sprintf("no form proposed: its Graphs are predicted to save %.2f µs a warm pass, within the noise (one of %d calibrations predicts %.2f µs, no saving; the spread is %.2f µs): the model is too small to tell its forms apart on this machine",
			n.MedianSavingNs/1e3, n.Repeats, n.SavingNs[order[0]]/1e3, n.SpreadNs/1e3)
	}
	return mid, p, n
}

// FormSpread is a form's predicted warm control plane over the repeats:
// the least and the most.
type FormSpread struct {
	MinNs float64 `json:"min_ns"`
	MaxNs float64 `json:"max_ns"`
}

// SpreadForms sets each form's spread over the repeats' cost models.
func SpreadForms(forms []FormPrediction, costs []Costs) {
	for i := range forms {
		f := &forms[i]
		s := FormSpread{MinNs: f.PredictedNs, MaxNs: f.PredictedNs}
		for j := range costs {
			v := costs[j].Predict(f.Shape)
			s.MinNs, s.MaxNs = min(s.MinNs, v), max(s.MaxNs, v)
		}
		f.Spread = &s
	}
}

// rate is a figure of the cost model as text, or "—" when it is 0: a zero
// rate is a figure the calibration could not tell from nothing, not a
// measured cost.
func rate(v float64, format string) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

func savingsText(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.2f", x/1e3)
	}
	return s
}
