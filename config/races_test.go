package config_test

import (
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
)

// TestDeclaredRaces: a races: class marks its kernels, upstream's numbered
// copies of them included, with one group, and no other kernel.
func TestDeclaredRaces(t *testing.T) {
	src := strings.Replace(tinyModel, "  - {name: act, core: aiv}\n",
		"  - {name: act, core: aiv}\n  - {name: act_0, core: aiv}\n  - {name: act_x, core: aiv}\n", 1)
	src = strings.Replace(src, "blocks:\n", "races:\n  - {kernels: [mm, act], why: tiles picked by a scalar}\nblocks:\n", 1)
	m, err := config.Parse("tiny.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"mm": true, "act": true, "act_0": true, "act_x": false}
	var g int32
	for _, k := range m.Kernels() {
		if want[k.Name] != (k.RaceGroup != 0) {
			t.Errorf("kernel %s: race group %d", k.Name, k.RaceGroup)
		}
		if k.RaceGroup != 0 {
			if g != 0 && k.RaceGroup != g {
				t.Errorf("kernel %s: group %d, others %d", k.Name, k.RaceGroup, g)
			}
			g = k.RaceGroup
		}
	}
	if d := m.DeclaredRaces(); len(d) != 1 || d[0].Why != "tiles picked by a scalar" {
		t.Errorf("declared races %+v", d)
	}
}
