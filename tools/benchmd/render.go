package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// target is a speed target of the project's issues, checked against the
// run's median of one benchmark's metric.
type target struct {
	pkg, name, unit string
	atMost          bool // the median must be at most bound (else at least)
	bound           float64
	what, upstream  string
}

// targets are the project's speed targets (BENCHMARKS history, issues 12,
// 13 and 28), each with upstream's figure where it measured one.
var targets = []target{
	{"stages", "BenchmarkSubmitEager", "ns/task", true, 250, "ordinary submit, DSv4 eager sequence", "0.75 µs mean (0.28 median)"},
	{"stages", "BenchmarkRecordNode", "ns/node", true, 400, "record, 291-node body, 30-wide boundary", "1.07 µs (27-47 wide)"},
	{"stages", "BenchmarkReplay48", "ns/replay", true, 1000, "replay at width 48", "2.3 µs"},
	{"stages", "BenchmarkReplay48", "allocs/op", true, 0, "replay at width 48, allocations", "—"},
	{"npu", "BenchmarkSimulateDSv4Eager", "ns/op", true, 30e6, "device simulation of one DSv4 step", "—"},
	{"tests", "BenchmarkPassWarm/full", "control-µs", true, 150, "DSv4 full, warm control plane (device skipped)", "2.998 ms best, 3.883 ms median"},
	{"tests", "BenchmarkPassWarm/eager", "host_orch-µs", true, 5000, "DSv4 eager host_orch", "—"},
	{"tests", "BenchmarkPassCold/full", "control-µs", true, 2000, "DSv4 full, cold first pass, fresh runtime", "—"},
	{"tests", "BenchmarkUploadFull", "image-bytes", true, 400 * 1679, "DSv4's 8 Definition images (400 B/node × 1679 nodes)", "≈ 470 B/node"},
}

func (t target) boundText() string {
	op := "≥"
	if t.atMost {
		op = "≤"
	}
	return op + " " + figure(t.bound) + " " + t.unit
}

func render(r *result, scale []scaleRow, benchPath, scalePath string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Benchmarks\n\n")
	p("Written by `make bench` (`tools/benchmd`) from one run's output, `%s`", filepath.ToSlash(benchPath))
	if scalePath != "" {
		p(", and the scaling run's table, `%s`", filepath.ToSlash(scalePath))
	}
	p(". Do not edit it: run `make bench` (about an hour, most of it the scaling\n")
	p("benchmarks), or `make bench-md` to render the committed output again.\n")
	p("Earlier runs, with what each found and changed, are\n[docs/benchmarks-history.md](docs/benchmarks-history.md).\n\n")
	machine := r.cpu
	if machine == "" {
		machine = "an unnamed CPU"
	}
	p("Run of %s on %s (%s/%s", r.date.Format("2006-01-02 15:04 UTC"), machine, r.goos, r.goarch)
	if r.goVersion != "" {
		p(", %s", r.goVersion)
	}
	p("). Each figure is the median of the run's samples (`-count 6`); the\n")
	p("project's box is a shared 2-core VM, so single runs wander: the range\n")
	p("column is the samples' min and max of the first metric. Packages in this\n")
	p("run: %s.\n\n", strings.Join(r.packages(), ", "))

	p("## Targets\n\n")
	p("| what (benchmark) | target | median | | upstream |\n|---|---|---|---|---|\n")
	for _, t := range targets {
		bn := r.find(t.pkg, t.name)
		got, verdict := "not run", "—"
		if bn != nil {
			if v, ok := bn.median(t.unit); ok {
				got = figure(v) + " " + t.unit
				met := v <= t.bound
				if !t.atMost {
					met = v >= t.bound
				}
				verdict = "**missed**"
				if met {
					verdict = "met"
				}
			}
		}
		p("| %s (`%s` `%s`) | %s | %s | %s | %s |\n", t.what, t.pkg, t.name, t.boundText(), got, verdict, t.upstream)
	}

	p("\n## Every benchmark\n\n")
	p("| package | benchmark | median per op | range (first metric) | runs |\n|---|---|---|---|---:|\n")
	for _, id := range r.order {
		bn := r.benches[id]
		var figs []string
		for _, u := range bn.units {
			v, _ := bn.median(u)
			figs = append(figs, figure(v)+" "+u)
		}
		first := bn.samples[bn.units[0]]
		lo, hi := first[0], first[0]
		for _, v := range first {
			lo, hi = min(lo, v), max(hi, v)
		}
		p("| %s | %s | %s | %s–%s %s | %d |\n", bn.pkg, strings.TrimPrefix(bn.name, "Benchmark"), strings.Join(figs, ", "), figure(lo), figure(hi), bn.units[0], bn.runs())
	}

	if len(scale) > 0 {
		p("\n## Scaling\n\n")
		p("Cost per unit of work over sizes a factor of 4 or more apart (`make\n")
		p("bench-scale`): the growth per doubling of size, from the smallest size to\n")
		p("the largest (1× is linear). Each size's figures are in\n")
		p("[docs/bench/bench-scale.md](docs/bench/bench-scale.md), drawn in `docs/bench/bench-scale*.png`.\n\n")
		p("| benchmark | per | sizes | growth (wall) | growth (CPU) |\n|---|---|---|---:|---:|\n")
		for _, s := range scale {
			p("| %s | %s | %s | %s | %s |\n", strings.TrimPrefix(s.name, "Benchmark"), s.per, s.span, s.wall, s.cpu)
		}
	}
	return b.String()
}

// packages are the packages the run benchmarked, in its order.
func (r *result) packages() []string {
	var out []string
	for _, id := range r.order {
		if pkg := r.benches[id].pkg; !slices.Contains(out, pkg) {
			out = append(out, pkg)
		}
	}
	return out
}

// servingSection is the serving runs' table (servingbench's), as it is.
func servingSection(md, path string) string {
	if strings.TrimSpace(md) == "" {
		return ""
	}
	return fmt.Sprintf("\n## Serving runs\n\nFrom [%s](%s) (`make bench-serving`): models whose steps change round to\nround, their keys met as the rounds go.\n\n%s", filepath.ToSlash(path), filepath.ToSlash(path), md)
}
