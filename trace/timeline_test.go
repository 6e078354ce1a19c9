package trace

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSeparatePasses: passes of a rank that overlap go on different slot
// tracks, a pass that starts after one ended reuses its slot, and what
// has no round (the rank's run, a recorder's work) stays where it was.
func TestSeparatePasses(t *testing.T) {
	round := func(r int64) map[string]any { return map[string]any{string(KeyRound): r, string(KeyRank): int64(0)} }
	sl := []Slice{
		{Process: HostProcess, Track: "rank 0", Name: SpanRun, StartNs: 0, DurNs: 100},
		{Process: HostProcess, Track: "rank 0", Name: "host_orch", StartNs: 0, DurNs: 10, Args: round(0)},
		{Process: HostProcess, Track: "rank 0", Name: "device_wall", StartNs: 10, DurNs: 50, Args: round(0)},
		{Process: HostProcess, Track: "rank 0", Name: "host_orch", StartNs: 12, DurNs: 5, Args: round(1)},
		{Process: HostProcess, Track: "rank 0", Name: "device_wall", StartNs: 60, DurNs: 30, Args: round(1)},
		{Process: HostProcess, Track: "rank 0", Name: "host_orch", StartNs: 61, DurNs: 5, Args: round(2)},
		{Process: HostProcess, Track: "rank 1", Name: "host_orch", StartNs: 5, DurNs: 5, Args: round(0)},
		{Process: HostProcess, Track: "recorder-0", Name: SpanRecord, StartNs: 1, DurNs: 2, Args: round(0)},
		{Process: "rank 0 device (simulated clock) round 0", Track: "aic 0", Name: "k", StartNs: 10, DurNs: 5, Args: map[string]any{"round": 0}},
	}
	got := SeparatePasses(sl)
	tracks := make([]string, len(got))
	for i, s := range got {
		tracks[i] = s.Track
	}
	assert.Equal(t, []string{
		"rank 0",
		"rank 0 pass slot 0", "rank 0 pass slot 0",
		"rank 0 pass slot 1", "rank 0 pass slot 1",
		"rank 0 pass slot 0",
		"rank 1 pass slot 0",
		"recorder-0",
		"aic 0",
	}, tracks)
}
