// Command servingbench measures serving runs: the models whose steps
// change (config/models/*_serving.yaml), each form and each choice of
// --new-keys, with and without a residency budget below the working set,
// beside the static models' control plane. It runs the hbgrun binary it is
// given (`hbgrun run --json`) and writes a Markdown table that benchmd
// puts on BENCHMARKS.md.
//
//	go build -o /tmp/hbgrun ./cmd/hbgrun
//	go run ./tools/servingbench -hbgrun /tmp/hbgrun -o docs/bench/bench-serving.md
//
// Each figure is the median over -repeat runs of -rounds rounds with the
// device skipped (the control plane alone); one more run of each with the
// device simulated gives the golden verdict.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is one row: a model file, its form, --new-keys and
// --keep-definitions (0: no budget); static names the static model's row
// its control plane is compared with.
type config struct {
	model, form, newKeys string
	keep                 int
	static               string
}

var rows = []config{
	{"qwen3_14b_decode_serving", "graph", "wait", 0, "qwen3_14b_decode"},
	{"qwen3_14b_decode_serving", "graph", "ordinary", 0, "qwen3_14b_decode"},
	{"qwen3_14b_decode_serving", "bucketed", "wait", 0, "qwen3_14b_decode"},
	{"qwen3_14b_decode_serving", "bucketed", "ordinary", 0, "qwen3_14b_decode"},
	{"qwen3_14b_decode_serving", "graph", "wait", 4, "qwen3_14b_decode"},
	{"qwen3_14b_decode_serving", "graph", "ordinary", 4, "qwen3_14b_decode"},
	{"dsv4_flash_decode_serving", "full", "wait", 0, "dsv4_flash_decode"},
	{"dsv4_flash_decode_serving", "full", "ordinary", 0, "dsv4_flash_decode"},
	{"dsv4_flash_decode_serving", "bucketed", "wait", 0, "dsv4_flash_decode"},
	{"dsv4_flash_decode_serving", "bucketed", "ordinary", 0, "dsv4_flash_decode"},
	{"dsv4_flash_decode_serving", "full", "wait", 6, "dsv4_flash_decode"},
	{"dsv4_flash_decode_serving", "full", "ordinary", 6, "dsv4_flash_decode"},
}

// statics are the static models' Graph forms.
var statics = map[string]string{"qwen3_14b_decode": "graph", "dsv4_flash_decode": "full"}

// report is what a row reads of hbgrun run --json.
type report struct {
	Phases struct {
		ControlPlane struct {
			MedianNs int64 `json:"median_ns"`
		} `json:"control_plane"`
	} `json:"phases"`
	Counts struct {
		PerRun struct {
			Recorded   int64 `json:"recorded_definitions"`
			KeysMet    int64 `json:"keys_met"`
			Rerecorded int64 `json:"rerecorded"`
			Evicted    int64 `json:"evicted_definitions"`
			Shells     int64 `json:"shell_calls"`
			WaitNs     int64 `json:"record_wait_ns"`
			Ordinary   int64 `json:"ordinary_while_recording"`
			DeviceMax  int64 `json:"device_definition_bytes_max"`
		} `json:"per_run"`
	} `json:"counts"`
	Golden *struct {
		Verdict string `json:"verdict"`
	} `json:"golden"`
	Passes []struct {
		Cold   bool             `json:"cold"`
		Phases map[string]int64 `json:"phases"`
	} `json:"passes"`
}

// p99 is the 99th percentile of the warm passes' control plane.
func (r *report) p99() int64 {
	var cp []int64
	for _, p := range r.Passes {
		if !p.Cold {
			cp = append(cp, p.Phases["host_orch_ns"]+p.Phases["graph_upload_ns"]+p.Phases["arena_h2d_ns"])
		}
	}
	if len(cp) == 0 {
		return 0
	}
	slices.Sort(cp)
	return cp[min(len(cp)-1, len(cp)*99/100)]
}

func main() {
	bin := flag.String("hbgrun", "", "the hbgrun binary to run (required)")
	rounds := flag.Int("rounds", 300, "rounds per run")
	repeat := flag.Int("repeat", 3, "runs per row; each figure is their median")
	out := flag.String("o", "docs/bench/bench-serving.md", "the table to write")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "servingbench: -hbgrun is required")
		os.Exit(2)
	}
	md, err := measure(*bin, *rounds, *repeat)
	if err == nil {
		err = os.WriteFile(*out, []byte(md), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "servingbench:", err)
		os.Exit(1)
	}
}

func run(bin string, args ...string) (*report, error) {
	cmd := exec.Command(bin, append([]string{"run", "--json", "--store", "off"}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("hbgrun run %s: %w: %s", strings.Join(args, " "), err, e.String())
	}
	var r report
	if err := json.Unmarshal(o.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("hbgrun run %s: %w", strings.Join(args, " "), err)
	}
	return &r, nil
}

func median(v []int64) int64 {
	slices.Sort(v)
	return v[len(v)/2]
}

func ms(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) }

func measure(bin string, rounds, repeat int) (string, error) {
	if repeat < 1 {
		return "", errors.New("-repeat: want at least 1")
	}
	staticMed := map[string]int64{}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("Serving runs (`tools/servingbench`, %s): %d rounds, one rank, the device skipped; each\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), rounds)
	p("figure the median of %d runs on the shared 2-core box, busy with other builds (single runs wander, p99 most).\n", repeat)
	p("Golden and device KB: a run of the same rounds with the device simulated (device KB: the most bytes of Definition\n")
	p("objects it held at a launch). record_wait is the run's total; ×static the warm control-plane median over the\n")
	p("static model's Graph form's.\n\n")
	p("| model | form | new keys | budget | keys met | recorded | re-recorded | evicted | shell calls | record_wait ms | ordinary-path calls | control plane median ms | p99 ms | ×static | device KB | golden |\n")
	p("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for name, form := range statics {
		var med []int64
		for range repeat {
			r, err := run(bin, "config/models/"+name+".yaml", "--form", form, "--rounds", strconv.Itoa(rounds), "--skip-device")
			if err != nil {
				return "", err
			}
			med = append(med, r.Phases.ControlPlane.MedianNs)
		}
		staticMed[name] = median(med)
	}
	for _, c := range rows {
		args := []string{"config/models/" + c.model + ".yaml", "--form", c.form, "--rounds", strconv.Itoa(rounds), "--new-keys", c.newKeys, "--keep-definitions", strconv.Itoa(c.keep)}
		g, err := run(bin, args...)
		if err != nil {
			return "", err
		}
		var med, p99, wait, met, rec, rerec, ev, sh, ord []int64
		for range repeat {
			r, err := run(bin, append(args, "--skip-device")...)
			if err != nil {
				return "", err
			}
			pr := &r.Counts.PerRun
			med, p99, wait = append(med, r.Phases.ControlPlane.MedianNs), append(p99, r.p99()), append(wait, pr.WaitNs)
			met, rec, rerec = append(met, pr.KeysMet), append(rec, pr.Recorded), append(rerec, pr.Rerecorded)
			ev, sh, ord = append(ev, pr.Evicted), append(sh, pr.Shells), append(ord, pr.Ordinary)
		}
		budget := "—"
		if c.keep > 0 {
			budget = strconv.Itoa(c.keep) + " defs"
		}
		verdict := "not checked"
		if g.Golden != nil {
			verdict = g.Golden.Verdict
		}
		m := median(med)
		p("| %s | %s | %s | %s | %d | %d | %d | %d | %d | %s | %d | %s | %s | %.2f | %d | %s |\n", c.model, c.form, c.newKeys, budget,
			median(met), median(rec), median(rerec), median(ev), median(sh), ms(median(wait)), median(ord), ms(m), ms(median(p99)),
			float64(m)/float64(staticMed[c.static]), g.Counts.PerRun.DeviceMax/1000, verdict)
	}
	p("\nStatic forms' warm control-plane median: ")
	first := true
	for _, name := range []string{"qwen3_14b_decode", "dsv4_flash_decode"} {
		if !first {
			p(", ")
		}
		first = false
		p("%s %s %s ms", name, statics[name], ms(staticMed[name]))
	}
	p(".\n")
	return b.String(), nil
}
