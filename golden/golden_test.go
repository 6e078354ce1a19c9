package golden

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// rows makes an orchestration of calls Graph calls of one key, each
// scaling four rows of x into y with body.
func rows(name string, calls int, body stages.BodyFunc) *stages.Orchestration {
	n := int64(calls * 4)
	return &stages.Orchestration{
		Name: name,
		Entry: []stages.Root{
			{Name: "x", Kind: stages.RootEntry, DType: stages.FP32, Shape: []int64{n, 16}, Elems: n * 16},
			{Name: "y", Kind: stages.RootEntryOutput, DType: stages.FP32, Shape: []int64{n, 16}, Elems: n * 16},
		},
		Kernels: []stages.Kernel{{Name: "scale", Core: stages.KindAIV, Code: "scale"}},
		Run: func(o stages.Submitter) error {
			for c := 0; c < calls; c++ {
				row := int64(c * 4)
				o.Graph(&stages.GraphCall{
					Key: "rows",
					Boundary: []stages.Arg{
						{Tag: stages.TagInput, View: stages.NewView(0, row*16, stages.FP32, 4, 16)},
						{Tag: stages.TagInOut, View: stages.NewView(1, row*16, stages.FP32, 4, 16)},
					},
					Scalars: []uint64{uint64(c)},
					Body:    body,
				})
			}
			return nil
		},
	}
}

func scale(o stages.Submitter, b *stages.Boundary) error {
	o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 0, -1}, BlockNum: 1,
		Args:    []stages.Arg{{Tag: stages.TagInput, View: b.Tensors[0].View}, {Tag: stages.TagInOut, View: b.Tensors[1].View}},
		Scalars: []stages.Scalar{b.Scalars[0]}})
	return nil
}

// TestComputeReturnsBodyError: a body that fails on a call the pass would
// replay (its second) fails the reference, with the body's error and its
// key. The twin once dropped it and went on without the body's tasks, and
// a pass that replayed the first call's recording showed a false mismatch.
func TestComputeReturnsBodyError(t *testing.T) {
	errBad := errors.New("bad block parameter")
	failing := func(o stages.Submitter, b *stages.Boundary) error {
		if b.Scalars[0].Value == 1 {
			return errBad
		}
		return scale(o, b)
	}
	ref, err := Compute(rows("failing", 2, failing), npu.Config{})
	if !errors.Is(err, errBad) || !strings.Contains(err.Error(), `inline twin: graph "rows"`) {
		t.Fatalf("want the body's error naming the twin and the key, got %v (reference %v)", err, ref)
	}
	panicking := func(o stages.Submitter, b *stages.Boundary) error {
		if b.Scalars[0].Value == 1 {
			panic(fmt.Errorf("wrapped: %w", errBad))
		}
		return scale(o, b)
	}
	if _, err := Compute(rows("panicking", 2, panicking), npu.Config{}); !errors.Is(err, errBad) || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("want the panic's error, got %v", err)
	}
	if _, err := Compute(rows("clean", 2, scale), npu.Config{}); err != nil {
		t.Fatal(err)
	}
}

// TestErrMatches: a failed check's error matches its verdict's sentinel
// (and not the other), and errors.As reaches the check; a match is nil.
func TestErrMatches(t *testing.T) {
	ref, err := Compute(rows("clean", 2, scale), npu.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// A pass that ends as the twin does: its device tasks without the
	// barriers.
	same := *ref.Twin
	same.Tasks -= ref.Barriers
	if g := ref.Compare(&same); g.Err() != nil || !g.OK() {
		t.Fatalf("the twin against itself: %v", g.Err())
	}
	wrong := same
	wrong.Digest++
	race := same
	race.RaceCount = 1
	for _, c := range []struct {
		name      string
		res       *npu.Result
		want, not error
		verdict   Verdict
	}{
		{"mismatch", &wrong, ErrMismatch, ErrRacy, VerdictMismatch},
		{"racy", &race, ErrRacy, ErrMismatch, VerdictRacy},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := fmt.Errorf("rank 0 round 0: %w", ref.Compare(c.res).Err())
			if !errors.Is(err, c.want) || errors.Is(err, c.not) {
				t.Errorf("%v: errors.Is %v %v, %v %v", err, c.want, errors.Is(err, c.want), c.not, errors.Is(err, c.not))
			}
			var ge *Error
			if !errors.As(err, &ge) || ge.Check.Verdict != c.verdict {
				t.Errorf("errors.As: %v", ge)
			}
		})
	}
}
