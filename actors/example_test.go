package actors_test

import (
	"context"
	"fmt"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/stages"
)

// A four-layer model written in Go, run inside an actor system the host
// program owns: each layer is one Graph call of the same key, so the first
// records and the other three replay, and the next pass records nothing.
func Example() {
	sys := actors.NewActorSystem(nil) // any *actor.ActorSystem; this one is quiet
	defer sys.Shutdown()
	rt, err := actors.Start(sys, actors.Config{Recorders: 2})
	if err != nil {
		panic(err)
	}
	defer rt.Stop(context.Background())

	const layers, d = 4, 64
	entry := []stages.Root{
		{Name: "w", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{layers * d, d}, Elems: layers * d * d},
		{Name: "hidden", Kind: stages.RootEntryOutput, DType: stages.FP32, Shape: []int64{8, d}, Elems: 8 * d},
	}
	kernels := []stages.Kernel{
		{Name: "matmul", Core: stages.KindAIC, Code: "matmul"},
		{Name: "norm", Core: stages.KindAIV, Code: "norm"},
	}
	// The body sees only its boundary: the layer's weights, the hidden state
	// and the layer index as a boundary scalar, patched at every replay.
	body := func(o stages.Submitter, b *stages.Boundary) error {
		_, tmp := o.Alloc([]stages.RootSpec{{Name: "tmp", DType: stages.FP32, Shape: []int64{8, d}}})
		o.Submit(&stages.Task{Kind: stages.KindAIC, Kernel: [3]stages.KernelID{0, -1, -1}, BlockNum: 4,
			Args: []stages.Arg{b.Tensors[0], {Tag: stages.TagInput, View: b.Tensors[1].View}, {Tag: stages.TagOutputExisting, View: stages.NewView(tmp, 0, stages.FP32, 8, d)}}})
		o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 1, -1}, BlockNum: 1,
			Args:    []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(tmp, 0, stages.FP32, 8, d)}, b.Tensors[1]},
			Scalars: []stages.Scalar{b.Scalars[0]}})
		return nil
	}
	orch := &actors.Orchestration{
		Name: "example/decode", Entry: entry, Kernels: kernels,
		Run: func(o stages.Submitter) error {
			for l := int64(0); l < layers; l++ {
				o.Graph(&stages.GraphCall{
					Key: "layer",
					Boundary: []stages.Arg{
						{Tag: stages.TagInput, View: stages.NewView(0, l*d*d, stages.BF16, d, d)},
						{Tag: stages.TagInOut, View: stages.NewView(1, 0, stages.FP32, 8, d)},
					},
					Scalars: []uint64{uint64(l)},
					Body:    body,
				})
			}
			return nil
		},
	}
	for round := 0; round < 2; round++ {
		res, err := rt.Pass(context.Background(), orch, 0, round)
		if err != nil {
			panic(err)
		}
		fmt.Printf("round %d: %d Graph submissions, %d Definition(s), %d nodes recorded, %d device tasks\n",
			round, res.Counts.GraphSubmissions, res.Counts.Definitions, res.Pass.RecordedNodes, res.Device.Tasks)
	}
	// Output:
	// round 0: 4 Graph submissions, 1 Definition(s), 3 nodes recorded, 12 device tasks
	// round 1: 4 Graph submissions, 1 Definition(s), 0 nodes recorded, 12 device tasks
}
