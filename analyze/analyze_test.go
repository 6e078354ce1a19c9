package analyze_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hbg-dev/hbg/analyze"
	"github.com/hbg-dev/hbg/config"
)

var (
	dsv4Once sync.Once
	dsv4Maps []*analyze.Map
	dsv4Err  error
)

// dsv4 maps DeepSeek-V4's step under each of its forms' settings, once.
func dsv4(t *testing.T) []*analyze.Map {
	t.Helper()
	dsv4Once.Do(func() {
		m, err := config.Load("../config/models/dsv4_flash_decode.yaml")
		if err != nil {
			dsv4Err = err
			return
		}
		s, err := analyze.Settings(m)
		if err != nil {
			dsv4Err = err
			return
		}
		dsv4Maps, dsv4Err = analyze.MapAll(m, s)
	})
	if dsv4Err != nil {
		t.Fatal(dsv4Err)
	}
	return dsv4Maps
}

func block(t *testing.T, m *analyze.Map, name string) *analyze.BlockMap {
	t.Helper()
	for _, b := range m.Blocks {
		if b.Info.Name == name {
			return b
		}
	}
	t.Fatalf("no block %s in the map", name)
	return nil
}

// TestDSv4MatchesSeed: the map of DSv4's eager step is the seed's table
// (SWA attention 2, shareable; CSA attention 21, shareable though layer
// 42's kernels are its own copies; HCA attention 20; the hash-routed MoE
// of layers 0 and 1 not shareable, three kernels differing in code; the
// loop's CSA MoE; the sort-routed MoE 21, shareable), except where the
// model at 6ebaf7715 differs from the seed's commit: layer 2's CSA MoE
// routes by hash (upstream #1939), a class of its own told apart by
// route_by_hash.
func TestDSv4MatchesSeed(t *testing.T) {
	m := dsv4(t)[0]
	if m.Step.Tasks != 15971 {
		t.Fatalf("eager step of %d tasks, want the reference's 15971", m.Step.Tasks)
	}
	for _, tc := range []struct {
		block      string
		calls      int
		sites      int
		classes    []int
		separating []string
	}{
		{"swa_attn", 2, 2, []int{2}, nil},
		{"hash_moe", 2, 2, []int{1, 1}, []string{"variant"}},
		{"csa_attn", 21, 2, []int{21}, nil},
		{"csa_moe", 20, 1, []int{1, 19}, []string{"route_by_hash"}},
		{"hca_attn", 20, 1, []int{20}, nil},
		{"hca_moe", 21, 2, []int{21}, nil},
	} {
		b := block(t, m, tc.block)
		var sizes []int
		for _, k := range b.Classes {
			sizes = append(sizes, len(k.Calls))
		}
		if len(b.Calls) != tc.calls || len(b.Sites) != tc.sites || !slices.Equal(sizes, tc.classes) || !slices.Equal(b.Separating, tc.separating) {
			t.Errorf("%s: %d occurrences at %d sites, classes %v told apart by %v; want %d at %d, %v by %v",
				tc.block, len(b.Calls), len(b.Sites), sizes, b.Separating, tc.calls, tc.sites, tc.classes, tc.separating)
		}
	}
	// The hash-routed MoE bakes its epoch into three kernels' code.
	var diffs []string
	for _, d := range block(t, m, "hash_moe").Diffs[0] {
		diffs = append(diffs, d.String())
	}
	want := []string{"node 25: kernel code dispatch_meta vs dispatch_meta_0", "node 27: kernel code dispatch_wait vs dispatch_wait_0", "node 288: kernel code combine_wait vs combine_wait_0"}
	if !slices.Equal(diffs, want) {
		t.Errorf("hash_moe differs at %q, want %q", diffs, want)
	}
	// Layer 2's routing: route_hash where the others sort.
	if d := block(t, m, "csa_moe").Diffs[0]; len(d) == 0 || !strings.Contains(d[0].String(), "route_hash_1 vs route_sort") {
		t.Errorf("csa_moe's classes differ at %v, want route_hash_1 vs route_sort", d)
	}
	if c := block(t, m, "csa_moe").Classes[0].Calls[0]; c.Params[0] != 2 {
		t.Errorf("csa_moe's class of one is layer %d, want 2", c.Params[0])
	}
	// ... settled by a host-side if on route_by_hash (#1939's hazard): the
	// map names its line.
	src, err := os.ReadFile("../config/models/dsv4_flash_decode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ifLine := 1 + strings.Count(string(src[:strings.Index(string(src), "{if: route_by_hash, k: route_hash_1")]), "\n")
	info := block(t, m, "csa_moe").Info
	if i := slices.Index(info.Structural, "route_by_hash"); i < 0 || info.StructuralLines[i] != ifLine {
		t.Errorf("csa_moe's structure depends on %v at %v; want route_by_hash at line %d", info.Structural, info.StructuralLines, ifLine)
	}
}

// TestDSv4SeedsFindings: what the seed found by hand, that a name
// comparison cannot see. Layer 42's CSA attention shares the loop's
// Definition (its kernels differ in name and declared direction, not in
// code), and its boundary is moved by two counters, the layer and the loop
// index (42 and 20 there); layer 42's MoE writes another destination
// (pre_hc_hidden_out, where the loop's writes the running hidden state);
// gate_3's folded literal is gate_2's scalar.
func TestDSv4SeedsFindings(t *testing.T) {
	m := dsv4(t)[0]
	csa := block(t, m, "csa_attn")
	k := csa.Classes[0]
	if !slices.Contains(k.Uses, "layer") || !slices.Contains(k.Uses, "csa_i") {
		t.Errorf("csa_attn's boundary is patched from %v, want layer and csa_i", k.Uses)
	}
	last := k.Calls[len(k.Calls)-1]
	if last.Params[0] != 42 || last.Params[1] != 20 || last.Variant != "last" {
		t.Errorf("csa_attn's last occurrence is layer %d, csa_i %d, variant %s; want 42, 20, last", last.Params[0], last.Params[1], last.Variant)
	}
	if csa.NameOnly == 0 || csa.DirectionOnly == 0 {
		t.Errorf("csa_attn: %d kernels differ in name only, %d arguments in direction only; want some of each (layer 42's copies)", csa.NameOnly, csa.DirectionOnly)
	}
	moe := block(t, m, "hca_moe")
	if len(moe.Classes) != 1 {
		t.Fatalf("hca_moe has %d classes, want 1 (gate_3 folds the 4 that gate_2 takes)", len(moe.Classes))
	}
	found := false
	for _, p := range moe.Classes[0].Patched {
		if p.Slot == "hidden_out" && slices.Equal(p.Roots, []string{"hidden", "pre_hc_hidden_out"}) {
			c := m.Step.Calls[p.RootAt[1][0]]
			found = len(p.RootAt[1]) == 1 && c.Params[0] == 42
		}
	}
	if !found {
		t.Errorf("hca_moe's patched values %+v: want hidden_out viewing pre_hc_hidden_out at layer 42 only", moe.Classes[0].Patched)
	}
	// A block is a Graph or contains Graphs: the pair contains the four.
	pair := block(t, m, "csa_hca_pair")
	if len(pair.Contains) != 4 || !slices.Contains(csa.Within, "csa_hca_pair") {
		t.Errorf("csa_hca_pair contains %v; csa_attn within %v", pair.Contains, csa.Within)
	}
}

// seedCosts is the seed's upstream figures (a task submitted 0.75 us, a
// node recorded 1.07 us, a replay 2.3 us): a fixed cost model, so that the
// proposal is the same on any machine.
var seedCosts = analyze.Costs{SubmitNs: 750, AllocNs: 750, SubmitSmallNs: 750, AllocSmallNs: 750, ReplayNs: 2300, RecordNodeNs: 1070, BuildNs: 340e3 / 336, UploadByteNs: 1}

// TestDSv4Proposal: under the seed's costs the proposal is the blocks
// form over all 43 layers with layer 42 replaying the loop's blocks (129
// host submissions), with the keys the hand-written full form has, and
// the model accepts it: it loads and passes the static Graph checks.
func TestDSv4Proposal(t *testing.T) {
	maps := dsv4(t)
	p := analyze.Propose(maps, seedCosts, analyze.DefaultHorizon)
	var got []string
	for _, g := range p.Graphs {
		got = append(got, g.Block+"["+strings.Join(g.Config, ",")+"]")
	}
	want := []string{"swa_attn[variant]", "hash_moe[variant]", "csa_attn[variant]", "csa_moe[route_by_hash]", "hca_attn[]", "hca_moe[variant]"}
	if !slices.Equal(got, want) || p.Shape.HostSubmissions() != 129 || p.Shape.GraphCalls != 86 {
		t.Fatalf("proposal %v, %d host submissions (%d Graph calls); want %v, 129 (86)", got, p.Shape.HostSubmissions(), p.Shape.GraphCalls, want)
	}
	if !slices.Contains(p.Setting.Forms, "full") || slices.Contains(p.Setting.Forms, "eager") {
		t.Errorf("program params of forms %v, want full's (fewest Definitions)", p.Setting.Forms)
	}
	m := maps[0].Step.Model
	if err := m.AddForm("auto_test", []byte(p.Form()), false); err != nil {
		t.Fatal(err)
	}
	if errs := m.FormChecks("auto_test"); len(errs) > 0 {
		t.Fatalf("the proposed form fails the static checks: %v", errs)
	}
}

// TestNothingRepeats: a step whose blocks each occur once and are small
// gets no Graph, each refusal saying why.
func TestNothingRepeats(t *testing.T) {
	m, err := config.Load("testdata/once.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := analyze.Settings(m)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := analyze.MapAll(m, s)
	if err != nil {
		t.Fatal(err)
	}
	p := analyze.Propose(maps, seedCosts, analyze.DefaultHorizon)
	if len(p.Graphs) != 0 || len(p.Rejected) != 3 {
		t.Fatalf("Graphs %v, rejected %v; want none and 3", p.Graphs, p.Rejected)
	}
	for _, r := range p.Rejected {
		if !strings.Contains(r.Why, "break-even not reached") {
			t.Errorf("%s: %s; want break-even not reached", r.Block, r.Why)
		}
	}
	if !strings.Contains(p.Summary(), "no Graph") || !strings.Contains(p.Form(), "graphs: {}") {
		t.Errorf("summary %q, form %q", p.Summary(), p.Form())
	}
}

// TestCut: cut at every hc_pre_rms (and its numbered copies), as the seed
// did, the step is 86 segments, one per block; the loop's CSA attention is
// one class of 20, and layer 42's differs from it only in declared
// direction (its arguments out_existing where the loop's say inout).
func TestCut(t *testing.T) {
	st := dsv4(t)[0].Step
	cm, err := analyze.Cut(st, "hc_pre_rms")
	if err != nil {
		t.Fatal(err)
	}
	segs := 0
	var loop *analyze.CutClass
	for _, k := range cm.Classes {
		segs += len(k.Segments)
		if strings.HasPrefix(k.Head, "hc_pre_rms_3,") {
			loop = k
		}
	}
	if segs != 86 || loop == nil || len(loop.Segments) != 20 {
		t.Fatalf("%d segments, the loop's CSA class %+v; want 86 and 20", segs, loop)
	}
	var l42 *analyze.CutClass
	for _, k := range cm.Classes {
		if strings.HasPrefix(k.Head, "hc_pre_rms_7,") {
			l42 = k
		}
	}
	if l42 == nil || len(l42.Differs) == 0 {
		t.Fatalf("no class for layer 42's CSA attention, or no difference: %+v", l42)
	}
	for _, d := range l42.Differs {
		if !strings.Contains(d, " x ") || !strings.Contains(d, " oe ") {
			t.Errorf("layer 42's CSA attention differs at %q: want a direction only (x vs oe)", d)
		}
	}
	if _, err := analyze.Cut(st, "no_such_kernel"); !errors.Is(err, analyze.ErrUnknownKernel) {
		t.Errorf("a cut at an unknown kernel: %v, want ErrUnknownKernel", err)
	}
}

// TestDSv4StepProposal: the step as one Graph of the proposal's Graphs is
// priced (one replay against recording and flattening the whole step once):
// at the default horizon it does not pay back and the analysis says after
// how many passes it would; over a long one it is the proposal (1 host
// submission), a form that loads and passes the static checks.
func TestDSv4StepProposal(t *testing.T) {
	maps := dsv4(t)
	p := analyze.Propose(maps, seedCosts, analyze.DefaultHorizon)
	if p.Step != nil || !strings.Contains(p.NoStep, "break-even not reached") || !strings.Contains(p.NoStep, "paid back after") {
		t.Fatalf("step %+v, no step %q; want none at horizon %d, with its break-even", p.Step, p.NoStep, analyze.DefaultHorizon)
	}
	p = analyze.Propose(maps, seedCosts, 100000)
	if p.Step == nil || p.Shape.HostSubmissions() != 1 || p.Step.Children != 86 || p.Step.Flat.HostSubmissions() != 128 && p.Step.Flat.HostSubmissions() != 129 {
		t.Fatalf("step %+v, shape %+v; want the step of the 86 Graph calls, 1 host submission", p.Step, p.Shape)
	}
	if p.Step.BreakEven <= float64(analyze.DefaultHorizon) || p.Step.SavingNs <= 0 {
		t.Errorf("break-even %.1f passes, saving %.0f ns", p.Step.BreakEven, p.Step.SavingNs)
	}
	if !strings.Contains(p.Form(), "step: {key: step}") || !strings.Contains(p.Summary(), "the whole step one Graph") {
		t.Errorf("form %q, summary %q", p.Form(), p.Summary())
	}
	m := maps[0].Step.Model
	if err := m.AddForm("auto_step", []byte(p.Form()), false); err != nil {
		t.Fatal(err)
	}
	if errs := m.FormChecks("auto_step"); len(errs) > 0 {
		t.Fatalf("the proposed step fails the static checks: %v", errs)
	}
}
