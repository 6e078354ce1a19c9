package actors

import (
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// extDepModel is upstream's x_gamma0 pattern in small: a task before the
// Graph calls writes g, a root opted out of dependency tracking, so nothing
// but an explicit dependency orders it before the bodies that read it; each
// call passes that task as an external dependency. g is large, so the
// writer runs long and a body that did not wait for it would read g early.
// extra adds that many more external dependency slots to the calls from
// call index from on (a call site that disagrees with the Definition).
type extDepModel struct {
	calls, extra, from int
}

func (m extDepModel) orchestration(name string) *Orchestration {
	const gElems = 1 << 22
	rows := int64(m.calls * rowsPerCall)
	entry := []stages.Root{
		{Name: "x", Kind: stages.RootEntry, DType: stages.FP32, Shape: []int64{rows, 16}, Elems: rows * 16},
		{Name: "y", Kind: stages.RootEntryOutput, DType: stages.FP32, Shape: []int64{rows, 16}, Elems: rows * 16},
		{Name: "g", Kind: stages.RootEntry, DType: stages.FP32, Shape: []int64{gElems}, Elems: gElems, ManualDep: true},
	}
	aiv := [3]stages.KernelID{-1, 0, -1}
	return &Orchestration{
		Name:    name,
		Entry:   entry,
		Kernels: []stages.Kernel{{Name: "scale", Core: stages.KindAIV, Code: "scale"}},
		Run: func(o stages.Submitter) error {
			gamma := o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: aiv, BlockNum: 1,
				Args: []stages.Arg{{Tag: stages.TagOutputExisting, View: stages.NewView(2, 0, stages.FP32, gElems)}}})
			for c := 0; c < m.calls; c++ {
				row := int64(c * rowsPerCall)
				deps := []stages.TaskID{gamma}
				if c >= m.from {
					for range m.extra {
						deps = append(deps, gamma)
					}
				}
				o.Graph(&stages.GraphCall{
					Key: "layer",
					Boundary: []stages.Arg{
						{Tag: stages.TagInput, View: stages.NewView(0, row*16, stages.FP32, rowsPerCall, 16)},
						{Tag: stages.TagInOut, View: stages.NewView(1, row*16, stages.FP32, rowsPerCall, 16)},
						{Tag: stages.TagInput, View: stages.NewView(2, 0, stages.FP32, 16)},
					},
					ExtDeps: deps,
					Body: func(o stages.Submitter, b *stages.Boundary) error {
						// The first node waits on nothing inside the body:
						// only the outer task's fanin holds it back.
						_, tmp := o.Alloc([]stages.RootSpec{{Name: "tmp", DType: stages.FP32, Shape: []int64{rowsPerCall, 16}}})
						k := o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: aiv, BlockNum: 1, Deps: []stages.TaskID{deps[0]},
							Args: []stages.Arg{{Tag: stages.TagInput, View: b.Tensors[2].View}, {Tag: stages.TagInput, View: b.Tensors[0].View},
								{Tag: stages.TagOutputExisting, View: stages.NewView(tmp, 0, stages.FP32, rowsPerCall, 16)}}})
						o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: aiv, BlockNum: 1, Deps: []stages.TaskID{k, deps[0]},
							Args: []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(tmp, 0, stages.FP32, rowsPerCall, 16)}, {Tag: stages.TagInOut, View: b.Tensors[1].View}}})
						return nil
					},
				})
			}
			return nil
		},
	}
}

// TestExtDepsThroughGraph: a body's dependency on a task the call passes as
// an external dependency replays (no fallback, no mismatch) and the device
// ends where the inline twin ends, in the round that records and in a round
// that only replays.
func TestExtDepsThroughGraph(t *testing.T) {
	orch := extDepModel{calls: 4}.orchestration("extdep")
	want, wantTasks := eagerDigest(t, orch)
	rt := newRuntime(t, Config{}, nil)
	for round := range 2 {
		res := runPass(t, rt, orch, round)
		c := res.Counts
		if c.GraphSubmissions != 4 || c.Definitions != 1 || c.Demoted != 0 || c.BoundaryMismatches != 0 || c.FallbackCalls != 0 || len(res.Warnings) != 0 {
			t.Fatalf("round %d: counts %+v, warnings %q", round, c, res.Warnings)
		}
		if res.Device.Digest != want || res.Device.Tasks != wantTasks {
			t.Fatalf("round %d: digest %x tasks %d, inline twin %x tasks %d", round, res.Device.Digest, res.Device.Tasks, want, wantTasks)
		}
	}
}

// TestExtDepCountMismatch: a call passing more external dependency slots
// than its key's Definition has is a boundary mismatch: warned, counted,
// run on the ordinary path, and the result still the inline twin's.
func TestExtDepCountMismatch(t *testing.T) {
	orch := extDepModel{calls: 4, extra: 1, from: 2}.orchestration("extdep-mismatch")
	want, _ := eagerDigest(t, orch)
	rt := newRuntime(t, Config{}, nil)
	res := runPass(t, rt, orch, 0)
	c := res.Counts
	if c.BoundaryMismatches != 2 || c.GraphSubmissions != 2 || c.Demoted != 0 {
		t.Fatalf("counts %+v", c)
	}
	if len(res.Warnings) != 2 || !strings.Contains(res.Warnings[0], "external dependency count is 2, the Definition has 1") {
		t.Fatalf("warnings %q", res.Warnings)
	}
	if res.Device.Digest != want {
		t.Fatalf("digest %x, inline twin %x", res.Device.Digest, want)
	}
}
