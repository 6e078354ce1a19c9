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
// alike (Qwen3 with its declared tile races taken out, so its graph form
// races inside the body, and its eager form across layers).
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
	rt := startRuntime(t, actors.Config{Golden: true})
	for _, form := range []string{"graph", "eager"} {
		t.Run(form, func(t *testing.T) {
			res := runPasses(t, rt, orchestration(m, form), 1)[0]
			if len(res.Device.Races) == 0 {
				t.Fatal("no races")
			}
			named, body := 0, 0
			for _, r := range res.Device.Races {
				for _, a := range []npu.RaceAccess{r.A, r.B} {
					file, line, ok := strings.Cut(a.Op, ":")
					n, err := strconv.Atoi(line)
					if !ok || file != "qwen3_undeclared.yaml" || err != nil || n < 1 || n > len(lines) {
						t.Fatalf("%s: op %q is not a line of the model", r.String(), a.Op)
					}
					id := a.Kernel[0]
					if id < 0 {
						id = a.Kernel[1]
					}
					k := ks[id].Name
					if strings.Contains(lines[n-1], strings.TrimRight(strings.TrimRight(k, "0123456789"), "_")) {
						named++
					}
					if a.Task.Node >= 0 {
						body++
					}
				}
			}
			if named == 0 {
				t.Errorf("no race side's line names its kernel: first %s", res.Device.Races[0].String())
			}
			if form == "graph" && body == 0 {
				t.Errorf("the graph form's races name no body node: first %s", res.Device.Races[0].String())
			}
		})
	}
}
