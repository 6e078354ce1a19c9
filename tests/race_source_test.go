package tests

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/npu"
)

// TestRacesNameTheirOps: each side of a race names the model file:line of
// the op that made its task, for ordinary tasks and for Graph body nodes
// alike, and so do the races of the pass's golden reference, its inline
// twin and its eager form (Qwen3 with its declared tile races taken out,
// so its graph form races inside the body, and its eager form across
// layers).
func TestRacesNameTheirOps(t *testing.T) {
	src, err := os.ReadFile(qwen3)
	if err != nil {
		t.Fatal(err)
	}
	i, j := strings.Index(string(src), "races:\n"), strings.Index(string(src), "\nblocks:\n")
	if i < 0 || j < i {
		t.Fatal("qwen3's model has no races: section before blocks:")
	}
	undeclared := append(append([]byte(nil), src[:i]...), src[j+1:]...)
	m, err := config.Parse("qwen3_undeclared.yaml", undeclared)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(undeclared), "\n")
	ks := m.Kernels()
	// named checks that every side of rs names a line of the model, and
	// that some side's line names its kernel; it returns how many sides
	// are Graph body nodes.
	named := func(t *testing.T, what string, rs []npu.Race) (body int) {
		t.Helper()
		if len(rs) == 0 {
			t.Fatalf("%s: no races", what)
		}
		kernel := 0
		for _, r := range rs {
			for _, a := range []npu.RaceAccess{r.A, r.B} {
				file, line, ok := strings.Cut(a.Op, ":")
				n, err := strconv.Atoi(line)
				if !ok || file != "qwen3_undeclared.yaml" || err != nil || n < 1 || n > len(lines) {
					t.Fatalf("%s: %s: op %q is not a line of the model", what, r.String(), a.Op)
				}
				id := a.Kernel[0]
				if id < 0 {
					id = a.Kernel[1]
				}
				k := ks[id].Name
				if a.KernelName != k {
					t.Fatalf("%s: %s: kernel %q, want %q", what, r.String(), a.KernelName, k)
				}
				if strings.Contains(lines[n-1], strings.TrimRight(strings.TrimRight(k, "0123456789"), "_")) {
					kernel++
				}
				if a.Task.Node >= 0 {
					body++
				}
			}
		}
		if kernel == 0 {
			t.Errorf("%s: no race side's line names its kernel: first %s", what, rs[0].String())
		}
		return body
	}
	rt := startRuntime(t, actors.Config{Golden: true})
	for _, form := range []string{"graph", "eager"} {
		t.Run(form, func(t *testing.T) {
			res := runPasses(t, rt, orchestration(m, form), 1)[0]
			if body := named(t, "pass", res.Device.Races); form == "graph" && body == 0 {
				t.Errorf("the graph form's races name no body node: first %s", res.Device.Races[0].String())
			}
			named(t, "inline twin", res.Golden.ReferenceRaces)
			named(t, "eager form", res.Golden.Eager.Races)
		})
	}
}
