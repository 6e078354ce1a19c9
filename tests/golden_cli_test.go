package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/trace"
)

// TestRunRacyExitsOne: run checks every device run for races by default,
// and an undeclared race fails it: Qwen3 with its Graph calls removed
// (form eager) races across layers (qwen3_race_test.go): exit 1, the
// verdict racy, the races listed in the JSON report with their kernels and
// ops, the eager reference's too. DSv4, whose races are all declared in
// its model, passes (and says how many it declared).
func TestRunRacyExitsOne(t *testing.T) {
	out, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "1")
	if code != 0 || !strings.Contains(out, "golden: match") || !strings.Contains(out, "1892 races among kernels the model declares may race") {
		t.Fatalf("dsv4: exit %d, stdout %q, stderr %q; want 0, match and 1892 declared races", code, out, stderr)
	}
	out, stderr, code = runCLI(t, "run", qwen3, "--form", "eager", "--rounds", "1", "--json")
	if code != 1 || !strings.Contains(stderr, "golden: racy") {
		t.Fatalf("exit %d, stderr %q; want 1 and racy", code, stderr)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	g := rep.Golden
	if g == nil || g.Verdict != "racy" || g.Reference != "inline twin" || g.Races == 0 || len(rep.Races) == 0 {
		t.Fatalf("golden %+v, %d races listed", g, len(rep.Races))
	}
	if len(g.EagerRaceList) == 0 {
		t.Fatalf("golden %+v: no eager races listed", g)
	}
	// The form's races and its eager reference's alike name each side's
	// kernel and op.
	for _, r := range []trace.Race{rep.Races[0], g.EagerRaceList[0]} {
		if r.A.Kernel == "" || r.B.Kernel == "" || r.A.Op == "" || r.B.Op == "" || r.Kind == "" || r.Hi <= r.Lo || r.Text == "" {
			t.Errorf("race %+v", r)
		}
	}
}
