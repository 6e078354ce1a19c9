package actors

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/internal/storetest"
	"github.com/hbg-dev/hbg/stages"
)

// nestedModel is a step as one Graph of Graphs: the outer Graph "step"
// calls rowBody's keys as Graphs of their own, each over rows of the outer
// boundary, through a buffer the step allocates, with the step's boundary
// scalar passed as it is (ScalarSrc) plus a value of the body's own. With
// direct set, the orchestration also calls key-0 directly, after the step.
type nestedModel struct {
	keys, calls int
	direct      bool
	shift       *uint64
}

func (m nestedModel) orchestration(name string) *Orchestration {
	rows := int64(m.keys * m.calls * rowsPerCall)
	entry := []stages.Root{
		{Name: "x", Kind: stages.RootEntry, DType: stages.FP32, Shape: []int64{rows, 16}, Elems: rows * 16},
		{Name: "y", Kind: stages.RootEntryOutput, DType: stages.FP32, Shape: []int64{rows, 16}, Elems: rows * 16},
		{Name: "z", Kind: stages.RootEntry, DType: stages.FP32, Shape: []int64{rowsPerCall, 16}, Elems: rowsPerCall * 16},
	}
	step := func(o stages.Submitter, b *stages.Boundary) error {
		_, buf := o.Alloc([]stages.RootSpec{{Name: "buf", DType: stages.FP32, Shape: []int64{rows, 16}}})
		for c := 0; c < m.calls; c++ {
			for k := 0; k < m.keys; k++ {
				row := int64((c*m.keys + k) * rowsPerCall)
				in := stages.NewView(b.Tensors[0].View.Root, b.Tensors[0].View.Offset+row*16, stages.FP32, rowsPerCall, 16)
				if c%2 == 1 {
					// Odd calls read what the step's own buffer got.
					in = stages.NewView(buf, row*16-int64(m.keys*rowsPerCall*16), stages.FP32, rowsPerCall, 16)
				}
				out := stages.NewView(buf, row*16, stages.FP32, rowsPerCall, 16)
				o.Graph(&stages.GraphCall{
					Key:         fmt.Sprintf("key-%d", k),
					Boundary:    []stages.Arg{{Tag: stages.TagInput, View: in}, {Tag: stages.TagInOut, View: out}},
					Scalars:     []uint64{b.Scalars[0].Value},
					ScalarSrc:   []int32{b.Scalars[0].Src},
					Body:        rowBody,
					KeyComplete: true,
				})
			}
		}
		// The buffer to the step's output, with a value of its own.
		o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 0, -1}, BlockNum: 1,
			Args:    []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(buf, 0, stages.FP32, rows, 16)}, {Tag: stages.TagInOut, View: b.Tensors[1].View}},
			Scalars: []stages.Scalar{stages.Static(7)}})
		return nil
	}
	return &Orchestration{
		Name:    name,
		Entry:   entry,
		Kernels: []stages.Kernel{{Name: "scale", Core: stages.KindAIV, Code: "scale"}, {Name: "mm", Core: stages.KindAIC, Code: "mm"}},
		Run: func(o stages.Submitter) error {
			var shift uint64
			if m.shift != nil {
				shift = *m.shift
			}
			o.Graph(&stages.GraphCall{
				Key: "step",
				Boundary: []stages.Arg{
					{Tag: stages.TagInput, View: stages.NewView(0, 0, stages.FP32, rows, 16)},
					{Tag: stages.TagInOut, View: stages.NewView(1, 0, stages.FP32, rows, 16)},
				},
				Scalars:     []uint64{100 + shift},
				Body:        step,
				KeyComplete: true,
			})
			if m.direct {
				o.Graph(&stages.GraphCall{
					Key: "key-0",
					Boundary: []stages.Arg{
						{Tag: stages.TagInput, View: stages.NewView(2, 0, stages.FP32, rowsPerCall, 16)},
						{Tag: stages.TagInOut, View: stages.NewView(1, 0, stages.FP32, rowsPerCall, 16)},
					},
					Scalars: []uint64{5 + shift}, Body: rowBody, KeyComplete: true,
				})
			}
			return nil
		},
	}
}

// TestNestedGraphGolden: a step that is one Graph of Graphs records one
// outer Definition with its children by hash, replays as one submission
// warm, and every pass ends with its inline twin's digests and the eager
// form's. The golden reference is made once per orchestration, so the
// passes whose boundary scalar changes (shifted) are held to a fresh
// runtime's cold pass of the same values instead (golden there too): a
// child's scalar bound to the step's patched slot, not baked.
func TestNestedGraphGolden(t *testing.T) {
	shift := uint64(0)
	orch := nestedModel{keys: 2, calls: 3, direct: true, shift: &shift}.orchestration("nested")
	rt := newRuntime(t, Config{Golden: true}, nil)
	digests := map[uint64]uint64{}
	for round, sh := range []uint64{0, 0, 0, 11, 11, 0} {
		shift = sh
		res := runPass(t, rt, orch, round)
		if g := res.Golden; sh == 0 && (g == nil || !g.OK() || g.Err() != nil || !g.Match || !g.Eager.Match || g.Diff != nil) {
			t.Fatalf("round %d: golden %+v", round, g)
		}
		if len(res.Warnings) > 0 || len(res.Defects) > 0 {
			t.Fatalf("round %d: warnings %q, defects %v", round, res.Warnings, res.Defects)
		}
		c := res.Counts
		if c.HostSubmissions != 2 || c.GraphSubmissions != 2 || c.Demoted != 0 || c.FallbackCalls != 0 || c.BoundaryMismatches != 0 {
			t.Fatalf("round %d: counts %+v", round, c)
		}
		// 2 keys x 3 calls x 3 nodes, the step's alloc and its last task;
		// key-0's direct call, 3.
		if want := 2*3*3 + 2 + 3; res.Device.Tasks != want {
			t.Fatalf("round %d: %d device tasks, want %d", round, res.Device.Tasks, want)
		}
		fresh := newRuntime(t, Config{Golden: true}, nil)
		ref := runPass(t, fresh, nestedModel{keys: 2, calls: 3, direct: true, shift: &shift}.orchestration(fmt.Sprintf("nested-%d", sh)), 0)
		if g := ref.Golden; !g.OK() || !g.Match || !g.Eager.Match {
			t.Fatalf("round %d: the fresh runtime's golden %+v", round, g)
		}
		if res.Device.Digest != ref.Device.Digest {
			t.Fatalf("round %d (shift %d): digest %016x, a fresh runtime's %016x", round, sh, res.Device.Digest, ref.Device.Digest)
		}
		digests[sh] = res.Device.Digest
	}
	if digests[0] == digests[11] {
		t.Fatal("the shifted scalar left the digest unchanged: the test cannot see a baked child scalar")
	}
}

// TestNestedOnDisk: a nested Definition is kept on disk as parts, the step
// and each child an entry of its own; a fresh runtime loads the step with
// its children and records nothing. A step whose child is missing, or
// whose child's bytes changed, is refused whole and recorded again: its
// digest is the step's, never a half-replay's.
func TestNestedOnDisk(t *testing.T) {
	orch := nestedModel{keys: 2, calls: 2}.orchestration("nested-disk")
	dir := t.TempDir()
	first := newRuntime(t, Config{StoreDir: dir, Golden: true}, nil)
	want := runPass(t, first, orch, 0)
	if want.Pass.BuiltDefinitions != 1 || !want.Golden.OK() {
		t.Fatalf("first: built %d, golden %+v", want.Pass.BuiltDefinitions, want.Golden)
	}
	if errs := first.FlushStore(); len(errs) != 0 {
		t.Fatal(errs)
	}
	imgs := storetest.Images(t, dir)
	var step storetest.Image
	var kids []storetest.Image
	for _, im := range imgs {
		if im.Entry.Key == "step" {
			step = im
		} else {
			kids = append(kids, im)
		}
	}
	// Each key is called over the step's input and over its own buffer:
	// two boundary signatures, two Definitions.
	if step.Pack == "" || len(kids) != 4 {
		t.Fatalf("entries %+v, want the step and 4 children", imgs)
	}
	second := newRuntime(t, Config{StoreDir: dir, Golden: true}, nil)
	res := runPass(t, second, orch, 0)
	if res.Pass.BuiltDefinitions != 0 || res.Pass.LoadedDefinitions != 1 || res.Pass.StoreRejected != 0 || res.Device.Digest != want.Device.Digest || !res.Golden.OK() {
		t.Fatalf("second: built %d, loaded %d, rejected %d, digest %016x (want %016x), golden %+v",
			res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions, res.Pass.StoreRejected, res.Device.Digest, want.Device.Digest, res.Golden)
	}

	// A store holding the step but not one of its children.
	read := func(im storetest.Image) []byte {
		b, err := os.ReadFile(im.Pack)
		if err != nil {
			t.Fatal(err)
		}
		return b[im.Off : im.Off+im.N]
	}
	item := func(im storetest.Image) diskstore.Item {
		fk, _ := strconv.ParseUint(im.Entry.FullKey, 16, 64)
		h, _ := strconv.ParseUint(im.Entry.Hash, 16, 64)
		return diskstore.Item{Def: &stages.Definition{FullKey: fk, Key: im.Entry.Key, ContentHash: h}, Image: read(im), Model: im.Entry.Model}
	}
	partial := t.TempDir()
	put := newRuntime(t, Config{StoreDir: partial}, nil)
	if _, err := put.Disk().PutBatch([]diskstore.Item{item(step), item(kids[0]), item(kids[1]), item(kids[2])}); err != nil {
		t.Fatal(err)
	}
	put.Stop(context.Background())
	missing := newRuntime(t, Config{StoreDir: partial, Golden: true}, nil)
	res = runPass(t, missing, orch, 0)
	if res.Pass.BuiltDefinitions != 1 || res.Pass.LoadedDefinitions != 0 || res.Device.Digest != want.Device.Digest || !res.Golden.OK() {
		t.Fatalf("child missing: built %d, loaded %d, digest %016x (want %016x), golden %+v",
			res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions, res.Device.Digest, want.Device.Digest, res.Golden)
	}
	if len(res.Warnings) == 0 || !strings.Contains(strings.Join(res.Warnings, "\n"), "child") {
		t.Errorf("child missing: warnings %q, want one naming the missing child", res.Warnings)
	}

	// A child's bytes changed on disk.
	damage(t, kids[3])
	damaged := newRuntime(t, Config{StoreDir: dir, Golden: true}, nil)
	res = runPass(t, damaged, orch, 0)
	if res.Pass.BuiltDefinitions != 1 || res.Pass.LoadedDefinitions != 0 || res.Device.Digest != want.Device.Digest || !res.Golden.OK() {
		t.Fatalf("child damaged: built %d, loaded %d, rejected %d, digest %016x (want %016x), golden %+v",
			res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions, res.Pass.StoreRejected, res.Device.Digest, want.Device.Digest, res.Golden)
	}
}
