package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/trace"
)

// The outside tester's key findings, as the command meets them.
const (
	sharedKeyModel       = "../config/testdata/keys/shared_key.yaml"
	interpolatedKeyModel = "../config/testdata/keys/interpolated_key.yaml"
)

// TestSharedGraphKeyCLI: two blocks given one Graph key in a form (F1: blk_b's
// calls replayed blk_a's Definition, a golden mismatch with no word why)
// are refused by validate, run and compare before any pass, in one line
// naming the key, both blocks and both lines, and what to do.
func TestSharedGraphKeyCLI(t *testing.T) {
	want := fmt.Sprintf(`%s:42: form full: Graph key "shared" of blk_b is also the key of blk_a (%s:41): calls of both would share one Definition, and one block's calls would replay the other's body (give each block its own key)`,
		sharedKeyModel, sharedKeyModel)
	for _, args := range [][]string{
		{"validate", sharedKeyModel},
		{"run", sharedKeyModel, "--rounds", "2", "--store", "off"},
		{"compare", sharedKeyModel, "--forms", "eager,full", "--rounds", "1", "--store", "off"},
	} {
		out, stderr, code := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %q", args, code, out, stderr, want)
		}
	}
}

// TestInterpolatedKeyCLI: calls whose interpolated key texts coincide
// ("L{a}{b}": L111 for a=1, b=11 and for a=11, b=1; F3) get a Definition
// each, since the values are hashed into full_key, and the run matches its
// golden reference.
func TestInterpolatedKeyCLI(t *testing.T) {
	out, stderr, code := runCLI(t, "run", interpolatedKeyModel, "--rounds", "2", "--store", "off", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Golden == nil || !rep.Golden.Match {
		t.Errorf("golden %+v, want a match", rep.Golden)
	}
	if n := rep.Counts.RunCounts.Definitions; n != 2 {
		t.Errorf("%d Definitions, want 2 (one per (a, b))", n)
	}
}
