// Command benchmd writes BENCHMARKS.md from a run's output: the go test
// -bench output of make bench (bench.txt) and the scaling table benchplot
// wrote from make bench-scale (bench-scale.md), and the serving runs'
// table servingbench wrote from make bench-serving (bench-serving.md).
// Every figure on the page is
// a median of that run, so the page says what the code does now; the
// history of earlier runs is docs/benchmarks-history.md.
//
//	go run ./tools/benchmd -bench docs/bench/bench.txt -scale docs/bench/bench-scale.md -o BENCHMARKS.md
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxLines bounds the page: one current table, not a notebook.
const maxLines = 200

func main() {
	bench := flag.String("bench", "docs/bench/bench.txt", "go test -bench output (make bench)")
	scale := flag.String("scale", "docs/bench/bench-scale.md", "benchplot's scaling table (make bench-scale); empty: none")
	serving := flag.String("serving", "docs/bench/bench-serving.md", "servingbench's table (make bench-serving), put on the page as it is; empty: none")
	goVersion := flag.String("go", "", "the Go version the run used (go env GOVERSION)")
	out := flag.String("o", "BENCHMARKS.md", "the page to write")
	flag.Parse()
	if err := run(*bench, *scale, *serving, *goVersion, *out); err != nil {
		fmt.Fprintln(os.Stderr, "benchmd:", err)
		os.Exit(1)
	}
}

func run(benchPath, scalePath, servingPath, goVersion, outPath string) error {
	f, err := os.Open(benchPath)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	r, err := parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", benchPath, err)
	}
	r.date = st.ModTime().UTC()
	r.goVersion = goVersion
	var scale []scaleRow
	if scalePath != "" {
		b, err := os.ReadFile(scalePath)
		if err != nil {
			return err
		}
		scale = parseScale(string(b))
	}
	var serving string
	if servingPath != "" {
		b, err := os.ReadFile(servingPath)
		if err != nil {
			return err
		}
		serving = string(b)
	}
	page := render(r, scale, benchPath, scalePath) + servingSection(serving, servingPath)
	if n := strings.Count(page, "\n"); n > maxLines {
		return fmt.Errorf("the page would be %d lines, more than %d: fewer benchmarks, or fold sub-benchmarks", n, maxLines)
	}
	return os.WriteFile(outPath, []byte(page), 0o644)
}

// result is one go test -bench run: every benchmark's samples, in order.
type result struct {
	cpu, goos, goarch string
	date              time.Time
	goVersion         string
	order             []string // package/benchmark, first seen first
	benches           map[string]*bench
}

type bench struct {
	pkg, name string
	units     []string // in the order the benchmark reports them
	samples   map[string][]float64
}

func (b *bench) median(unit string) (float64, bool) {
	v := slices.Clone(b.samples[unit])
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

func (b *bench) runs() int { return len(b.samples[b.units[0]]) }

// gomaxprocs is the -N go test appends to a benchmark's name.
var gomaxprocs = regexp.MustCompile(`-[0-9]+$`)

// parse reads go test -bench output: "pkg:" lines and benchmark lines
// (name, iterations, then value-unit pairs); the rest is ignored.
func parse(r io.Reader) (*result, error) {
	res := &result{benches: map[string]*bench{}}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "Benchmark") {
			switch k {
			case "pkg":
				pkg = strings.TrimPrefix(v, "github.com/hbg-dev/hbg/")
			case "cpu":
				res.cpu = v
			case "goos":
				res.goos = v
			case "goarch":
				res.goarch = v
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := gomaxprocs.ReplaceAllString(f[0], "")
		id := pkg + " " + name
		b := res.benches[id]
		if b == nil {
			b = &bench{pkg: pkg, name: name, samples: map[string][]float64{}}
			res.benches[id] = b
			res.order = append(res.order, id)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a number", name, f[i])
			}
			u := f[i+1]
			if _, seen := b.samples[u]; !seen {
				b.units = append(b.units, u)
			}
			b.samples[u] = append(b.samples[u], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(res.order) == 0 {
		return nil, errors.New("no benchmark lines (is it go test -bench output?)")
	}
	return res, nil
}

// find is the benchmark of that package and name.
func (r *result) find(pkg, name string) *bench { return r.benches[pkg+" "+name] }

// figure formats a value with three significant digits, as benchstat does.
func figure(v float64) string {
	switch a := abs(v); {
	case v == float64(int64(v)):
		return strconv.FormatInt(int64(v), 10) // a count, or ns too large for decimals
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// scaleRow is one scaling benchmark's growth from its smallest size to its
// largest, the last row of its table in bench-scale.md.
type scaleRow struct {
	name, per, span, wall, cpu string
}

var (
	scaleHead = regexp.MustCompile(`^\*\*(Benchmark[^*]+)\*\* \(per ([^;]+);`)
	spanRow   = regexp.MustCompile(`^\| ([^|]*→[^|]*) \|.*\| ([^|]*) \| ([^|]*) \|$`)
)

func parseScale(md string) []scaleRow {
	var out []scaleRow
	var cur *scaleRow
	for _, line := range strings.Split(md, "\n") {
		if m := scaleHead.FindStringSubmatch(line); m != nil {
			out = append(out, scaleRow{name: m[1], per: m[2]})
			cur = &out[len(out)-1]
			continue
		}
		if m := spanRow.FindStringSubmatch(line); m != nil && cur != nil {
			cur.span, cur.wall, cur.cpu = strings.TrimSpace(m[1]), strings.TrimSpace(m[2]), strings.TrimSpace(m[3])
		}
	}
	return out
}
