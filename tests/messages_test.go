package tests

import (
	"maps"
	"testing"

	"github.com/hbg-dev/hbg/actors"
)

// TestWarmPassMessagesDSv4: a warm pass of DSv4's full form (129 host
// submissions, 86 Graph calls, 15972 device tasks) posts the same 7
// messages as a one-call model (actors.TestWarmPassMessages): the caller's
// request and the slot's release to the submission, the handoff and the
// device's two answers to the replay, the copy and the launch to the device.
func TestWarmPassMessagesDSv4(t *testing.T) {
	m := loadDSv4(t)
	rt := startRuntime(t, actors.Config{})
	orch := orchestration(m, "full")
	runPasses(t, rt, orch, 2)
	before := rt.Mailboxes.Snapshots()
	const n = 3
	runPasses(t, rt, orch, n)
	was := map[string]int64{}
	for _, s := range before {
		was[s.Name] = s.Posted
	}
	got := map[string]int64{}
	for _, s := range rt.Mailboxes.Snapshots() {
		if d := s.Posted - was[s.Name]; d != 0 {
			got[s.Name] = d
		}
	}
	want := map[string]int64{"submission-0": 2 * n, "replay-0": 3 * n, "device-0": 2 * n}
	if !maps.Equal(got, want) {
		t.Fatalf("%d warm passes posted %v, want %v", n, got, want)
	}
}
