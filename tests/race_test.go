package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// deviceImages builds a form's run image and its Definitions straight
// from stages (no actors): every Graph call records once per key and
// replays as a GRAPH task, as the submission actor would do.
func deviceImages(t testing.TB, m *config.Model, form string) (run []byte, defs [][]byte) {
	t.Helper()
	g := &grapher{Orch: stages.NewOrch(m.EntryRoots()), defs: map[uint64]*stages.Definition{}}
	if err := m.Run(g, form); err != nil {
		t.Fatal(err)
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	for _, d := range g.order {
		defs = append(defs, stages.EncodeDefinition(d))
	}
	return stages.EncodeRunImage(g.Image()), defs
}

type grapher struct {
	*stages.Orch
	rec   stages.Recorder
	defs  map[uint64]*stages.Definition
	order []*stages.Definition
	err   error
}

func (g *grapher) Graph(call *stages.GraphCall) stages.TaskID {
	fk := stages.FullKey("grapher", call.Key, call.Config)
	d := g.defs[fk]
	if d == nil {
		var err error
		d, err = g.rec.Record(call.Key, fk, call.Boundary, g.BoundaryRoots(call.Boundary), call.Scalars, call.ExtDeps, call.Body)
		if err != nil {
			if g.err == nil {
				g.err = fmt.Errorf("graph %q: %w", call.Key, err)
			}
			return g.Orch.Graph(call)
		}
		stages.EncodeDefinition(d) // sets the content hash
		g.defs[fk] = d
		g.order = append(g.order, d)
	}
	return g.SubmitGraph(call, stages.GraphSubmission{FullKey: fk, DefHash: d.ContentHash}, d.HeapBytes, d.WrittenSlots())
}

func dsv4Device(t testing.TB, m *config.Model, form string, cfg npu.Config) *npu.Device {
	t.Helper()
	run, defs := deviceImages(t, m, form)
	d := npu.New(cfg)
	d.RegisterEntry(m.EntryRoots())
	d.RegisterKernels(m.Kernels())
	for _, img := range defs {
		if _, err := d.Upload(img); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.CopyRun(run); err != nil {
		t.Fatal(err)
	}
	return d
}

// dsv4Races is every race DSv4's orchestration has, in every form, per
// layer (43 layers), as upstream's trace declares its tasks. Each class
// names the kernels of both sides (without upstream's copy numbers).
var dsv4Races = []struct {
	kernels  []string
	perLayer int
	why      string
}{
	{[]string{"proj_a_mm", "quant", "proj_b_mm"}, 42,
		"the attention's output projection runs in 8 head groups inside a manual scope, each group ordered " +
			"after merge_norm and within itself only; every group's proj_a_mm, quant and proj_b_mm declare the " +
			"whole scratch buffers (o_r_pad, act_scale_dq, o_r_i8_pad, partials) and pick their group's slice " +
			"with a scalar (1024*g), so by the declared intervals adjacent groups write and read the same " +
			"elements unordered: 7 group pairs x (proj_a_mm/proj_a_mm, quant x2, proj_b_mm/proj_b_mm " +
			"write-write, quant reading o_r_pad against the next proj_a_mm, proj_b_mm reading o_r_i8_pad " +
			"against the next quant)"},
	{[]string{"ffn_norm", "gate_pre_route", "sh_gate_up_act_q"}, 2,
		"x_norm_scale is a manual_dep root, so it gets creator edges only: ffn_norm and gate_pre_route " +
			"both write it (inout) unordered, and the shared expert's sh_gate_up_act_q reads it unordered " +
			"with gate_pre_route's write"},
}

// TestDSv4Races: every DSv4 form races exactly where upstream's
// orchestration does (dsv4Races, with the tasks' kernels).
func TestDSv4Races(t *testing.T) {
	m := loadDSv4(t)
	ks := m.Kernels()
	code := func(a npu.RaceAccess) string {
		k := a.Kernel[0]
		if a.Kind == stages.KindAIV {
			k = a.Kernel[1]
		}
		// Upstream numbers each copy of a kernel (quant_0, quant_2, ...).
		return strings.TrimRight(strings.TrimRight(ks[k].Name, "0123456789"), "_")
	}
	want := 0
	for _, c := range dsv4Races {
		want += 43 * c.perLayer
	}
	for _, form := range m.Forms() {
		t.Run(form, func(t *testing.T) {
			res, err := dsv4Device(t, m, form, npu.DefaultConfig()).Launch()
			if err != nil {
				t.Fatal(err)
			}
			if res.RaceCount != want {
				t.Errorf("%d races, want %d", res.RaceCount, want)
			}
			for _, r := range res.Races {
				explained := false
				for _, c := range dsv4Races {
					if slices.Contains(c.kernels, code(r.A)) && slices.Contains(c.kernels, code(r.B)) {
						explained = true
					}
				}
				if !explained {
					t.Errorf("unexplained: %s (%s, %s)", r.String(), code(r.A), code(r.B))
				}
			}
		})
	}
}

// BenchmarkDSv4Device launches a resident DSv4 run image (its Definitions
// uploaded) with the race detector on and off: the difference is the
// detector's cost on the simulation's host time.
func BenchmarkDSv4Device(b *testing.B) {
	m := loadDSv4(b)
	for _, form := range []string{"eager", "full"} {
		for _, race := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/race=%v", form, race), func(b *testing.B) {
				cfg := npu.DefaultConfig()
				cfg.NoRace = !race
				d := dsv4Device(b, m, form, cfg)
				if _, err := d.Launch(); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				// The machine may be shared: process CPU time per launch is
				// reported too, as it is less sensitive to other load than
				// the wall time.
				cpu0 := cpuNs()
				for b.Loop() {
					if _, err := d.Launch(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuNs()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestDSv4Golden: every DSv4 form ends with its inline twin's digests and
// task count, and with the eager form's digest; the verdict is racy for
// the races dsv4Races explains, which every form and reference share.
func TestDSv4Golden(t *testing.T) {
	m := loadDSv4(t)
	rt := startRuntime(t, actors.Config{Golden: true})
	for _, form := range m.Forms() {
		t.Run(form, func(t *testing.T) {
			g := runPasses(t, rt, orchestration(m, form), 1)[0].Golden
			if !g.Match || !g.Eager.Match || g.Tasks != g.ReferenceTasks {
				t.Errorf("digest %016x reference %016x eager %016x, tasks %d reference %d; diff %v", g.Digest, g.ReferenceDigest, g.Eager.Digest, g.Tasks, g.ReferenceTasks, g.Diff)
			}
			if g.Verdict != actors.VerdictRacy || g.RaceCount != g.ReferenceRaceCount || g.RaceCount != g.Eager.RaceCount {
				t.Errorf("verdict %s, races %d, reference %d, eager %d", g.Verdict, g.RaceCount, g.ReferenceRaceCount, g.Eager.RaceCount)
			}
		})
	}
}
