package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hbg-dev/hbg/trace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	hbgrunOnce sync.Once
	hbgrunBin  string
	hbgrunErr  error
)

// hbgrun builds the command once for every CLI test.
func hbgrun(t *testing.T) string {
	t.Helper()
	hbgrunOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hbgrun")
		if err != nil {
			hbgrunErr = err
			return
		}
		hbgrunBin = filepath.Join(dir, "hbgrun")
		out, err := exec.Command("go", "build", "-o", hbgrunBin, "../cmd/hbgrun").CombinedOutput()
		if err != nil {
			hbgrunErr = errors.New(string(out))
		}
	})
	if hbgrunErr != nil {
		t.Fatal(hbgrunErr)
	}
	return hbgrunBin
}

// runCLI runs hbgrun and returns stdout, stderr and the exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(hbgrun(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestRunTwoRanks: --rounds 5 --ranks 2 gives n = 8 warm passes per phase
// and 2 cold ones; the control-plane total is the per-pass sums; both ranks
// end with eager's digest.
func TestRunTwoRanks(t *testing.T) {
	out, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "5", "--ranks", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
		if rep.Phases.Phases[ph].N != 8 || rep.ColdPhases.Phases[ph].N != 2 {
			t.Errorf("%s: n %d warm, %d cold; want 8 and 2", ph, rep.Phases.Phases[ph].N, rep.ColdPhases.Phases[ph].N)
		}
	}
	var sums []int64
	for _, p := range rep.Passes {
		if !p.Cold {
			s, _ := p.ControlPlaneNs()
			sums = append(sums, s)
		}
	}
	if want := trace.StatOf(sums); rep.Phases.ControlPlane != want {
		t.Errorf("control plane %+v, per-pass sums give %+v", rep.Phases.ControlPlane, want)
	}
	if rep.Golden == nil || !rep.Golden.Match {
		t.Errorf("golden %+v", rep.Golden)
	}
	c := rep.Counts
	if c.HostSubmissions != 129 || c.GraphSubmissions != 86 || c.DeviceTasks != 15972 || c.Demoted != 0 {
		t.Errorf("counts %+v", c)
	}
	// Two ranks share the store: each key is recorded once for the run.
	if c.RecordedDefinitions != 8 {
		t.Errorf("recorded %d Definitions, want 8", c.RecordedDefinitions)
	}
	// No per-task message: a rank's submission actor hears of a pass when
	// it is asked for and when its slot frees (and once of what a cold pass
	// learned); 5 passes of 15972 tasks stay far below one per task. The
	// last pass's slot release may still be on its way when the report is
	// made.
	subs := 0
	for _, m := range rep.Mailboxes {
		if strings.HasPrefix(m.Name, "submission-") {
			subs++
			if m.Posted > 50 || m.Posted-m.Received > 1 {
				t.Errorf("%s: %d posted, %d received over 5 passes", m.Name, m.Posted, m.Received)
			}
		}
	}
	if subs != 2 {
		t.Errorf("%d submission mailboxes in the report, want 2", subs)
	}
}

func TestRunNoRetain(t *testing.T) {
	out, stderr, code := runCLI(t, "run", dsv4, "--form", "blocks", "--rounds", "3", "--no-retain", "--skip-device", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	first := rep.Passes[0]
	for _, p := range rep.Passes[1:] {
		if p.RecordedNodes != first.RecordedNodes || p.BuiltDefinitions != first.BuiltDefinitions || p.UploadedDefinitionBytes != first.UploadedDefinitionBytes {
			t.Errorf("round %d: %d nodes, %d built, %d bytes; round 1: %d, %d, %d", p.Round+1,
				p.RecordedNodes, p.BuiltDefinitions, p.UploadedDefinitionBytes, first.RecordedNodes, first.BuiltDefinitions, first.UploadedDefinitionBytes)
		}
	}
	if rep.Device != trace.DeviceSkipped || rep.Golden != nil {
		t.Errorf("device %q golden %+v", rep.Device, rep.Golden)
	}
}

// TestRunBadInput: a user's mistake exits 2 with one clear line, no trace.
func TestRunBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("model: x\nentry: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Upstream bug #1939: csa_moe's key without the routing param its body
	// branches on. run reports the static Graph check as validate does, at
	// once, with the line (the runtime's second recording would find it
	// only after a pass, without one).
	src, err := os.ReadFile(dsv4)
	if err != nil {
		t.Fatal(err)
	}
	key := `csa_moe: {key: "csa_moe_block:{route_by_hash}", config: [route_by_hash]}`
	if !bytes.Contains(src, []byte(key)) {
		t.Fatal("the #1939 case does not apply")
	}
	unkeyed := filepath.Join(t.TempDir(), "dsv4_1939.yaml")
	if err := os.WriteFile(unkeyed, bytes.Replace(src, []byte(key), []byte(`csa_moe: {key: csa_moe_block}`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", dsv4, "--form", "nope"}, `no form "nope"`},
		{[]string{"run", dsv4, "--rounds", "0"}, "--rounds 0"},
		{[]string{"run", "missing.yaml"}, "missing.yaml"},
		{[]string{"run", bad}, bad + ":"},
		{[]string{"run", dsv4, "--defects", "maybe"}, "--defects"},
		{[]string{"run", dsv4, "--in-flight", "-3"}, "--in-flight -3: want at least 1"},
		{[]string{"compare", dsv4, "--recorders", "-1"}, "--recorders -1: want at least 1"},
		{[]string{"compare", dsv4, "--block", "-1"}, "--block -1: want 0 (all the rounds) or more"},
		{[]string{"run", dsv4, "--ranks", "100000"}, "--ranks 100000: want 1 to 4096"},
		{[]string{"describe", "/dev/zero"}, "/dev/zero is a device, not a file (want an image file)"},
		{[]string{"validate", "/dev/zero"}, "/dev/zero is a device, not a file (want a model file)"},
		{[]string{"expand", "/dev/zero", "--form", "eager"}, "/dev/zero is a device, not a file (want a model file)"},
		{[]string{"run", dsv4, "--nodes", "127.0.0.1:17101,127.0.0.1:17101"}, "--nodes: 127.0.0.1:17101 is named twice"},
		{[]string{"run", dsv4, "--recorders", "1000000"}, "--recorders 1000000: want at most 4096"},
		{[]string{"validate", dsv4, "--max-tasks", "-1"}, `--max-tasks -1: want 0 (the model's max_tasks) or more tasks`},
		{[]string{"run", dsv4, "--max-tasks", "100"}, "(a pass is bounded by max_tasks: 100; raise it"},
		{[]string{"expand", dsv4, "--form", "eager", "--max-tasks", "100"}, "(a pass is bounded by max_tasks: 100; raise it"},
		{[]string{"run", unkeyed, "--form", "blocks", "--store", "off"}, "dsv4_1939.yaml:"},
		{[]string{"run", unkeyed, "--form", "blocks", "--store", "off"}, "form blocks: structure depends on route_by_hash, not in the key of csa_moe"},
		{[]string{"compare", unkeyed, "--forms", "eager,blocks", "--store", "off"}, "structure depends on route_by_hash"},
		// Bounded by work (issue 34): 256M dependency edges from a model of
		// a few lines, and a model allowing itself 10^12 tasks, are refused
		// before a pass, as a node refuses them.
		{[]string{"validate", "testdata/attack/edge_bomb.yaml"}, `edge_bomb.yaml:19: max_edges "16777216": form eager: too many dependency edges`},
		{[]string{"run", "testdata/attack/edge_bomb.yaml", "--store", "off"}, "past the bound of 16777216 (raise it with --max-edges"},
		{[]string{"validate", "testdata/attack/edge_bomb.yaml", "--max-edges", "1000"}, "past the bound of 1000"},
		{[]string{"validate", dsv4, "--max-edges", "-1"}, `--max-edges -1: want 0 (the model's max_edges) or more dependency edges`},
		{[]string{"run", "testdata/attack/task_bomb.yaml", "--store", "off"}, "task_bomb.yaml:14: loop.to \"1000000000\": a loop of 1000000000 iterations of 1 tasks: the pass would submit more than 4194304 tasks"},
	}
	for _, tc := range cases {
		_, stderr, code := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "goroutine") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestTraceOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.json")
	_, stderr, code := runCLI(t, "run", dsv4, "--form", "blocks", "--rounds", "2", "--trace-out", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	doc := readChromeTrace(t, path)
	tracks := map[string]bool{}
	procs := map[int]string{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			procs[e.Pid] = e.Args.Name
		}
		if e.Ph == "M" && e.Name == "thread_name" {
			tracks[procs[e.Pid]+"/"+e.Args.Name] = true
		}
	}
	if !tracks["host/rank 0"] {
		t.Errorf("no host track for rank 0")
	}
	cores, recorders := 0, 0
	for k := range tracks {
		if strings.HasPrefix(k, "rank 0 device (simulated clock) round 0/") {
			cores++
		}
		if strings.HasPrefix(k, "host/recorder-") {
			recorders++
		}
	}
	if recorders == 0 {
		t.Errorf("no recorder track")
	}
	if cores < 24 {
		t.Errorf("%d device core tracks", cores)
	}
	// Each pass's simulated timeline starts under its own device_wall.
	type window struct{ lo, hi float64 }
	walls := map[int]window{}
	first := map[int]float64{}
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		if e.Name == "device_wall" {
			walls[int(e.Args.HbgRound)] = window{e.Ts, e.Ts + e.Dur}
		}
		if r := e.Args.Round; r != nil && strings.HasPrefix(procs[e.Pid], "rank 0 device") {
			if f, seen := first[int(*r)]; !seen || e.Ts < f {
				first[int(*r)] = e.Ts
			}
		}
	}
	if len(walls) != 2 || len(first) != 2 {
		t.Fatalf("device_wall of rounds %v, device slices of rounds %v; want 2 of each", walls, first)
	}
	for r, w := range walls {
		if f := first[r]; f < w.lo || f > w.hi {
			t.Errorf("round %d: first device slice at %.3f µs, outside its device_wall [%.3f, %.3f]", r, f, w.lo, w.hi)
		}
	}
}

// TestValidateAndExpand: the two model commands, and their exit code 2 on a
// user's mistake.
func TestValidateAndExpand(t *testing.T) {
	out, stderr, code := runCLI(t, "validate", dsv4)
	if code != 0 || !strings.Contains(out, "full 15972 tasks/44413 edges/129 submits/86 Graphs") {
		t.Fatalf("validate: exit %d, %q %q", code, out, stderr)
	}
	path := filepath.Join(t.TempDir(), "eager.jsonl")
	if _, stderr, code := runCLI(t, "expand", dsv4, "--form", "eager", "--out", path); code != 0 {
		t.Fatalf("expand: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(`{"ev":"task"`)); n != 15971 {
		t.Fatalf("expand wrote %d task events, want 15971", n)
	}
	// A Graph call's line lists its scalars even when there are none, as
	// the reference trace does ("scalars": []).
	out, stderr, code = runCLI(t, "expand", dsv4, "--form", "full")
	if code != 0 {
		t.Fatalf("expand full: exit %d: %s", code, stderr)
	}
	begins, listed := 0, 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, `{"ev":"graph_begin"`) {
			begins++
			if strings.Contains(l, `"scalars":[`) {
				listed++
			}
		}
	}
	if begins != 86 || listed != begins {
		t.Fatalf("expand full: %d graph_begin lines, %d listing scalars; want 86 and 86", begins, listed)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("model: x\nkernels:\n  - {name: a, core: aiq}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"validate", bad},
		{"expand", bad, "--form", "eager"},
		{"expand", dsv4, "--form", "nope"},
	} {
		if _, stderr, code := runCLI(t, args...); code != 2 || strings.Contains(stderr, "goroutine") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2", args, code, stderr)
		}
	}
}

// TestCompareBlock: --block runs that many rounds of a form back to back
// before the next form's; by default, all of them.
func TestCompareBlock(t *testing.T) {
	for _, tc := range []struct {
		block []string
		want  []string
		order string
	}{
		{[]string{"--block", "2"}, []string{
			"eager rank 0 round 0", "eager rank 0 round 1", "full rank 0 round 0", "full rank 0 round 1",
			"eager rank 0 round 2", "full rank 0 round 2",
		}, "order: 2 round(s) of a form at a time, then the next form's (--block 2)"},
		{nil, []string{
			"eager rank 0 round 0", "eager rank 0 round 1", "eager rank 0 round 2",
			"full rank 0 round 0", "full rank 0 round 1", "full rank 0 round 2",
		}, "order: each form's rounds back to back, as a deployment runs it (--block 3)"},
	} {
		args := append([]string{"compare", dsv4, "--forms", "eager,full", "--rounds", "3", "--skip-device", "--store", "off", "-v"}, tc.block...)
		out, stderr, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.block, code, stderr)
		}
		var order []string
		for _, l := range strings.Split(stderr, "\n") {
			if rest, ok := strings.CutPrefix(l, "hbgrun: pass ended: form "); ok {
				order = append(order, rest)
			}
		}
		if !slices.Equal(order, tc.want) {
			t.Errorf("%v: passes ran in order\n%s\nwant\n%s", tc.block, strings.Join(order, "\n"), strings.Join(tc.want, "\n"))
		}
		// The headline first (issue 39: compare began with its order), then
		// the order.
		lines := strings.SplitN(out, "\n", 3)
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "headline: full saves ") || lines[1] != tc.order {
			t.Errorf("%v: first lines %q, want the headline then %q", tc.block, lines[:min(2, len(lines))], tc.order)
		}
	}
}

// TestCompare: the forms side by side in one process; each ends with the
// first (eager) form's digest.
func TestCompare(t *testing.T) {
	out, stderr, code := runCLI(t, "compare", dsv4, "--forms", "eager,full", "--rounds", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Baseline     string              `json:"baseline"`
		Forms        []trace.Report      `json:"forms"`
		MedianRatios []trace.PhaseRatios `json:"median_ratios"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// The ratios are the text table's: each form's warm median over eager's.
	if doc.Baseline != "eager" || len(doc.MedianRatios) != 2 {
		t.Fatalf("baseline %q, %d ratio rows", doc.Baseline, len(doc.MedianRatios))
	}
	for i, r := range doc.MedianRatios {
		for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
			got, want := r.Phase(ph), trace.Ratio(doc.Forms[i].Phases.Phases[ph], doc.Forms[0].Phases.Phases[ph])
			if (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Errorf("%s %s ratio %v, medians give %v", doc.Forms[i].Form, ph, got, want)
			}
		}
	}
	if r := doc.MedianRatios[0].HostOrch; r == nil || *r != 1 {
		t.Errorf("eager over itself: host_orch ratio %v", r)
	}
	// The saving: eager's host_orch median over each form's control plane.
	for i, r := range doc.MedianRatios {
		want := float64(doc.Forms[0].Phases.Phases[trace.PhaseHostOrch].MedianNs) / float64(doc.Forms[i].Phases.ControlPlane.MedianNs)
		if r.Saving == nil || *r.Saving != want {
			t.Errorf("%s: saving %v, medians give %v", doc.Forms[i].Form, r.Saving, want)
		}
	}
	if len(doc.Forms) != 2 || doc.Forms[0].Form != "eager" || doc.Forms[1].Form != "full" {
		t.Fatalf("forms %+v", doc.Forms)
	}
	for _, r := range doc.Forms {
		if r.Golden == nil || !r.Golden.Match || r.Phases.Phases[trace.PhaseHostOrch].N != 1 {
			t.Errorf("%s: golden %+v, host_orch n %d", r.Form, r.Golden, r.Phases.Phases[trace.PhaseHostOrch].N)
		}
	}
	if doc.Forms[1].Counts.HostSubmissions != 129 {
		t.Errorf("full: %d host submissions", doc.Forms[1].Counts.HostSubmissions)
	}
}

// TestRunEmbeddedDefault: with no MODEL, run uses the embedded DSv4 config,
// from any directory.
func TestRunEmbeddedDefault(t *testing.T) {
	cmd := exec.Command(hbgrun(t), "run", "--rounds", "2", "--skip-device", "--json")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var rep trace.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Model != "dsv4_flash_decode" || rep.Form != "full" || rep.Counts.HostSubmissions != 129 {
		t.Fatalf("model %q form %q, %d host submissions", rep.Model, rep.Form, rep.Counts.HostSubmissions)
	}
}

// TestUsageErrors: every user's mistake exits 2 with one line naming it,
// before any work, cobra's own errors (flags, commands, argument counts)
// included; an unwritable output path is one.
func TestUsageErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir", "out.json")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"run", "--rounds", "1e9"}, `--rounds: want an integer, got 1e9`},
		{[]string{"run", "--rounds", "99999999999999999999"}, `--rounds: want an integer, got 99999999999999999999 (out of range)`},
		{[]string{"run", "--race=maybe"}, `--race: want true or false, got maybe`},
		{[]string{"runn"}, `unknown command "runn": did you mean run?`},
		{[]string{"run", "--roundz", "3"}, `unknown flag: --roundz: did you mean --rounds?`},
		{[]string{"-v"}, `unknown shorthand flag: 'v' in -v`},
		{[]string{"store", "lss"}, `unknown command "lss" for "hbgrun store": did you mean ls?`},
		{[]string{"run", "--rounds="}, `--rounds: want an integer, got nothing`},
		{[]string{"run", dsv4, dsv4}, "accepts at most 1 arg(s), received 2"},
		{[]string{"validate"}, "accepts 1 arg(s), received 0"},
		{[]string{"expand"}, "accepts 1 arg(s), received 0"},
		{[]string{"version", "x"}, `unknown command "x"`},
		{[]string{"store", "ls", "--max-tasks", "3"}, "unknown flag: --max-tasks"},
		{[]string{"describe", "x.def", "--max-tasks", "3"}, "unknown flag: --max-tasks"},
		{[]string{"run", dsv4, "--trace-out", missing}, "--trace-out: open " + missing},
		{[]string{"compare", dsv4, "--trace-out", missing}, "--trace-out: open " + missing},
		{[]string{"expand", dsv4, "--form", "eager", "--out", missing}, "--out: open " + missing},
		{[]string{"run", dsv4, "--otlp", "http://127.0.0.1:0"}, `port "0"`},
		{[]string{"run", dsv4, "--otlp", "127.0.0.1:4317"}, "want grpc://host:port"},
		{[]string{"report", missing}, "no such file or directory"},
		{[]string{"report", dsv4}, "not a report of run --json or compare --json"},
		{[]string{"run", dsv4, "--html", missing}, "--html: open " + missing},
	}
	for _, tc := range cases {
		out, stderr, code := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %q", tc.args, code, out, stderr, tc.want)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v", missing, err)
	}
}

// TestVersion: `version` and `--version` print the build's version, which
// names the Go toolchain that built it.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, stderr, code := runCLI(t, args...)
		if code != 0 || !strings.HasPrefix(out, "hbgrun ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%v: exit %d, %q %q", args, code, out, stderr)
		}
	}
}

// otlpReceiver is an OTLP/HTTP collector that keeps the resource attributes
// and counts the spans it was sent.
type otlpReceiver struct {
	mu        sync.Mutex
	spans     int
	resources []map[string]string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		attrs := map[string]string{}
		for _, a := range rs.GetResource().GetAttributes() {
			attrs[a.GetKey()] = a.GetValue().GetStringValue()
		}
		r.resources = append(r.resources, attrs)
		for _, ss := range rs.GetScopeSpans() {
			r.spans += len(ss.GetSpans())
		}
	}
	r.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// TestOTLPExport: spans reach a collector with the build's service.version
// and the report names it; with nothing listening, the run says how many
// spans were lost, exits 1, and its report names no destination.
func TestOTLPExport(t *testing.T) {
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	ver, _, _ := runCLI(t, "version")
	out, stderr, code := runCLI(t, "run", dsv4, "--rounds", "1", "--skip-device", "--json", "--otlp", srv.URL)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	if recv.spans == 0 || len(recv.resources) == 0 {
		t.Errorf("collector got %d spans", recv.spans)
	}
	for _, res := range recv.resources {
		if want := strings.TrimSpace(strings.TrimPrefix(ver, "hbgrun ")); res["service.version"] != want {
			t.Errorf("service.version %q, want %q", res["service.version"], want)
		}
	}
	recv.mu.Unlock()
	if !strings.Contains(rep.Exporter, srv.Listener.Addr().String()) {
		t.Errorf("report exporter %q", rep.Exporter)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	out, stderr, code = runCLI(t, "run", dsv4, "--rounds", "1", "--skip-device", "--json", "--otlp", "http://"+closed)
	if code != 1 || !strings.Contains(stderr, "no span could be exported to otlp/http http://"+closed) || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("nothing listening: exit %d, stderr %q", code, stderr)
	}
	rep = trace.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Exporter != "" {
		t.Errorf("report names exporter %q, where no span arrived", rep.Exporter)
	}
}

// TestInterrupt: SIGINT or SIGTERM in the middle of a run stops it, reports
// the passes that ended with their golden check, writes the trace with its
// root span, and exits 130.
func TestInterrupt(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { interruptRun(t, sig, sig == syscall.SIGTERM) })
	}
}

func interruptRun(t *testing.T, sig os.Signal, device bool) {
	path := filepath.Join(t.TempDir(), "run.json")
	args := []string{"run", dsv4, "--rounds", "1000000", "--json", "-v", "--trace-out", path}
	if !device {
		args = append(args, "--skip-device")
	}
	cmd := exec.Command(hbgrun(t), args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// Signal once the first pass has ended, then keep draining stderr.
		sc := bufio.NewScanner(stderr)
		signalled := false
		var rest strings.Builder
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "pass ended") {
				signalled = true
				if err := cmd.Process.Signal(sig); err != nil {
					done <- err
					return
				}
			}
			if !strings.Contains(sc.Text(), "pass ended") {
				rest.WriteString(sc.Text() + "\n")
			}
		}
		err := cmd.Wait()
		if rest.String() != "hbgrun: interrupted\n" {
			err = errors.Join(err, fmt.Errorf("stderr %q", rest.String()))
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("hbgrun did not stop within 60 s of %v", sig)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want 130", err)
	}
	var rep trace.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("no report: %v: %q", err, out.String())
	}
	if len(rep.Passes) == 0 || len(rep.Warnings) == 0 || !strings.HasPrefix(rep.Warnings[len(rep.Warnings)-1], "interrupted: ") {
		t.Errorf("%d passes, warnings %q", len(rep.Passes), rep.Warnings)
	}
	if device && (rep.Golden == nil || !rep.Golden.Match) {
		t.Errorf("the passes that ended: golden %+v, want their match", rep.Golden)
	}
	doc := readChromeTrace(t, path)
	roots := 0
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" && e.Name == trace.SpanCommand {
			roots++
		}
	}
	if roots != 1 {
		t.Errorf("%d %q root spans in the trace, want 1", roots, trace.SpanCommand)
	}
}

// TestCompareTraceOut: compare writes a trace too, a device process per
// form, rank and round; form i's rank r is runtime rank i*ranks+r, as on
// its host track.
func TestCompareTraceOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "compare.json")
	if _, stderr, code := runCLI(t, "compare", dsv4, "--forms", "eager,full", "--rounds", "1", "--trace-out", path); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	procs := map[string]bool{}
	names := map[int]string{}
	for _, e := range readChromeTrace(t, path).TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			names[e.Pid] = e.Args.Name
			procs[names[e.Pid]] = true
		case e.Ph == "M" && e.Name == "thread_name":
			procs[names[e.Pid]+"/"+e.Args.Name] = true
		}
	}
	for _, want := range []string{"host", "eager rank 0 device (simulated clock) round 0", "full rank 1 device (simulated clock) round 0", "host/rank 1 pass slot 0"} {
		if !procs[want] {
			t.Errorf("no process %q in %v", want, procs)
		}
	}
}

// chromeTrace is what the tests read of a trace-event file. Args holds
// only the arguments they look at: decoding every event's arguments into a
// map was most of the time of these tests under -race.
type chromeTrace struct {
	TraceEvents []struct {
		Name string  `json:"name"`
		Ph   string  `json:"ph"`
		Ts   float64 `json:"ts"`
		Dur  float64 `json:"dur"`
		Pid  int     `json:"pid"`
		Tid  int     `json:"tid"`
		Args struct {
			Name     string   `json:"name"`
			HbgRound float64  `json:"hbg.round"`
			Round    *float64 `json:"round"`
		} `json:"args"`
	} `json:"traceEvents"`
}

func readChromeTrace(t *testing.T, path string) *chromeTrace {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc chromeTrace
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: not trace-event JSON: %v", path, err)
	}
	return &doc
}

// TestReportKeepsItsInput: `hbgrun report` never writes its page over the
// report it reads: not by default (a saved report named x.html), not with
// --out naming it, not through a symbolic link to it.
func TestReportKeepsItsInput(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := runCLI(t, "run", dsv4, "--rounds", "1", "--skip-device", "--store", "off", "--json")
	require.Equal(t, 0, code, stderr)
	saved := filepath.Join(dir, "run.json")
	require.NoError(t, os.WriteFile(saved, []byte(out), 0o644))
	asHTML := filepath.Join(dir, "x.html")
	require.NoError(t, os.WriteFile(asHTML, []byte(out), 0o644))
	link := filepath.Join(dir, "link.html")
	require.NoError(t, os.Symlink(saved, link))
	for _, args := range [][]string{
		{"report", asHTML},
		{"report", saved, "-o", saved},
		{"report", saved, "--out", link},
	} {
		_, stderr, code := runCLI(t, args...)
		assert.Equal(t, 2, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "the report being read", "%v", args)
	}
	for _, p := range []string{saved, asHTML} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, out, string(b), "%s was overwritten", p)
	}
}
