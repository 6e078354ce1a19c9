package actors

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/stages"
)

// TestWarmPassSendsOnlyChanges: the cold pass sends its whole run image; a
// warm pass whose boundary values are the last pass's sends nothing, and
// one whose boundary scalars changed sends only the changed ranges. Each
// ends with the digest a fresh runtime gets from the same step whole.
func TestWarmPassSendsOnlyChanges(t *testing.T) {
	var shift uint64
	m := keysModel{keys: 8, calls: 4, shift: &shift}
	orch := m.orchestration("patch")
	rt := newRuntime(t, Config{}, nil)
	digests := map[uint64]uint64{}
	for round, tc := range []struct {
		shift uint64
		want  string // all, none, part
	}{{0, "all"}, {0, "none"}, {0, "none"}, {7, "part"}, {7, "none"}, {0, "part"}} {
		shift = tc.shift
		res := runPass(t, rt, orch, round)
		size, sent := res.Pass.RunImageBytes, res.Pass.RunImageSentBytes
		ok := map[string]bool{"all": sent == size, "none": sent == 0, "part": sent > 0 && sent < size/2}[tc.want]
		if size == 0 || !ok {
			t.Fatalf("round %d (shift %d): sent %d of a %d-byte run image, want %s", round, tc.shift, sent, size, tc.want)
		}
		fresh := newRuntime(t, Config{}, nil)
		if want := runPass(t, fresh, orch, 0).Device.Digest; res.Device.Digest != want {
			t.Fatalf("round %d (shift %d): digest %016x, the step sent whole gives %016x", round, tc.shift, res.Device.Digest, want)
		}
		digests[tc.shift] = res.Device.Digest
	}
	if digests[0] == digests[7] {
		t.Fatal("the shifted scalars left the digest unchanged: the test cannot see a stale patch")
	}
}

// TestEdgeBoundEndsPass: a pass whose run image or recording passes its
// orchestration's bound on dependency edges fails with ErrTooManyEdges
// (not as a panic of the caller's code), and the rank serves the next
// pass: on the code before, the fanin grew until memory ran out.
func TestEdgeBoundEndsPass(t *testing.T) {
	m := keysModel{keys: 4, calls: 8}
	for name, orch := range map[string]*Orchestration{
		"a recording":       m.orchestration("bounded"),
		"the ordinary path": golden.Inline(m.orchestration("bounded")),
	} {
		rt := newRuntime(t, Config{}, nil)
		orch.MaxEdges = 1 // the run image's and each Definition's
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := rt.Pass(ctx, orch, 1, 0)
		cancel()
		if err == nil {
			err = res.Err
		}
		if !errors.Is(err, stages.ErrTooManyEdges) || strings.Contains(err.Error(), "panicked") {
			t.Fatalf("%s, bound %d: %v, want ErrTooManyEdges, not a panic", name, orch.MaxEdges, err)
		}
		orch.MaxEdges = 0
		if res := runPass(t, rt, orch, 2); res.Device == nil {
			t.Fatalf("%s: the next pass: %+v", name, res)
		}
	}
}
