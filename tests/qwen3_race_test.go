package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// raceClass names a race by its kind and both sides' kernels (without
// upstream's copy numbers) and arguments.
func raceClass(r *npu.Race, ks []stages.Kernel) string {
	name := func(a *npu.RaceAccess) string {
		k := a.Kernel[0]
		if a.Kind == stages.KindAIV {
			k = a.Kernel[1]
		}
		return strings.TrimRight(strings.TrimRight(ks[k].Name, "0123456789"), "_")
	}
	return fmt.Sprintf("%s %s/%d %s/%d", r.Kind, name(&r.A), r.A.Arg, name(&r.B), r.B.Arg)
}

// qwen3TileKernels write one accumulator region in tiles inside the
// layer's manual scopes: each tile declares the whole region (inout) and
// picks its part with a scalar (out_idx % 5 * 1024, k_split*1024, ...), so
// by the declared intervals the tiles of one layer race with each other.
// Upstream's Graph form and its inline twin have these races alike, and
// the model declares them (its races: section).
var qwen3TileKernels = []string{"out_proj", "residual_rms_cast", "gate_proj", "up_proj", "silu", "down_proj"}

// qwen3CrossLayer are races of the program with its Graph calls removed
// that its Graph calls order (ARCHITECTURE §4; issue 10): the manual-scope
// tasks of layer l+1 no longer wait for layer l, so layer l+1's seeds and
// projections overwrite the shared scratch arena (root 29) and the
// attention's scratch while layer l still reads or writes them. One of
// each between every two of the 40 layers.
var qwen3CrossLayer = []string{
	"write-write q_proj/0 q_seed/0",
	"write-write k_proj/0 kv_seed/0",
	"write-write v_proj/0 kv_seed/1",
	"write-write rms_recip/1 rms_recip/1",
	"write-write paged_attention_rope_cce_aic/0 paged_attention_rope_cce_aic/0",
	"write-write post_rms_reduce/2 post_rms_reduce/2",
	"write-write down_proj/2 mlp_out_seed/0",
	"read-write dcr_xgamma/0 mlp_out_seed/0",
	"read-write paged_attention_rope_cce_aic/7 q_seed/0",
}

// TestQwen3Races: the inline twin of Qwen3's graph form races only where
// one layer's tiles share a region; with its Graph calls removed the same
// program also races across layers, on the pairs its Graph calls order,
// and ends with other digests.
func TestQwen3Races(t *testing.T) {
	m, err := config.Load(qwen3)
	if err != nil {
		t.Fatal(err)
	}
	ks := m.Kernels()
	ref, err := golden.Compute(orchestration(m, "graph"), npu.Config{MaxRaces: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tw, eager := ref.Twin, ref.Eager
	if tw.Digest == eager.Digest {
		t.Errorf("the eager form ends with the twin's digest %016x", tw.Digest)
	}
	twin := map[string]int{}
	for i := range tw.Races {
		c := raceClass(&tw.Races[i], ks)
		twin[c]++
		ok := false
		for _, k := range qwen3TileKernels {
			if strings.Contains(c, " "+k+"/") && strings.Count(c, "/") == 2 {
				ok = true
			}
		}
		if !ok {
			t.Errorf("twin race outside the tile kernels: %s", tw.Races[i].String())
		}
	}
	eagerOnly := map[string]int{}
	for i := range eager.Races {
		eagerOnly[raceClass(&eager.Races[i], ks)]++
	}
	for _, c := range qwen3CrossLayer {
		if eagerOnly[c] != 39 || twin[c] != 0 {
			t.Errorf("%s: %d in the eager form (want 39, one per pair of layers), %d in the twin (want 0)", c, eagerOnly[c], twin[c])
		}
	}
	if tw.RaceCount != 0 || tw.DeclaredRaces == 0 {
		t.Errorf("twin: %d undeclared races, %d declared; want 0 and the tiles'", tw.RaceCount, tw.DeclaredRaces)
	}
	t.Logf("twin %d races (%d declared), eager form %d", tw.RaceCount, tw.DeclaredRaces, eager.RaceCount)
}

// TestQwen3GraphMatchesTwin: the graph form, replayed, ends with its
// inline twin's digests and task count and races only as the model
// declares (its tiles), not as the eager form, whose digest differs.
func TestQwen3GraphMatchesTwin(t *testing.T) {
	m, err := config.Load(qwen3)
	if err != nil {
		t.Fatal(err)
	}
	rt := startRuntime(t, actors.Config{Golden: true})
	res := runPasses(t, rt, orchestration(m, "graph"), 1)[0]
	if res.Counts.GraphSubmissions == 0 {
		t.Skipf("the graph form fell back to the ordinary path (%q): its bodies depend on tasks across their boundary", res.Warnings)
	}
	g := res.Golden
	if !g.Match {
		t.Errorf("digest %016x, twin %016x; tasks %d, twin %d; %v", g.Digest, g.ReferenceDigest, g.Tasks, g.ReferenceTasks, g.Diff)
	}
	if g.RaceCount != 0 || g.ReferenceRaceCount != 0 || g.DeclaredRaces == 0 || g.Eager.Match || g.Eager.RaceCount == 0 || g.Verdict != golden.VerdictMatch {
		t.Errorf("verdict %s; races %d, twin %d, eager %d; eager digest equal: %v", g.Verdict, g.RaceCount, g.ReferenceRaceCount, g.Eager.RaceCount, g.Eager.Match)
	}
	t.Logf("graph form: %d races (twin %d, eager form %d); eager first differs: %v", g.RaceCount, g.ReferenceRaceCount, g.Eager.RaceCount, g.Eager.Diff)
}
