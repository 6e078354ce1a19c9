package trace

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run `go test ./trace -update` to create it")
	assert.Equal(t, string(want), string(got), "golden %s differs; if the change is meant, rerun with -update and read the diff", path)
}

func TestStatOf(t *testing.T) {
	tests := []struct {
		name string
		in   []int64
		want Stat
	}{
		{"empty is not measured", nil, Stat{}},
		{"one", []int64{7}, Stat{MinNs: 7, MedianNs: 7, MaxNs: 7, N: 1}},
		{"odd count takes the middle", []int64{9, 1, 5}, Stat{MinNs: 1, MedianNs: 5, MaxNs: 9, N: 3}},
		{"even count takes the mean of the two middles", []int64{40, 10, 30, 20}, Stat{MinNs: 10, MedianNs: 25, MaxNs: 40, N: 4}},
		{"even mean truncates to whole ns", []int64{1, 2}, Stat{MinNs: 1, MedianNs: 1, MaxNs: 2, N: 2}},
		{"ties", []int64{3, 3, 3, 3}, Stat{MinNs: 3, MedianNs: 3, MaxNs: 3, N: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			assert.Equal(t, tt.want, StatOf(in))
			assert.Equal(t, tt.in, in, "StatOf must not reorder its input")
		})
	}
}

// fivePassesTwoRanks is rounds 5 × ranks 2 with known figures, in µs to
// keep the arithmetic readable. Warm control-plane sums per pass:
//
//	rank 0 rounds 1-4: host_orch 100,300,200,400 + graph_upload 50,10,40,20 + arena_h2d 5,5,5,5
//	                   = 155, 315, 245, 425
//	rank 1 rounds 1-4: host_orch 120,110,500,130 + graph_upload 30,60,5,45  + arena_h2d 6,6,6,6
//	                   = 156, 176, 511, 181
//
// Sorted: 155 156 176 181 245 315 425 511 → min 155, median (181+245)/2 =
// 213, max 511. The sum of per-phase minima would be 100+5+5 = 110, a pass
// that never ran.
func fivePassesTwoRanks() []Pass {
	const us = 1000
	hostOrch := [2][5]int64{{9000, 100, 300, 200, 400}, {8000, 120, 110, 500, 130}}
	upload := [2][5]int64{{700, 50, 10, 40, 20}, {900, 30, 60, 5, 45}}
	arena := [2]int64{5, 6}
	var passes []Pass
	for rank := 0; rank < 2; rank++ {
		for round := 0; round < 5; round++ {
			p := NewPass(rank, round)
			p.Set(PhaseArgs, int64(10+round)*us)
			p.Set(PhaseHostOrch, hostOrch[rank][round]*us)
			p.Set(PhaseGraphUpload, upload[rank][round]*us)
			p.Set(PhaseArenaH2D, arena[rank]*us)
			p.Set(PhaseDeviceWall, int64(2000+rank)*us)
			p.SimulationNs = 50_000 * us
			p.Ops.Add(OpSubmitTask, 1000, 300*us)
			p.Ops.Add(OpGraphSubmit, 20, 20*us)
			if p.Cold {
				p.Ops.Add(OpRecordNode, 700, 2000*us)
				p.Ops.Add(OpBuildDefinition, 7, 350*us)
				p.RecordedNodes = 700
				p.BuiltDefinitions = 7
				p.UploadedDefinitionBytes = 4112
			}
			passes = append(passes, p)
		}
	}
	return passes
}

func TestSummarizeRoundsByRanks(t *testing.T) {
	const us = 1000
	passes := fivePassesTwoRanks()
	tab := Summarize(passes)

	assert.Equal(t, 8, tab.Warm.Passes)
	assert.Equal(t, 2, tab.Cold.Passes)
	for ph := Phase(0); ph < NumPhases; ph++ {
		assert.Equal(t, 8, tab.Warm.Phases[ph].N, "warm n of %s", ph)
		assert.Equal(t, 2, tab.Cold.Phases[ph].N, "cold n of %s", ph)
	}
	// host_orch warm: 100 110 120 130 200 300 400 500 → median (130+200)/2.
	assert.Equal(t, Stat{MinNs: 100 * us, MedianNs: 165 * us, MaxNs: 500 * us, N: 8}, tab.Warm.Phases[PhaseHostOrch])
	assert.Equal(t, Stat{MinNs: 8000 * us, MedianNs: 8500 * us, MaxNs: 9000 * us, N: 2}, tab.Cold.Phases[PhaseHostOrch])
	assert.Equal(t, Stat{MinNs: 2000 * us, MedianNs: 2000*us + us/2, MaxNs: 2001 * us, N: 8}, tab.Warm.Phases[PhaseDeviceWall])

	// The control plane is the spread of per-pass sums…
	assert.Equal(t, Stat{MinNs: 155 * us, MedianNs: 213 * us, MaxNs: 511 * us, N: 8}, tab.Warm.ControlPlane)
	var sums []int64
	for _, p := range passes {
		if !p.Cold {
			s, ok := p.ControlPlaneNs()
			require.True(t, ok)
			sums = append(sums, s)
		}
	}
	assert.Equal(t, StatOf(sums), tab.Warm.ControlPlane)
	// …never the sum of per-phase minima.
	sumOfMinima := tab.Warm.Phases[PhaseHostOrch].MinNs + tab.Warm.Phases[PhaseGraphUpload].MinNs + tab.Warm.Phases[PhaseArenaH2D].MinNs
	assert.Equal(t, int64(110*us), sumOfMinima)
	assert.NotEqual(t, sumOfMinima, tab.Warm.ControlPlane.MinNs)
	assert.Equal(t, Stat{MinNs: 8906 * us, MedianNs: 9305*us + us/2, MaxNs: 9705 * us, N: 2}, tab.Cold.ControlPlane)

	// Ops: all passes, and warm passes alone.
	assert.Equal(t, OpTotal{Count: 10_000, TotalNs: 3000 * us}, tab.Ops[OpSubmitTask])
	assert.Equal(t, OpTotal{Count: 1400, TotalNs: 4000 * us}, tab.Ops[OpRecordNode])
	assert.Equal(t, OpTotal{Count: 8000, TotalNs: 2400 * us}, tab.WarmOps[OpSubmitTask])
	assert.Zero(t, tab.WarmOps[OpRecordNode], "warm passes record nothing in this fixture")
	assert.Empty(t, tab.Warm.Partial)
	assert.Empty(t, tab.Cold.Partial)

	// A pure function: order does not matter.
	rev := slices.Clone(passes)
	slices.Reverse(rev)
	assert.Equal(t, tab, Summarize(rev))
}

func TestSummarizePartialAndAbsentPhases(t *testing.T) {
	var passes []Pass
	for round := 0; round < 4; round++ {
		p := NewPass(0, round)
		p.Set(PhaseHostOrch, int64(100+round))
		if round != 2 {
			p.Set(PhaseArenaH2D, 10)
		}
		// graph_upload and device_wall never measured (device skipped).
		passes = append(passes, p)
	}
	tab := Summarize(passes)
	assert.Equal(t, 3, tab.Warm.Passes)
	assert.Equal(t, []Phase{PhaseArenaH2D}, tab.Warm.Partial)
	assert.Equal(t, Stat{}, tab.Warm.Phases[PhaseGraphUpload])
	assert.Equal(t, Stat{}, tab.Warm.Phases[PhaseDeviceWall])
	assert.Equal(t, 2, tab.Warm.Phases[PhaseArenaH2D].N)
	// Per-pass sums over what each pass measured: 111, 102, 113.
	assert.Equal(t, Stat{MinNs: 102, MedianNs: 111, MaxNs: 113, N: 3}, tab.Warm.ControlPlane)

	var buf bytes.Buffer
	require.NoError(t, tab.WriteText(&buf))
	assert.Contains(t, buf.String(), "over 2 of 3 control-plane phases; absent from every pass: graph_upload)")
	assert.Contains(t, buf.String(), "(warning: missing from some passes: arena_h2d)")

	r := NewReport(RunInfo{Model: "m", Form: "f", Rounds: 4, Ranks: 1}, passes)
	assert.Equal(t, DeviceSkipped, r.Device)
	assert.Equal(t, []string{"phase arena_h2d measured in 2 of 3 warm passes"}, r.Warnings)
}

func TestSummarizeNoPasses(t *testing.T) {
	tab := Summarize(nil)
	assert.Equal(t, Table{}, tab)
	var buf bytes.Buffer
	require.NoError(t, tab.WriteText(&buf))
	assert.Contains(t, buf.String(), "warm passes: 0")
}

func TestTableText(t *testing.T) {
	tab := Summarize(fivePassesTwoRanks())
	var buf bytes.Buffer
	require.NoError(t, tab.WriteText(&buf))
	golden(t, "table.txt", buf.Bytes())
}

func TestPhaseAndOpNames(t *testing.T) {
	for ph := Phase(0); ph < NumPhases; ph++ {
		got, err := ParsePhase(ph.String())
		require.NoError(t, err)
		assert.Equal(t, ph, got)
	}
	for op := Op(0); op < NumOps; op++ {
		got, err := ParseOp(op.String())
		require.NoError(t, err)
		assert.Equal(t, op, got)
	}
	_, err := ParsePhase("bind")
	assert.ErrorContains(t, err, `unknown phase "bind"`)
	_, err = ParseOp("submit")
	assert.ErrorContains(t, err, `unknown op "submit"`)
	assert.Equal(t, []bool{false, true, true, true, false},
		[]bool{PhaseArgs.ControlPlane(), PhaseHostOrch.ControlPlane(), PhaseGraphUpload.ControlPlane(), PhaseArenaH2D.ControlPlane(), PhaseDeviceWall.ControlPlane()})
}

func TestOps(t *testing.T) {
	var a, b Ops
	t0 := Now()
	a.Since(OpSubmitTask, t0)
	a.Since(OpSubmitTask, t0)
	require.Equal(t, int64(2), a[OpSubmitTask].Count)
	assert.GreaterOrEqual(t, a[OpSubmitTask].TotalNs, int64(0))
	b.Add(OpSubmitTask, 3, 30)
	b.Add(OpBuildDefinition, 1, 5)
	before := a[OpSubmitTask].TotalNs
	a.Merge(&b)
	assert.Equal(t, OpTotal{Count: 5, TotalNs: before + 30}, a[OpSubmitTask])
	assert.Equal(t, OpTotal{Count: 1, TotalNs: 5}, a[OpBuildDefinition])
	assert.Zero(t, a[OpAllocTensors])
}

// The hot path must not allocate: it runs once per submitted task.
func TestOpsSinceDoesNotAllocate(t *testing.T) {
	var o Ops
	allocs := testing.AllocsPerRun(1000, func() {
		t0 := Now()
		o.Since(OpSubmitTask, t0)
	})
	assert.Zero(t, allocs)
}

func BenchmarkOpsSince(b *testing.B) {
	var o Ops
	b.ReportAllocs()
	for b.Loop() {
		t0 := Now()
		o.Since(OpSubmitTask, t0)
	}
}
