package wire

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

func taskInfo(task int32, node int32, key string) npu.TaskInfo {
	return npu.TaskInfo{Task: npu.TaskRef{Task: stages.TaskID(task), Node: node}, Key: key, Kind: stages.KindMIX,
		Kernel: [3]stages.KernelID{3, 4, -1}, KernelName: "mla_mm", Op: "model.yaml:12"}
}

func race(a, b int32) npu.Race {
	return npu.Race{Kind: npu.RaceReadWrite,
		A:    npu.RaceAccess{TaskInfo: taskInfo(a, -1, ""), Arg: 1, Tag: stages.TagInput},
		B:    npu.RaceAccess{TaskInfo: taskInfo(b, 2, "attn"), Arg: -1, Tag: stages.TagInOut},
		Root: 5, Graph: 7, Internal: 1, Lo: 10, Hi: 20}
}

// fullResult fills every field the wire carries with a distinct value.
func fullResult() *actors.PassResult {
	p := trace.NewPass(3, 2)
	p.Cold = true // not round 0's: set, so it is seen to cross
	for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
		p.Set(ph, int64(100+ph))
	}
	for op := trace.Op(0); op < trace.NumOps; op++ {
		p.Ops[op] = trace.OpTotal{Count: int64(op + 1), TotalNs: 1000 * int64(op+1)}
	}
	p.RecordedNodes, p.BuiltDefinitions, p.UploadedDefinitionBytes = 1679, 8, 123456
	p.LoadedDefinitions, p.LoadedBytes, p.StoreRejected = 2, 999, 1
	p.SimulationNs, p.DeviceIdleNs = 55, 66
	p.FetchedDefinitions, p.FetchedBytes, p.FetchRejected = 8, 4096, 1
	p.RunImageBytes, p.RunImageSentBytes = 50060, 128
	p.RecordWaitNs, p.DeviceDefinitionBytes = 3600, 197000
	races := []npu.Race{race(1, 2), race(3, 4)}
	diff := &golden.Diff{Root: 9, Name: "out", Lo: 1, Hi: 2, Writer: taskInfo(8, -1, ""), Theirs: taskInfo(9, 1, "moe"), Against: "reference"}
	return &actors.PassResult{
		Pass: p,
		Counts: actors.Counts{GraphCalls: 86, HostSubmissions: 129, OrdinaryTasks: 43, GraphSubmissions: 86, Definitions: 8,
			Demoted: 1, BoundaryMismatches: 2, FallbackCalls: 3, Verified: 4, ExpectedDeviceTasks: 15972,
			Shells: 5, Evicted: 6, Kept: 7, KeptBytes: 8, OrdinaryWhileRecording: 9, KeysMet: 10, Rerecorded: 11, Barriers: 12},
		Device: &npu.Result{Tasks: 15972, Kernels: 7845, Skipped: 4128, Dummies: 5, Allocs: 6, GraphTasks: 86, Subtasks: 99,
			SimNs: 67720000, Digest: 0x4133337b3b99a97b, CoreBusyNs: []int64{1, 2, 3, 4, 5, 6}, CriticalPathNs: 45069000,
			Races: races, RaceCount: 2, DeclaredRaces: 1892, FaninEdges: 43412, ShippedEdges: 24112, AICPUBusyNs: []int64{7, 8, 9, 10}},
		Warnings:      []string{"a warning"},
		DeviceStartNs: 77,
		Golden: &golden.Check{Reference: "inline twin", Verdict: golden.VerdictRacy, Match: false,
			Digest: 1, ReferenceDigest: 2, Tasks: 3, ReferenceTasks: 4,
			Races: races, RaceCount: 2, ReferenceRaces: []npu.Race{race(5, 6)}, ReferenceRaceCount: 1,
			DeclaredRaces: 1892, Diff: diff,
			Eager: golden.EagerCheck{Digest: 5, Match: true, Races: []npu.Race{race(7, 8)}, RaceCount: 1, Diff: diff}},
	}
}

// roundTrip is what the other process reads: encoded, marshalled,
// unmarshalled, decoded.
func roundTrip(t *testing.T, res *actors.PassResult) *actors.PassResult {
	t.Helper()
	b, err := proto.Marshal(FromResult(res))
	require.NoError(t, err)
	var m PassResult
	require.NoError(t, proto.Unmarshal(b, &m))
	got, err := m.ToResult()
	require.NoError(t, err)
	return got
}

func TestResultRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  func() *actors.PassResult
	}{
		{"full", fullResult},
		{"no device, no golden", func() *actors.PassResult {
			r := fullResult()
			r.Device, r.Golden = nil, nil
			return r
		}},
		{"failed early", func() *actors.PassResult {
			return &actors.PassResult{Pass: trace.NewPass(1, 4), Err: fmt.Errorf("rank 1 round 4: %w", actors.ErrStopped)}
		}},
		{"golden match, no races", func() *actors.PassResult {
			r := fullResult()
			r.Device.Races, r.Device.RaceCount = nil, 0
			r.Golden = &golden.Check{Reference: "inline twin", Verdict: golden.VerdictMatch, Match: true, Digest: 7, ReferenceDigest: 7,
				Eager: golden.EagerCheck{Digest: 7, Match: true}}
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.res()
			got := roundTrip(t, want)
			if want.Err != nil {
				require.Error(t, got.Err)
				assert.Equal(t, want.Err.Error(), got.Err.Error())
				assert.ErrorIs(t, got.Err, actors.ErrStopped)
				got.Err, want.Err = nil, nil
			}
			assert.Equal(t, want, got)
		})
	}
}

// A field added to the structs a result carries must cross too: the
// round trip above sees only fields fullResult sets, so it sets them all.
func TestFullResultSetsEveryField(t *testing.T) {
	r := fullResult()
	for _, v := range []any{r.Pass, r.Counts, *r.Device, *r.Golden} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			f := rv.Type().Field(i)
			switch f.Name {
			case "Outputs", "CriticalPath", "Timeline", "Flows", "TaskDigests", "Match":
				continue // npu.Result's per-run detail that stays on the node; Golden.Match may be false
			}
			assert.False(t, rv.Field(i).IsZero(), "%s.%s is not set in fullResult: does it cross the wire?", rv.Type(), f.Name)
		}
	}
}

func TestFailureKinds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind Failure_Kind
	}{
		{fmt.Errorf("x: %w", actors.ErrStopped), Failure_STOPPED},
		{fmt.Errorf("x: %w", context.Canceled), Failure_CANCELED},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), Failure_DEADLINE},
		{&actors.RankBusyError{Rank: 1}, Failure_RANK_BUSY},
		{fmt.Errorf("x: %w", actors.ErrInvalidPass), Failure_INVALID_PASS},
		{bad("y"), Failure_BAD_MESSAGE},
		{errors.New("a body failed"), Failure_OTHER},
	} {
		f := FailureOf(tc.err)
		assert.Equal(t, tc.kind, f.GetKind(), tc.err.Error())
		got := f.Err()
		assert.Equal(t, tc.err.Error(), got.Error())
		for _, s := range []error{actors.ErrStopped, context.Canceled, context.DeadlineExceeded, actors.ErrRankBusy, actors.ErrInvalidPass, ErrBadMessage} {
			assert.Equal(t, errors.Is(tc.err, s), errors.Is(got, s), "%v is %v", tc.err, s)
		}
	}
	assert.Nil(t, FailureOf(nil))
	assert.NoError(t, (*Failure)(nil).Err())
}

func goodPlace() *Place {
	yaml := []byte("name: m\n")
	return &Place{Run: "r1", ModelName: "m.yaml", ModelYaml: yaml, ModelSha256: ModelHash(yaml), Form: "full",
		Ranks: []int32{1, 3}, Nodes: []string{"a:1", "b:2"}, Node: 1, DriverAddress: "c:3", DriverId: "d",
		Token: make([]byte, TokenSize), Options: &Options{Recorders: 8, InFlight: 2}}
}

func TestPlaceValidate(t *testing.T) {
	require.NoError(t, goodPlace().Validate())
	for _, tc := range []struct {
		name, want string
		edit       func(*Place)
	}{
		{"no run", "no run id", func(p *Place) { p.Run = "" }},
		{"no model", "no model", func(p *Place) { p.ModelYaml = nil }},
		{"short hash", "model hash of 3 bytes", func(p *Place) { p.ModelSha256 = []byte{1, 2, 3} }},
		{"changed model", "do not hash to the hash sent", func(p *Place) { p.ModelYaml = []byte("name: n\n") }},
		{"no form", "no form", func(p *Place) { p.Form = "" }},
		{"no ranks", "0 ranks", func(p *Place) { p.Ranks = nil }},
		{"negative rank", "rank -1", func(p *Place) { p.Ranks = []int32{-1} }},
		{"rank twice", "rank 3 (negative or twice)", func(p *Place) { p.Ranks = []int32{3, 3} }},
		{"no nodes", "0 nodes", func(p *Place) { p.Nodes = nil }},
		{"node index", "node index 2 of 2", func(p *Place) { p.Node = 2 }},
		{"no driver", "no driver", func(p *Place) { p.DriverId = "" }},
		{"no token", "token of 0 bytes", func(p *Place) { p.Token = nil }},
		{"short token", "token of 8 bytes", func(p *Place) { p.Token = p.Token[:8] }},
		{"no options", "no options", func(p *Place) { p.Options = nil }},
		{"recorders", "0 recorders", func(p *Place) { p.Options.Recorders = 0 }},
		{"in flight", "passes in flight", func(p *Place) { p.Options.InFlight = 1 << 20 }},
		{"timeout", "pass timeout", func(p *Place) { p.Options.PassTimeoutNs = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := goodPlace()
			tc.edit(p)
			err := p.Validate()
			require.ErrorIs(t, err, ErrBadMessage)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.ErrorIs(t, (*Place)(nil).Validate(), ErrBadMessage)
}

func TestResultRefused(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*PassResult)
	}{
		{"negative rank", "rank -1", func(m *PassResult) { m.Rank = -1 }},
		{"no pass", "no pass", func(m *PassResult) { m.Pass = nil }},
		{"phases", "4 phases", func(m *PassResult) { m.Pass.PhasesNs = m.Pass.PhasesNs[:4] }},
		{"ops", "2 operations", func(m *PassResult) { m.Pass.Ops = m.Pass.Ops[:2] }},
		{"measured", "measured phases", func(m *PassResult) { m.Pass.Measured = 1 << 10 }},
		{"nil op", "operation 1 empty", func(m *PassResult) { m.Pass.Ops[1] = nil }},
		{"negative count", "negative count", func(m *PassResult) { m.Pass.RecordedNodes = -5 }},
		{"counts", "count -1 out of range", func(m *PassResult) { m.Counts.Definitions = -1 }},
		{"cores", "device of 5 cores", func(m *PassResult) { m.Device.CoreBusyNs = make([]int64, 5) }},
		{"verdict", "golden verdict \"maybe\"", func(m *PassResult) { m.Golden.Verdict = "maybe" }},
		{"race kind", "kind 9", func(m *PassResult) { m.Golden.Races[0].Kind = 9 }},
		{"race tag", "tag 77", func(m *PassResult) { m.Golden.Races[0].A.Tag = 77 }},
		{"race task kind", "core type 42", func(m *PassResult) { m.Golden.EagerRaces[0].B.Task.Kind = 42 }},
		{"race kernels", "1 kernels, want 3", func(m *PassResult) { m.Golden.ReferenceRaces[0].B.Task.Kernel = []int32{1} }},
		{"race empty", "race 1 empty", func(m *PassResult) { m.Golden.Races[1] = nil }},
		{"race interval", "interval [20, 10)", func(m *PassResult) { m.Golden.Races[0].Lo, m.Golden.Races[0].Hi = 20, 10 }},
		{"diff writer", "diff writer", func(m *PassResult) { m.Golden.Diff.Writer = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := FromResult(fullResult())
			tc.edit(m)
			_, err := m.ToResult()
			require.ErrorIs(t, err, ErrBadMessage)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := (*PassResult)(nil).ToResult()
	assert.ErrorIs(t, err, ErrBadMessage)
}

// The decoders take bytes from another process: whatever they are, the
// answer is a message or an error, never a panic.

func FuzzPlace(f *testing.F) {
	b, _ := proto.Marshal(goodPlace())
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Place
		if proto.Unmarshal(b, &p) != nil {
			return
		}
		_ = p.Validate()
	})
}

func FuzzPassResult(f *testing.F) {
	b, _ := proto.Marshal(FromResult(fullResult()))
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m PassResult
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		res, err := m.ToResult()
		if err != nil {
			return
		}
		// What the driver's report does with a result must not panic
		// either.
		if g := res.Golden; g != nil {
			_ = g.Err()
			for _, r := range g.Races {
				_ = r.String()
			}
		}
	})
}

// TestLimitFailures: a node's limit refusals and an unauthorized message
// cross the wire as their own kinds: errors.Is finds the limit's sentinel
// and ErrLimit on the driver, and no other.
func TestLimitFailures(t *testing.T) {
	for _, sentinel := range []error{ErrTooManyRanks, ErrTooManyPlacements, ErrTooManyDrivers, ErrModelTooLarge, ErrUnauthorized} {
		err := FailureOf(fmt.Errorf("node x: %w: 9 of 8", sentinel)).Err()
		if !errors.Is(err, sentinel) {
			t.Errorf("%v: errors.Is lost its sentinel across the wire", sentinel)
		}
		if limit := sentinel != ErrUnauthorized; errors.Is(err, ErrLimit) != limit {
			t.Errorf("%v: errors.Is(err, ErrLimit) = %v, want %v", sentinel, !limit, limit)
		}
		for _, other := range []error{ErrTooManyRanks, ErrTooManyPlacements, ErrTooManyDrivers, ErrModelTooLarge, ErrUnauthorized, ErrBadMessage} {
			if other != sentinel && errors.Is(err, other) {
				t.Errorf("%v crossed as %v too", sentinel, other)
			}
		}
	}
}
