package npu

import (
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// extDef is a one-node Definition whose only node waits on nothing inside
// the body but on external dependency slot 0: it reads boundary slot 0 and
// writes slot 1.
func extDef() *stages.Definition {
	lay := stages.NewView(0, 0, stages.BF16, 256)
	d := &stages.Definition{FullKey: 0xe7, Key: "ext",
		Boundary: []stages.BoundarySlot{
			{Tag: stages.TagInput, Layout: lay, RootElems: 256, AliasRep: -1},
			{Tag: stages.TagOutputExisting, Layout: lay, RootElems: 256, AliasRep: -1},
		},
		Nodes: []stages.NodeDesc{{Kind: stages.KindAIV, Kernel: kAIV(kAct), BlockNum: 1, Tensors: stages.Span{N: 2}}},
		Tensors: []stages.TensorRef{
			{Tag: stages.TagInput, Src: stages.SrcBoundaryExact, Slot: 0, Layout: lay},
			{Tag: stages.TagOutputExisting, Src: stages.SrcBoundaryExact, Slot: 1, Layout: lay},
		},
		ExtDeps: [][]uint32{{0}},
	}
	stages.EncodeDefinition(d)
	return d
}

// TestExtDepNodeWaitsOnOuterFanin: the device has no edge of its own for an
// external dependency slot. A node waiting on one is covered because no node
// of an instance activates before the outer GRAPH task's fanin is met, and
// the host puts the slot's task in that fanin. With it, the node starts
// after the slow task ends; without it (the control), the node starts while
// that task still runs, so the check can tell the two apart.
func TestExtDepNodeWaitsOnOuterFanin(t *testing.T) {
	def := extDef()
	start := func(outerWaits bool) (slowEnd, nodeStart int64) {
		d := newDevice(t)
		d.SetTimeline(true)
		if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
			t.Fatal(err)
		}
		b := newBuilder(synthEntry())
		// The slow task reads every weight and writes x, which the body
		// reads through its boundary but the outer task does not track
		// (the dependency is only an explicit one, as x_gamma0's is).
		slow := b.kernel(stages.KindAIC, kAIC(kMM), 1, []stages.Arg{in(view(eW, 0, stages.BF16, 8, 256, 256)), oe(view(eX, 0, stages.BF16, 256))}, nil, nil, noPred)
		var fanin []stages.TaskID
		if outerWaits {
			fanin = []stages.TaskID{slow}
		}
		g := b.graph(def, []stages.Arg{in(view(eX, 0, stages.BF16, 256)), oe(view(eOut, 0, stages.BF16, 256))}, nil, fanin)
		r := launch(t, d, b.bytes())
		slowEnd, nodeStart = -1, -1
		for _, s := range r.Timeline {
			switch {
			case s.Task == slow:
				slowEnd = s.Start + s.Dur
			case s.Task == g && s.Node == 0:
				nodeStart = s.Start
			}
		}
		if slowEnd < 0 || nodeStart < 0 {
			t.Fatalf("timeline lacks the slow task or the node: %+v", r.Timeline)
		}
		return slowEnd, nodeStart
	}
	if end, st := start(true); st < end {
		t.Errorf("with the slot's task in the outer fanin the node starts at %d ns, before the task ends at %d ns", st, end)
	}
	if end, st := start(false); st >= end {
		t.Errorf("control: without it the node should start early (at %d ns, the task ends at %d ns)", st, end)
	}
}
