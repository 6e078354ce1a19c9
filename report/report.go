// Package report draws a run as one self-contained HTML page: the
// headline (the control plane per pass against the ordinary path, the
// saving, the golden verdict, the races), every pass's phases as stacked
// bars (cold and warm apart), compare's forms side by side, a pass's
// simulated device timeline (cores by time, coloured by Graph key, with
// the device_idle before it) and the counts and warnings.
//
// The page has no script and loads nothing: its styles are inline and its
// charts are inline SVG drawn here, so it opens offline, from a mail
// attachment or a CI artifact, as it was written. It is made from the
// run's trace.Report alone (what `hbgrun run --json` writes), so a saved
// report draws the same page later (`hbgrun report RUN.json`).
//
// The headline's figures carry their exact value in a data-value
// attribute beside the text a person reads, so a test (tests/browser_test.go)
// can check what the browser shows against the JSON.
package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/hbg-dev/hbg/trace"
)

// Page is what one page shows: a run's report, or compare's forms (the
// first the baseline).
type Page struct {
	// Title heads the page; "" gives one from the model and forms.
	Title string
	// Forms are the reports, one for run, one per form for compare.
	Forms []*trace.Report
	// Ratios are compare's warm medians over the first form's (nil for a
	// run).
	Ratios []trace.PhaseRatios
}

// Run is the page of one run.
func Run(r *trace.Report) Page { return Page{Forms: []*trace.Report{r}} }

// Compare is the page of compare's forms, the first the baseline.
func Compare(rs []*trace.Report) Page {
	p := Page{Forms: rs, Ratios: make([]trace.PhaseRatios, len(rs))}
	for i, r := range rs {
		p.Ratios[i] = trace.MedianRatios(r, rs[0])
	}
	return p
}

// Write renders the page.
func Write(w io.Writer, p Page) error {
	if len(p.Forms) == 0 {
		return fmt.Errorf("report: no report to draw")
	}
	v := view{Title: p.Title, Compare: len(p.Forms) > 1}
	if v.Title == "" {
		forms := make([]string, len(p.Forms))
		for i, r := range p.Forms {
			forms[i] = r.Form
		}
		v.Title = fmt.Sprintf("hbg: %s %s", p.Forms[0].Model, strings.Join(forms, ", "))
	}
	for i, r := range p.Forms {
		fv := formView{R: r, Headline: r.Headline(), Facts: headlineFacts(r)}
		top := barTop(r)
		fv.Warm = phaseBars(r, false, top)
		fv.Cold = phaseBars(r, true, top)
		fv.Shape = fmt.Sprintf("%s x %s", trace.Plural(int64(r.Rounds), "round"), trace.Plural(int64(r.Ranks), "rank"))
		if r.Timeline != nil {
			// The reader checks a saved report's timeline; a caller's own
			// is checked here, so a bad key is an error and never an index
			// out of range.
			if err := r.Timeline.Check(); err != nil {
				return fmt.Errorf("report: form %s: %w", r.Form, err)
			}
			fv.Timeline = timelineSVG(r.Timeline)
			tl := r.Timeline
			fv.TimelineSlices = trace.Plural(int64(tl.Slices), "slice")
			fv.TimelineCores = trace.Plural(int64(len(tl.Cores)), "core")
			fv.TimelineIdle, fv.TimelineWall = msText(tl.IdleNs), msText(tl.WallNs)
		} else {
			fv.NoTimeline = noTimeline(r)
		}
		fv.Counts = counts(r)
		fv.Alive = aliveSVG(r.Counts.DefinitionsAlive)
		if p.Ratios != nil {
			fv.Ratio = &p.Ratios[i]
		}
		v.Forms = append(v.Forms, fv)
	}
	if v.Compare {
		v.Side = compareSVG(p.Forms)
		v.Table = compareTable(p.Forms, p.Ratios)
	}
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("report: write: %w", err)
	}
	return nil
}

type view struct {
	Title   string
	Compare bool
	Forms   []formView
	Side    template.HTML
	Table   compareRows
}

type formView struct {
	R        *trace.Report
	Headline string
	// Shape is "5 rounds x 1 rank".
	Shape    string
	Facts    []fact
	Ratio    *trace.PhaseRatios
	Warm     template.HTML
	Cold     template.HTML
	Timeline template.HTML
	// The timeline's heading figures, as text.
	TimelineSlices, TimelineCores, TimelineIdle, TimelineWall string
	// NoTimeline says why there is no timeline.
	NoTimeline string
	Counts     []fact
	// Alive is the Definitions rank 0 kept after each round, as a line.
	Alive template.HTML
}

// noTimeline says why a report has no device timeline: the device was
// skipped, or it ran and the run kept none (run --json keeps one only with
// --html or --trace-out, which is not the device being skipped).
func noTimeline(r *trace.Report) string {
	if ns, ok := r.DeviceWall(); ok {
		return "The device ran (device wall " + msText(ns) + " simulated), but this report keeps no timeline of it: " +
			"run and compare keep one with --html or --trace-out."
	}
	return "No device timeline: the device did not run in this report (--skip-device)."
}

// fact is one figure: its name, its exact value (data-value) and how a
// person reads it.
type fact struct {
	Field, Label, Value, Text string
	// Bad marks a figure that fails the run (a golden mismatch, races).
	Bad bool
}

func headlineFacts(r *trace.Report) []fact {
	var fs []fact
	cp, class := r.Phases.ControlPlane, "warm"
	if cp.N == 0 {
		cp, class = r.ColdPhases.ControlPlane, "cold"
	}
	if cp.N > 0 {
		fs = append(fs, fact{Field: "control_plane_median_ns", Label: "control plane per pass (" + class + " median)",
			Value: strconv.FormatInt(cp.MedianNs, 10), Text: msText(cp.MedianNs)})
	}
	if bl := r.Baseline; bl != nil {
		fs = append(fs, fact{Field: "baseline_host_orch_ns", Label: bl.Form + " host_orch (the ordinary path)",
			Value: strconv.FormatInt(bl.HostOrchNs, 10), Text: msText(bl.HostOrchNs)})
		if bl.Saving != nil && bl.Form != r.Form {
			fs = append(fs, fact{Field: "saving", Label: "saving", Value: strconv.FormatFloat(*bl.Saving, 'g', -1, 64),
				Text: fmt.Sprintf("%.3gx", *bl.Saving)})
		}
	}
	if g := r.Golden; g != nil {
		fs = append(fs, fact{Field: "golden_verdict", Label: "golden (against the " + g.Reference + ")", Value: g.Verdict, Text: g.Verdict, Bad: g.Verdict != "match"})
		text := strconv.Itoa(g.Races)
		if g.DeclaredRaces > 0 {
			text += fmt.Sprintf(" (%d declared)", g.DeclaredRaces)
		}
		if g.EagerRaces > 0 && g.Races == 0 {
			text += fmt.Sprintf(" (its eager form: %d)", g.EagerRaces)
		}
		fs = append(fs, fact{Field: "races", Label: "races", Value: strconv.Itoa(g.Races), Text: text, Bad: g.Races > 0})
	} else {
		fs = append(fs, fact{Field: "golden_verdict", Label: "golden", Value: "", Text: "not checked"})
	}
	if ns, ok := r.DeviceWall(); ok {
		fs = append(fs, fact{Field: "device_wall_ns", Label: "device wall (simulated)", Value: strconv.FormatInt(ns, 10), Text: msText(ns)})
	}
	return fs
}

func counts(r *trace.Report) []fact {
	c := &r.Counts
	f := func(field string, v int64) fact {
		return fact{Field: field, Label: field, Value: strconv.FormatInt(v, 10), Text: strconv.FormatInt(v, 10)}
	}
	return []fact{
		f("device_tasks", c.DeviceTasks), f("host_submissions", c.HostSubmissions),
		f("ordinary_tasks", c.OrdinaryTasks), f("graph_submissions", c.GraphSubmissions),
		f("definitions", c.Definitions), f("recorded_definitions", c.RecordedDefinitions),
		f("recorded_nodes", c.RecordedNodes), f("demoted", c.Demoted),
		f("boundary_mismatches", c.BoundaryMismatches), f("loaded_definitions", c.LoadedDefinitions),
		f("store_rejected", c.StoreRejected), f("fetched_definitions", c.FetchedDefinitions),
		f("fetch_rejected", c.FetchRejected),
		f("graph_calls", c.GraphCalls), f("shell_calls", c.ShellCalls),
		f("ordinary_while_recording", c.OrdinaryWhileRecording), f("record_wait_ns", c.RecordWaitNs),
		f("keys_met", c.KeysMet), f("evicted_definitions", c.EvictedDefinitions), f("rerecorded", c.Rerecorded),
		f("kept_bytes_max", c.KeptBytesMax), f("device_definition_bytes_max", c.DeviceBytesMax),
	}
}

// aliveSVG draws the Definitions a rank kept round by round as a line: a
// run whose keys change grows it as it meets them, and a residency budget
// holds it flat. Nothing for a run of one round.
func aliveSVG(alive []int) template.HTML {
	if len(alive) < 2 {
		return ""
	}
	const left, width, height, top = 60, 720, 120, 8
	hi := 1
	for _, v := range alive {
		hi = max(hi, v)
	}
	var s svg
	s.open(left+width+40, top+height+40, "Definitions alive over rounds")
	xs := float64(width) / float64(len(alive)-1)
	ys := float64(height) / float64(hi)
	var pts strings.Builder
	for i, v := range alive {
		fmt.Fprintf(&pts, "%.1f,%.1f ", float64(left)+float64(i)*xs, float64(top+height)-float64(v)*ys)
	}
	fmt.Fprintf(&s.b, `<polyline class="alive" data-rounds="%d" data-max="%d" points="%s" fill="none" stroke="#1565c0" stroke-width="1.5"/>`,
		len(alive), hi, strings.TrimSpace(pts.String()))
	s.text(left-6, top+9, "end", strconv.Itoa(hi))
	s.text(left-6, top+height, "end", "0")
	s.text(left, top+height+16, "start", "round 0")
	s.text(left+width, top+height+16, "end", fmt.Sprintf("round %d", len(alive)-1))
	s.text(left+width/2, top+height+32, "middle", "Definitions rank 0 keeps after each round")
	return s.close()
}

// msText is ns as ms, three significant digits below 0.1 ms (as compare).
func msText(ns int64) string {
	ms := float64(ns) / 1e6
	d := 3
	for v := ms; v != 0 && v < 0.1 && d < 9; v *= 10 {
		d++
	}
	return strconv.FormatFloat(ms, 'f', d, 64) + " ms"
}

// The phases a pass's bar stacks: the host's (args, host_orch) and the
// control plane's; device_wall is simulated time, orders of magnitude
// longer, and is its own figure.
var barPhases = []trace.Phase{trace.PhaseArgs, trace.PhaseHostOrch, trace.PhaseGraphUpload, trace.PhaseArenaH2D}

// phaseColour tells the four bar phases apart (grey, blue, orange,
// purple: no two greens or two blues, and none of them the Graph keys'
// first colours in the timeline beside them).
var phaseColour = map[trace.Phase]string{
	trace.PhaseArgs:        "#9e9e9e",
	trace.PhaseHostOrch:    "#2f6db5",
	trace.PhaseGraphUpload: "#e08a2c",
	trace.PhaseArenaH2D:    "#8e5bb5",
}

// maxBars bounds the passes one chart draws: past it a bar is under a
// few pixels tall and the page grows with the run.
const maxBars = 120

// barsWidth is the pixels a phase chart's bars span at their longest.
const barsLeft, barsWidth = 120, 640

// barTop is the longest bar of a report's passes, cold and warm: both
// charts are drawn to it, so a 2.7 ms cold pass is drawn six times as long
// as a 0.46 ms warm one.
func barTop(r *trace.Report) int64 {
	var top int64
	for _, p := range r.Passes {
		var sum int64
		for _, ph := range barPhases {
			sum += p.Phases[ph]
		}
		top = max(top, sum)
	}
	return top
}

// phaseBars draws the cold or warm passes' phases, one stacked bar each,
// on the scale of top, with a time axis.
func phaseBars(r *trace.Report, cold bool, top int64) template.HTML {
	var ps []trace.Pass
	for _, p := range r.Passes {
		if p.Cold == cold {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return ""
	}
	shown := ps
	if len(shown) > maxBars {
		shown = shown[:maxBars]
	}
	const barH, gap = 14, 4
	h := len(shown)*(barH+gap) + 64
	var s svg
	s.open(barsLeft+barsWidth+260, h, "phases of the "+map[bool]string{true: "cold", false: "warm"}[cold]+" passes")
	scale := float64(barsWidth) / float64(max(top, 1))
	for i, p := range shown {
		y := 6 + i*(barH+gap)
		s.text(4, y+barH-3, "start", fmt.Sprintf("rank %d round %d", p.Rank, p.Round))
		x := float64(barsLeft)
		var sum int64
		for _, ph := range barPhases {
			v := p.Phases[ph]
			if !p.Has(ph) || v <= 0 {
				continue
			}
			w := float64(v) * scale
			s.rect(x, float64(y), w, barH, phaseColour[ph], fmt.Sprintf("rank %d round %d: %s %s", p.Rank, p.Round, ph, msText(v)))
			x += w
			sum += v
		}
		dw := ""
		if p.Has(trace.PhaseDeviceWall) {
			dw = ", device " + msText(p.Phases[trace.PhaseDeviceWall])
		}
		s.text(int(x)+4, y+barH-3, "start", msText(sum)+dw)
	}
	y := 6 + len(shown)*(barH+gap)
	s.axis(barsLeft, barsWidth, top, y, "host time")
	y += 28
	x := s.legend(barsLeft, y)
	if len(ps) > len(shown) {
		s.text(x, y+9, "start", fmt.Sprintf("first %d of %d passes", len(shown), len(ps)))
	}
	return s.close()
}

// compareSVG draws each form's warm medians side by side: one stacked bar
// per form, on one scale, so the ordinary path's host_orch stands beside
// the Graph forms' control planes.
func compareSVG(rs []*trace.Report) template.HTML {
	var top int64
	for _, r := range rs {
		var sum int64
		for _, ph := range barPhases {
			sum += r.Phases.Phases[ph].MedianNs
		}
		top = max(top, sum)
	}
	const barH, gap = 22, 8
	h := len(rs)*(barH+gap) + 64
	var s svg
	s.open(barsLeft+barsWidth+220, h, "warm medians per form")
	scale := float64(barsWidth) / float64(max(top, 1))
	for i, r := range rs {
		y := 6 + i*(barH+gap)
		s.text(4, y+barH-6, "start", r.Form)
		x := float64(barsLeft)
		for _, ph := range barPhases {
			st := r.Phases.Phases[ph]
			if st.N == 0 || st.MedianNs <= 0 {
				continue
			}
			w := float64(st.MedianNs) * scale
			s.rect(x, float64(y), w, barH, phaseColour[ph], fmt.Sprintf("%s: %s median %s", r.Form, ph, msText(st.MedianNs)))
			x += w
		}
		s.text(int(x)+4, y+barH-6, "start", "control plane "+msText(r.Phases.ControlPlane.MedianNs))
	}
	y := 6 + len(rs)*(barH+gap)
	s.axis(barsLeft, barsWidth, top, y, "host time")
	s.legend(barsLeft, y+28)
	return s.close()
}

// niceStep is 1, 2 or 5 times a power of ten, the least at least span/n.
func niceStep(span float64, n int) float64 {
	raw := span / float64(n)
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// axis draws a time axis from x over width pixels for span ns at y: a
// line, a tick and a label at each step (ms, as many decimals as the step
// needs), and the clock's name at its end.
func (s *svg) axis(x, width int, span int64, y int, clock string) {
	if span <= 0 {
		return
	}
	fmt.Fprintf(&s.b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#666"/>`, x, y, x+width, y)
	step := niceStep(float64(span), 5)
	dec := max(0, int(-math.Floor(math.Log10(step/1e6)+1e-9)))
	scale := float64(width) / float64(span)
	for v := 0.0; v <= float64(span)*(1+1e-9); v += step {
		px := float64(x) + v*scale
		fmt.Fprintf(&s.b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#666"/>`, px, y, px, y+4)
		s.text(int(px), y+15, "middle", strconv.FormatFloat(v/1e6, 'f', dec, 64))
	}
	s.text(x+width+14, y+15, "start", "ms "+clock)
}

type compareRows struct {
	Forms []string
	Rows  []compareRow
}

type compareRow struct {
	Name  string
	Cells []string
}

func compareTable(rs []*trace.Report, ratios []trace.PhaseRatios) compareRows {
	t := compareRows{}
	for _, r := range rs {
		t.Forms = append(t.Forms, r.Form)
	}
	cell := func(ns int64, ratio *float64) string {
		x := "-"
		if ratio != nil {
			x = fmt.Sprintf("%.3gx", *ratio)
		}
		return msText(ns) + " (" + x + ")"
	}
	for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
		row := compareRow{Name: ph.String()}
		for i, r := range rs {
			row.Cells = append(row.Cells, cell(r.Phases.Phases[ph].MedianNs, ratios[i].Phase(ph)))
		}
		t.Rows = append(t.Rows, row)
	}
	row := compareRow{Name: "control_plane"}
	for i, r := range rs {
		row.Cells = append(row.Cells, cell(r.Phases.ControlPlane.MedianNs, ratios[i].ControlPlane))
	}
	t.Rows = append(t.Rows, row)
	row = compareRow{Name: rs[0].Form + " host_orch / control_plane"}
	for i := range rs {
		x := "-"
		if v := ratios[i].Saving; v != nil {
			x = fmt.Sprintf("%.3gx", *v)
		}
		row.Cells = append(row.Cells, x)
	}
	t.Rows = append(t.Rows, row)
	row = compareRow{Name: "golden"}
	for _, r := range rs {
		g := "skipped"
		if r.Golden != nil {
			g = r.Golden.Verdict
		}
		row.Cells = append(row.Cells, g)
	}
	t.Rows = append(t.Rows, row)
	return t
}

// keyPalette is the Graph keys' colours, one each, told apart at a glance
// (a qualitative set with no two greens); past it hues a golden angle
// apart at alternating lightness. The ordinary tasks (0) are grey.
var keyPalette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79", "#ad494a", "#f7b6d2"}

func keyColour(i int) string {
	if i == 0 {
		return "#8a8a8a"
	}
	if i-1 < len(keyPalette) {
		return keyPalette[i-1]
	}
	j := i - 1 - len(keyPalette)
	h := math.Mod(float64(j)*137.508+20, 360)
	return fmt.Sprintf("hsl(%.0f,62%%,%d%%)", h, 38+(j%2)*22)
}

// timelineSVG draws a pass's device: a row per core, simulated time to
// the right on an axis, the device_idle before the pass as a hatched band
// to its left, and a legend of the Graph keys by the core time they took.
// Segments of one key that meet within a pixel are drawn as one rect (a
// gap under a pixel does not show): DSv4's four forms drew 15.6 MB of
// rects otherwise.
func timelineSVG(t *trace.DeviceTimeline) template.HTML {
	const left, rowH, top = 56, 6, 8
	width := max(t.Width, 200)
	span := t.WallNs + t.IdleNs
	if span <= 0 {
		span = 1
	}
	scale := float64(width) / float64(span)
	x0 := float64(left) + float64(t.IdleNs)*scale
	keyBusy := make([]int64, len(t.Keys))
	for _, c := range t.Cores {
		for _, sg := range c.Segments {
			keyBusy[sg.Key] += sg.BusyNs
		}
	}
	labels := make([]string, len(t.Keys))
	longest := 0
	for i, k := range t.Keys {
		labels[i] = fmt.Sprintf("%s: %s of core time", keyName(k), msText(keyBusy[i]))
		longest = max(longest, len(labels[i]))
	}
	// 11px system-ui is at most about 7px a character.
	colW := 14 + 7*longest + 16
	cols := max(1, (width+left)/colW)
	legendRows := (len(t.Keys) + cols - 1) / cols
	rows := len(t.Cores) * rowH
	axisY := top + rows + 4
	h := axisY + 30 + legendRows*16
	var s svg
	s.open(left+width+90, h, fmt.Sprintf("device timeline of rank %d round %d", t.Rank, t.Round))
	s.b.WriteString(`<defs><pattern id="idle" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#d0d0d0"/></pattern></defs>`)
	if t.IdleNs > 0 {
		s.rect(float64(left), top, x0-float64(left), float64(rows), "url(#idle)", "device_idle "+msText(t.IdleNs)+": the device waited for the host before this pass")
	}
	for i, c := range t.Cores {
		y := float64(top + i*rowH)
		if i%8 == 0 || i == len(t.Cores)-1 && i%8 > 2 {
			s.text(2, int(y)+rowH+3, "start", c.Name)
		}
		coreRow(&s, c, t.Keys, x0, y, rowH, scale)
	}
	if t.IdleNs > 0 && x0-float64(left) >= 80 {
		s.text(int((float64(left)+x0)/2), axisY+15, "middle", "idle "+msText(t.IdleNs))
	}
	s.axis(int(x0), int(float64(t.WallNs)*scale), t.WallNs, axisY, "simulated")
	for i := range t.Keys {
		x := left + (i%cols)*colW
		y := axisY + 24 + (i/cols)*16
		s.rect(float64(x), float64(y), 10, 10, keyColour(i), keyName(t.Keys[i]))
		s.text(x+14, y+9, "start", labels[i])
	}
	return s.close()
}

// coreRow draws one core's segments, those of one key that meet within a
// pixel as one rect (its title says how many).
func coreRow(s *svg, c trace.TimelineCore, keys []string, x0, y float64, rowH int, scale float64) {
	type run struct {
		x, end   float64
		key, n   int
		from, to int64
		first    trace.TimelineSegment
	}
	var r *run
	flush := func() {
		if r == nil {
			return
		}
		sg := r.first
		title := fmt.Sprintf("%s: %s, %s at %s", c.Name, keyName(keys[sg.Key]), msText(sg.DurNs), msText(sg.StartNs))
		switch {
		case r.n > 1:
			title = fmt.Sprintf("%s: %s, %d segments, %s to %s", c.Name, keyName(keys[r.key]), r.n, msText(r.from), msText(r.to))
		case sg.Slices > 1:
			title += fmt.Sprintf(" (%d slices, busy %s)", sg.Slices, msText(sg.BusyNs))
		case sg.Kernel != "":
			title += ", kernel " + sg.Kernel
		}
		if w := r.end - r.x; w < 3 {
			// A rect under 3 px is too thin to point at; its title would
			// be most of the page's bytes.
			fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%d" fill="%s"/>`, r.x, y, max(w, 0.5), rowH-1, keyColour(r.key))
		} else {
			s.rect(r.x, y, w, float64(rowH-1), keyColour(r.key), title)
		}
		r = nil
	}
	for _, sg := range c.Segments {
		x := x0 + float64(sg.StartNs)*scale
		end := x + float64(sg.DurNs)*scale
		if r != nil && r.key == sg.Key && x <= r.end+1 {
			r.end, r.n, r.to = max(r.end, end), r.n+1, sg.StartNs+sg.DurNs
			continue
		}
		flush()
		r = &run{x: x, end: end, key: sg.Key, n: 1, from: sg.StartNs, to: sg.StartNs + sg.DurNs, first: sg}
	}
	flush()
}

func keyName(k string) string {
	if k == "" {
		return "ordinary tasks"
	}
	return k
}

// svg builds one inline chart; every text is escaped.
type svg struct{ b strings.Builder }

// legend draws one swatch per bar phase in a row from x at y, each label
// given its own width (11px system-ui is at most about 7px a character),
// and returns the x past the last, where a chart may add a note.
func (s *svg) legend(x, y int) int {
	for _, ph := range barPhases {
		s.rect(float64(x), float64(y), 10, 10, phaseColour[ph], ph.String())
		s.text(x+14, y+9, "start", ph.String())
		x += 14 + 7*len(ph.String()) + 18
	}
	return x
}

func (s *svg) open(w, h int, label string) {
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		w, h, w, h, template.HTMLEscapeString(label))
}

func (s *svg) rect(x, y, w, h float64, fill, title string) {
	fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="%s"><title>%s</title></rect>`,
		x, y, w, h, template.HTMLEscapeString(fill), template.HTMLEscapeString(title))
}

func (s *svg) text(x, y int, anchor, t string) {
	fmt.Fprintf(&s.b, `<text x="%d" y="%d" text-anchor="%s">%s</text>`, x, y, anchor, template.HTMLEscapeString(t))
}

// close ends the chart. Its content was escaped as it was written.
func (s *svg) close() template.HTML {
	s.b.WriteString("</svg>")
	return template.HTML(s.b.String()) //nolint:gosec // every text above is escaped
}
