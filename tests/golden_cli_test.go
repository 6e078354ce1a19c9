package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/trace"
)

// TestRunRacyExitsOne: run checks every device run for races by default,
// and DSv4's (race_test.go) fail it: exit 1, the verdict racy (its digests
// still equal its inline twin's), the races listed in the JSON report.
func TestRunRacyExitsOne(t *testing.T) {
	out, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "1", "--json")
	if code != 1 || !strings.Contains(stderr, "golden: racy") {
		t.Fatalf("exit %d, stderr %q; want 1 and racy", code, stderr)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	g := rep.Golden
	if g == nil || g.Verdict != "racy" || !g.Match || g.Reference != "inline twin" || g.Races == 0 || len(rep.Races) == 0 {
		t.Fatalf("golden %+v, %d races listed", g, len(rep.Races))
	}
	r := rep.Races[0]
	if r.A.Kernel == "" || r.B.Kernel == "" || r.Kind == "" || r.Hi <= r.Lo || r.Text == "" {
		t.Errorf("race %+v", r)
	}
}
