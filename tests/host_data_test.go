package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const hostDataModel = "../config/testdata/api/host_data.yaml"

// TestHostDataOnTheDevice: a program whose two out_existing writers of b
// are ordered only by the host's waits between them (set_tensor_data,
// get_tensor_data) runs to golden on two ranks with no race; without the
// host's accesses the same two writers are a write-write race.
func TestHostDataOnTheDevice(t *testing.T) {
	for _, r := range compareForms(t, hostDataModel, []string{"eager"}) {
		if g := r.Golden; g.Races != 0 || g.ReferenceRaces != 0 {
			t.Errorf("%s: %d races (reference %d), want none", r.Form, g.Races, g.ReferenceRaces)
		}
	}
	src, err := os.ReadFile(hostDataModel)
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Replace(string(src), `    - write: {"b[0]": 55}
    - read: {ext_war: "b[0]"}
    - write: {"check[8]": ext_war}
`, "", 1)
	if cut == string(src) {
		t.Fatal("the model's host accesses between the writers are not where the test cuts")
	}
	p := filepath.Join(t.TempDir(), "no_host.yaml")
	if err := os.WriteFile(p, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "run", p, "--rounds", "1", "--store", "off")
	if code == 0 || !strings.Contains(out+stderr, "write-write") {
		t.Errorf("without the host's waits: exit %d, want a write-write race:\n%s%s", code, out, stderr)
	}
}
