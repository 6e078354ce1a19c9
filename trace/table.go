package trace

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Stat is the spread of one figure over a set of passes.
type Stat struct {
	MinNs    int64 `json:"min_ns"`
	MedianNs int64 `json:"median_ns"`
	MaxNs    int64 `json:"max_ns"`
	N        int   `json:"n"`
}

// StatOf summarizes values. The median of an even count is the mean of the
// two middle values, truncated to whole ns (as Python's statistics.median,
// which upstream's tools use, up to the truncation). The zero Stat (N = 0)
// stands for "not measured". values is not modified.
func StatOf(values []int64) Stat {
	if len(values) == 0 {
		return Stat{}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		a, b := s[n/2-1], s[n/2]
		med = a + (b-a)/2 // no overflow, and exact for the non-negative ns here
	}
	return Stat{MinNs: s[0], MedianNs: med, MaxNs: s[n-1], N: n}
}

// PhaseStats is one class of passes (warm or cold) summarized per phase,
// plus the control plane.
type PhaseStats struct {
	Phases [NumPhases]Stat
	// ControlPlane is the min / median / max of per-pass sums of the
	// control-plane phases. It is never a sum of per-phase minima: the
	// fastest host_orch and the fastest graph_upload seldom come from the same
	// pass, and a sum of minima describes a pass that never ran (upstream saw
	// the two rules move in opposite directions on one change).
	ControlPlane Stat
	// DeviceIdle is the min / median / max of the passes' device_idle (the
	// passes that measured device_wall).
	DeviceIdle Stat
	// Passes is the number of passes in the class.
	Passes int
	// Partial lists phases measured in some but not all passes of the class:
	// their n is below Passes and their figures cover fewer passes.
	Partial []Phase
}

// Table is the phase table of a run: warm passes and cold passes apart, and
// the per-operation totals of all passes.
type Table struct {
	// Warm covers every pass but the first of each rank.
	Warm PhaseStats
	// Cold covers the first pass of each rank.
	Cold PhaseStats
	// Ops sums the per-operation totals over all passes, cold and warm.
	Ops Ops
	// WarmOps sums them over the warm passes only (what a steady decode step
	// costs).
	WarmOps Ops
}

// Summarize computes the phase table. Passes are classed by their Cold
// field (NewPass sets it for round 0, the first pass of each rank), so with
// rounds 5 × ranks 2 the warm figures have n = 8 and the cold ones n = 2.
// It is a pure function of its input: the order of passes does not matter.
func Summarize(passes []Pass) Table {
	var t Table
	var warm, cold []Pass
	for i := range passes {
		p := &passes[i]
		t.Ops.Merge(&p.Ops)
		if p.Cold {
			cold = append(cold, *p)
		} else {
			warm = append(warm, *p)
			t.WarmOps.Merge(&p.Ops)
		}
	}
	t.Warm = summarizeClass(warm)
	t.Cold = summarizeClass(cold)
	return t
}

func summarizeClass(passes []Pass) PhaseStats {
	st := PhaseStats{Passes: len(passes)}
	vals := make([]int64, 0, len(passes))
	for ph := Phase(0); ph < NumPhases; ph++ {
		vals = vals[:0]
		for i := range passes {
			if passes[i].Has(ph) {
				vals = append(vals, passes[i].Phases[ph])
			}
		}
		st.Phases[ph] = StatOf(vals)
		if len(vals) > 0 && len(vals) < len(passes) {
			st.Partial = append(st.Partial, ph)
		}
	}
	vals = vals[:0]
	for i := range passes {
		if sum, ok := passes[i].ControlPlaneNs(); ok {
			vals = append(vals, sum)
		}
	}
	st.ControlPlane = StatOf(vals)
	vals = vals[:0]
	for i := range passes {
		if passes[i].Has(PhaseDeviceWall) {
			vals = append(vals, passes[i].DeviceIdleNs)
		}
	}
	st.DeviceIdle = StatOf(vals)
	return st
}

// WriteText renders the table as upstream's hbg_bind_phases does: one row per
// phase (min / median / max in ms, n), `*` on control-plane phases, a `total`
// row that is the spread of per-pass control-plane sums; warm passes first,
// then the cold ones; then the per-operation totals.
func (t *Table) WriteText(w io.Writer) error { return t.writeText(w, true) }

// writeText is WriteText; without all, an op no pass ran (count 0) is left
// out.
func (t *Table) writeText(w io.Writer, all bool) error {
	var b strings.Builder
	writeClass(&b, "warm passes", &t.Warm)
	writeClass(&b, "cold passes (first of each rank)", &t.Cold)
	writeOps(&b, &t.Ops, all)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("trace: write phase table: %w", err)
	}
	return nil
}

// Row layout of the phase table: the name left, figures right.
const (
	rowFmt   = "  %-18s %1s %10s %10s %10s %4s\n"
	opRowFmt = "  %-18s %10s %10s %10s\n"
)

func writeClass(b *strings.Builder, title string, st *PhaseStats) {
	fmt.Fprintf(b, "%s: %d\n", title, st.Passes)
	if st.Passes == 0 {
		return
	}
	fmt.Fprintf(b, rowFmt, "phase", "", "min_ms", "median_ms", "max_ms", "n")
	cp := 0
	var absent []string
	for ph := Phase(0); ph < NumPhases; ph++ {
		s := st.Phases[ph]
		star := ""
		if ph.ControlPlane() {
			star = "*"
			if s.N > 0 {
				cp++
			} else {
				absent = append(absent, ph.String())
			}
		}
		name := ph.String()
		if ph == PhaseDeviceWall {
			name += " (sim)"
		}
		if s.N == 0 {
			fmt.Fprintf(b, rowFmt, name, star, "-", "-", "-", "0")
			continue
		}
		fmt.Fprintf(b, rowFmt, name, star, ms(s.MinNs), ms(s.MedianNs), ms(s.MaxNs), strconv.Itoa(s.N))
		if d := st.DeviceIdle; ph == PhaseDeviceWall && d.N > 0 {
			fmt.Fprintf(b, rowFmt, "device_idle (sim)", "", ms(d.MinNs), ms(d.MedianNs), ms(d.MaxNs), strconv.Itoa(d.N))
		}
	}
	if c := st.ControlPlane; c.N > 0 {
		fmt.Fprintf(b, rowFmt, "total", "*", ms(c.MinNs), ms(c.MedianNs), ms(c.MaxNs), strconv.Itoa(c.N))
	}
	fmt.Fprintf(b, "  (total: min/median/max of per-pass sums over %d of 3 control-plane phases", cp)
	if len(absent) > 0 {
		fmt.Fprintf(b, "; absent from every pass: %s", strings.Join(absent, ", "))
	}
	b.WriteString(")\n")
	if len(st.Partial) > 0 {
		names := make([]string, len(st.Partial))
		for i, ph := range st.Partial {
			names[i] = ph.String()
		}
		fmt.Fprintf(b, "  (warning: missing from some passes: %s)\n", strings.Join(names, ", "))
	}
}

func writeOps(b *strings.Builder, o *Ops, all bool) {
	fmt.Fprintf(b, "host_orch operations (all passes; summed cost, not intervals):\n")
	fmt.Fprintf(b, opRowFmt, "op", "count", "total_ms", "mean_ns")
	for op := Op(0); op < NumOps; op++ {
		t := o[op]
		if !all && t.Count == 0 && t.TotalNs == 0 {
			continue
		}
		mean := int64(0)
		if t.Count > 0 {
			mean = t.TotalNs / t.Count
		}
		fmt.Fprintf(b, opRowFmt, op.String(), strconv.FormatInt(t.Count, 10), ms(t.TotalNs), strconv.FormatInt(mean, 10))
	}
}

// ms renders ns as ms with µs resolution, the unit upstream's table uses.
func ms(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) }

// Plural is n and its noun, the noun in the plural unless n is 1: "1 rank",
// "5 rounds", "1 Definition". nouns is the singular, or the singular and
// the plural when adding s will not do.
func Plural(n int64, nouns ...string) string {
	if n == 1 {
		return strconv.FormatInt(n, 10) + " " + nouns[0]
	}
	if len(nouns) > 1 {
		return strconv.FormatInt(n, 10) + " " + nouns[1]
	}
	return strconv.FormatInt(n, 10) + " " + nouns[0] + "s"
}
