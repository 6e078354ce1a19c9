// Command benchplot draws hbg's scaling benchmarks (issue 28) from `go test
// -bench` output: for each benchmark family whose sub-benchmarks end in
// <param>=<size> and that reports costs per unit of work (ns/<unit>,
// cpu-ns/<unit>, B/<unit>), a PNG of the per-unit costs against the size on
// log-log axes, and a Markdown table of the per-unit medians at every size
// with the growth per doubling of the size. It is a module of its own so
// that gonum's plot and its dependencies stay out of hbg's.
//
//	go run . -out ../../bench -table table.md ../../bench.txt
package main

import (
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	out := flag.String("out", ".", "directory for the PNGs")
	table := flag.String("table", "", "file for the Markdown table (- for stdout; empty: none)")
	match := flag.String("match", "^Scale", "regexp the benchmark families must match (names without \"Benchmark\")")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchplot [-out dir] [-table file] bench.txt...")
		os.Exit(2)
	}
	re, err := regexp.Compile(*match)
	if err != nil {
		fail(err)
	}
	fams, err := read(flag.Args(), re)
	if err != nil {
		fail(err)
	}
	if len(fams) == 0 {
		fail(errors.New("no benchmark with <param>=<size> sub-benchmarks and per-unit costs"))
	}
	for _, f := range fams {
		path := filepath.Join(*out, f.file()+".png")
		if err := f.plot(path); err != nil {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, "wrote", path)
	}
	if *table != "" {
		w := io.Writer(os.Stdout)
		if *table != "-" {
			fh, err := os.Create(*table)
			if err != nil {
				fail(err)
			}
			defer fh.Close()
			w = fh
		}
		for _, f := range fams {
			f.markdown(w)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchplot:", err)
	os.Exit(1)
}

// family is one benchmark's sub-benchmarks over sizes: BenchmarkScaleKeys,
// or BenchmarkScaleKeysCold/store with its keys=N.
type family struct {
	name, param, unit string
	// samples[metric][size] are the values of every run (-count).
	samples map[string]map[int64][]float64
}

// metrics are the per-unit costs drawn and tabulated, by unit prefix.
var metrics = []struct{ prefix, label string }{
	{"ns/", "wall ns"},
	{"cpu-ns/", "CPU ns"},
	{"B/", "bytes allocated"},
}

var sized = regexp.MustCompile(`^(.*)/([A-Za-z_-]+)=(\d+)(-\d+)?$`)

func read(files []string, match *regexp.Regexp) ([]*family, error) {
	byName := map[string]*family{}
	var order []string
	for _, file := range files {
		fh, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		r := benchfmt.NewReader(fh, file)
		for r.Scan() {
			res, ok := r.Result().(*benchfmt.Result)
			if !ok {
				continue
			}
			m := sized.FindStringSubmatch(string(res.Name))
			if m == nil || !match.MatchString(m[1]) {
				continue
			}
			size, _ := strconv.ParseInt(m[3], 10, 64)
			f := byName[m[1]]
			for _, v := range res.Values {
				// benchfmt tidies ns/<unit> into sec/<unit>; the
				// original is what the benchmark reported.
				unit, val, name := v.OrigUnit, v.OrigValue, ""
				if unit == "" {
					unit, val = v.Unit, v.Value
				}
				for _, mt := range metrics {
					if strings.HasPrefix(unit, mt.prefix) && unit != mt.prefix+"op" {
						name = mt.prefix
						unit = strings.TrimPrefix(unit, mt.prefix)
					}
				}
				if name == "" {
					continue
				}
				if f == nil {
					f = &family{name: "Benchmark" + m[1], param: m[2], unit: unit, samples: map[string]map[int64][]float64{}}
					byName[m[1]] = f
					order = append(order, m[1])
				}
				if f.samples[name] == nil {
					f.samples[name] = map[int64][]float64{}
				}
				f.samples[name][size] = append(f.samples[name][size], val)
			}
		}
		fh.Close()
		if err := r.Err(); err != nil {
			return nil, err
		}
	}
	out := make([]*family, len(order))
	for i, n := range order {
		out[i] = byName[n]
	}
	return out, nil
}

func (f *family) file() string {
	s := strings.TrimPrefix(f.name, "Benchmark")
	s = strings.NewReplacer("/", "-", " ", "-").Replace(s)
	return "bench-" + strings.ToLower(s)
}

func (f *family) sizes() []int64 {
	var s []int64
	for _, m := range f.samples {
		for n := range m {
			if !slices.Contains(s, n) {
				s = append(s, n)
			}
		}
	}
	slices.Sort(s)
	return s
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (f *family) median(metric string, n int64) float64 { return median(f.samples[metric][n]) }

// perDoubling is the factor the cost grows by per doubling of the size
// between sizes a and b.
func perDoubling(ca, cb float64, a, b int64) float64 {
	return math.Pow(cb/ca, 1/math.Log2(float64(b)/float64(a)))
}

func (f *family) markdown(w io.Writer) {
	sizes := f.sizes()
	fmt.Fprintf(w, "\n**%s** (per %s; medians of %d runs; growth per doubling of %s from the size before)\n\n", f.name, f.unit, f.runs(), f.param)
	fmt.Fprintf(w, "| %s | ns/%s | cpu-ns/%s | B/%s | growth (wall) | growth (CPU) |\n|---:|---:|---:|---:|---:|---:|\n", f.param, f.unit, f.unit, f.unit)
	for i, n := range sizes {
		g := func(m string) string {
			if i == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f×", perDoubling(f.median(m, sizes[i-1]), f.median(m, n), sizes[i-1], n))
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s |\n", n, num(f.median("ns/", n)), num(f.median("cpu-ns/", n)), num(f.median("B/", n)), g("ns/"), g("cpu-ns/"))
	}
	if len(sizes) > 1 {
		a, b := sizes[0], sizes[len(sizes)-1]
		fmt.Fprintf(w, "| %d→%d | | | | %.2f× | %.2f× |\n", a, b,
			perDoubling(f.median("ns/", a), f.median("ns/", b), a, b), perDoubling(f.median("cpu-ns/", a), f.median("cpu-ns/", b), a, b))
	}
}

func (f *family) runs() int {
	n := 0
	for _, v := range f.samples["ns/"] {
		n = max(n, len(v))
	}
	return n
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// plot draws the time per unit (wall and CPU) above the bytes per unit,
// both against the size, on log-log axes.
func (f *family) plot(path string) error {
	sizes := f.sizes()
	top, bottom := plot.New(), plot.New()
	top.Title.Text = fmt.Sprintf("%s: cost per %s", f.name, f.unit)
	top.Y.Label.Text = "ns per " + f.unit
	bottom.Y.Label.Text = "bytes per " + f.unit
	bottom.X.Label.Text = f.param
	colors := []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}
	for i, mt := range metrics {
		var pts plotter.XYs
		for _, n := range sizes {
			if v := f.median(mt.prefix, n); !math.IsNaN(v) && v > 0 {
				pts = append(pts, plotter.XY{X: float64(n), Y: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		p := top
		if mt.prefix == "B/" {
			p = bottom
		}
		line, scatter, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color, scatter.Color = colors[i], colors[i]
		scatter.Shape = draw.CircleGlyph{}
		p.Add(line, scatter)
		p.Legend.Add(mt.label, line, scatter)
	}
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, ticks125{}
		p.Legend.Top, p.Legend.Left = true, false
		p.Add(plotter.NewGrid())
		padY(p)
	}
	const w, h = 16 * vg.Centimeter, 14 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	png := vgimg.PngCanvas{Canvas: img}
	if _, err := png.WriteTo(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// padY widens a log axis that spans less than a decade to one, so that a
// flat line is drawn flat, not stretched over the plot's height, and
// leaves the top of the plot to the legend.
func padY(p *plot.Plot) {
	lo, hi := p.Y.Min, p.Y.Max
	if lo <= 0 || hi <= 0 {
		return
	}
	if r := hi / lo; r < 10 {
		mid := math.Sqrt(hi * lo)
		p.Y.Min, p.Y.Max = mid/math.Sqrt(10), mid*math.Sqrt(10)
	}
	// Room above the highest point for the legend.
	p.Y.Max *= math.Pow(p.Y.Max/p.Y.Min, 0.3)
}

// ticks125 labels a log axis at 1, 2 and 5 times each power of ten (the
// other integers unlabelled), so that a cost is read off the plot, not
// only its decade.
type ticks125 struct{}

func (ticks125) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max; e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}
