package tests

import (
	"context"
	"runtime"
	"testing"

	"github.com/hbg-dev/hbg/actors"
)

// TestFlatHeapAcrossRounds: 1000 rounds of DSv4's full form with
// Definitions kept hold a flat heap after round 2. Nothing a warm pass makes
// may outlive it: not the run image, not a Definition, not a span.
func TestFlatHeapAcrossRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 rounds")
	}
	t.Run("kept", func(t *testing.T) { flatHeap(t, actors.Config{SkipDevice: true}, 1000) })
	// Without retention every pass records and uploads again; what it made
	// must go with it.
	t.Run("no-retain", func(t *testing.T) { flatHeap(t, actors.Config{SkipDevice: true, NoRetain: true}, 300) })
}

func flatHeap(t *testing.T, cfg actors.Config, rounds int) {
	m := loadDSv4(t)
	rt := startRuntime(t, cfg)
	orch := orchestration(m, "full")
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// The baseline is taken once the pipeline is warm: with passes in
	// flight, the second pass's buffers (a second run image, the replay's
	// state) are first made some rounds in, once, and sync.Pool and the
	// mailboxes settle; a leak grows with every round after that.
	warm := rounds / 10
	var atWarm uint64
	for r := 0; r < rounds; r++ {
		res, err := rt.Pass(ctx, orch, 0, r)
		if err != nil {
			t.Fatal(err)
		}
		if r > 0 && !cfg.NoRetain && (res.Pass.RecordedNodes != 0 || res.Pass.UploadedDefinitionBytes != 0) {
			t.Fatalf("round %d recorded %d nodes, uploaded %d bytes", r+1, res.Pass.RecordedNodes, res.Pass.UploadedDefinitionBytes)
		}
		if r == warm {
			atWarm = heap()
		}
	}
	end := heap()
	// Flat: what the 900 rounds after the baseline leave behind is below
	// 512 KiB (under 600 bytes a round); a per-round leak of a single
	// Definition reference or run image would show as tens of MiB here.
	const slack = 512 << 10
	if end > atWarm+slack {
		t.Fatalf("heap after round %d: %d bytes; after round %d: %d (+%d)", warm+1, atWarm, rounds, end, end-atWarm)
	}
	t.Logf("heap after round %d: %d bytes; after round %d: %d", warm+1, atWarm, rounds, end)
}
