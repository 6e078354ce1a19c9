package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hbg-dev/hbg/trace"
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
	// DSv4 races as upstream declares it (race_test.go): --race=false lets
	// the golden check compare digests only, so the run passes.
	out, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "5", "--ranks", "2", "--json", "--race=false")
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
	// No per-task message: a rank's submission actor hears of a pass, of
	// each new Definition and upload, and of the device; a warm pass is 3
	// messages, 5 passes of 15972 tasks stay far below one per task.
	subs := 0
	for _, m := range rep.Mailboxes {
		if strings.HasPrefix(m.Name, "submission-") {
			subs++
			if m.Posted > 50 || m.Posted != m.Received {
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
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", dsv4, "--form", "nope"}, `no form "nope"`},
		{[]string{"run", dsv4, "--rounds", "0"}, "--rounds 0"},
		{[]string{"run", "missing.yaml"}, "missing.yaml"},
		{[]string{"run", bad}, bad + ":"},
		{[]string{"run", dsv4, "--defects", "maybe"}, "--defects"},
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
	_, stderr, code := runCLI(t, "run", dsv4, "--form", "blocks", "--rounds", "2", "--trace-out", path, "--race=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not trace-event JSON: %v", err)
	}
	tracks := map[string]bool{}
	procs := map[int]string{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			procs[e.Pid], _ = e.Args["name"].(string)
		}
		if e.Ph == "M" && e.Name == "thread_name" {
			name, _ := e.Args["name"].(string)
			tracks[procs[e.Pid]+"/"+name] = true
		}
	}
	if !tracks["host/rank 0"] {
		t.Errorf("no host track for rank 0")
	}
	cores, recorders := 0, 0
	for k := range tracks {
		if strings.HasPrefix(k, "rank 0 device (simulated)/") {
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
}

// TestValidateAndExpand: the two model commands, and their exit code 2 on a
// user's mistake.
func TestValidateAndExpand(t *testing.T) {
	out, stderr, code := runCLI(t, "validate", dsv4)
	if code != 0 || !strings.Contains(out, "full 15972 tasks/129 submits/86 Graphs") {
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

// TestCompare: the forms side by side in one process; each ends with the
// first (eager) form's digest.
func TestCompare(t *testing.T) {
	out, stderr, code := runCLI(t, "compare", dsv4, "--forms", "eager,full", "--rounds", "2", "--json", "--race=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Forms []trace.Report `json:"forms"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
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
