package tests

import (
	"fmt"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/internal/benchunit"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// deviceImages builds a form's run image and its Definitions straight
// from stages (no actors): every Graph call records once per key and
// replays as a GRAPH task, as the submission actor would do.
func deviceImages(t testing.TB, m *config.Model, form string) (run []byte, defs [][]byte) {
	t.Helper()
	g := &grapher{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots()), defs: map[uint64]*stages.Definition{}}
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
	*stages.OrdinaryPath
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
			return g.OrdinaryPath.Graph(call)
		}
		stages.EncodeDefinition(d) // sets the content hash
		g.defs[fk] = d
		g.order = append(g.order, d)
	}
	return g.SubmitGraph(call, stages.GraphSubmission{FullKey: fk, DefHash: d.ContentHash}, d.HeapBytes, d.WrittenSlots())
}

func dsv4Device(t testing.TB, m *config.Model, form string, cfg npu.Config) *npu.Die {
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

// dsv4RacesPerLayer is how many races DSv4's orchestration has per layer
// (43 layers), in every form, by the views upstream's trace declares: 42 in
// the attention's output projection groups, 2 on x_norm_scale. The model
// file's races: section names their kernels and says why.
const dsv4RacesPerLayer = 44

// TestDSv4Races: every DSv4 form races exactly where the model declares it
// does, and nowhere else. With the declarations dropped, the same races
// are reported, each between kernels of one declared class.
func TestDSv4Races(t *testing.T) {
	m := loadDSv4(t)
	if len(m.DeclaredRaces()) != 2 {
		t.Fatalf("%d declared race classes, want 2", len(m.DeclaredRaces()))
	}
	ks := m.Kernels()
	undeclared := make([]stages.Kernel, len(ks))
	for i, k := range ks {
		k.RaceGroup = 0
		undeclared[i] = k
	}
	group := func(a npu.RaceAccess) int32 {
		for _, k := range a.Kernel {
			if k >= 0 && ks[k].RaceGroup != 0 {
				return ks[k].RaceGroup
			}
		}
		return 0
	}
	want := 43 * dsv4RacesPerLayer
	for _, form := range m.Forms() {
		t.Run(form, func(t *testing.T) {
			d := dsv4Device(t, m, form, withRaces(npu.DefaultConfig(), want))
			res, err := d.Launch()
			if err != nil {
				t.Fatal(err)
			}
			if res.RaceCount != 0 || res.DeclaredRaces != want {
				t.Errorf("%d undeclared races, %d declared; want 0 and %d", res.RaceCount, res.DeclaredRaces, want)
			}
			d.RegisterKernels(undeclared)
			if res, err = d.Launch(); err != nil {
				t.Fatal(err)
			}
			if res.RaceCount != want || res.DeclaredRaces != 0 {
				t.Errorf("without the declarations: %d races, %d declared; want %d and 0", res.RaceCount, res.DeclaredRaces, want)
			}
			for _, r := range res.Races {
				if g := group(r.A); g == 0 || g != group(r.B) {
					t.Errorf("not in one declared class: %s (%s, %s)", r.String(), ks[r.A.Kernel[0]].Name, ks[r.B.Kernel[0]].Name)
				}
			}
		})
	}
}

func withRaces(cfg npu.Config, max int) npu.Config {
	cfg.MaxRaces = max
	return cfg
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
				cpu0 := benchunit.CPUNs()
				for b.Loop() {
					if _, err := d.Launch(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(benchunit.CPUNs()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestDSv4Golden: every DSv4 form ends with its inline twin's digests and
// task count, and with the eager form's digest; the verdict is racy for
// undeclared races in none, and the races the model declares counted apart.
func TestDSv4Golden(t *testing.T) {
	m, passes := dsv4FormPasses(t)
	for _, form := range m.Forms() {
		t.Run(form, func(t *testing.T) {
			g := passes[form][0].Golden
			if !g.Match || !g.Eager.Match || g.Tasks != g.ReferenceTasks {
				t.Errorf("digest %016x reference %016x eager %016x, tasks %d reference %d; diff %v", g.Digest, g.ReferenceDigest, g.Eager.Digest, g.Tasks, g.ReferenceTasks, g.Diff)
			}
			if g.Verdict != golden.VerdictMatch || g.RaceCount != 0 || g.ReferenceRaceCount != 0 || g.Eager.RaceCount != 0 || g.DeclaredRaces != 43*dsv4RacesPerLayer {
				t.Errorf("verdict %s, races %d, reference %d, eager %d, declared %d", g.Verdict, g.RaceCount, g.ReferenceRaceCount, g.Eager.RaceCount, g.DeclaredRaces)
			}
		})
	}
}
