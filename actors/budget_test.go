package actors

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// steppingKeys is how many keys steppingOrch's rounds take turns with.
const steppingKeys = 4

// steppingOrch is a program whose steps change: round r calls one key
// whose construction value is r % steppingKeys, so the keys take turns;
// each key's body ends with as many dummy tasks as its value, so their
// Definitions are as many device objects.
func steppingOrch() *Orchestration {
	round := func(r int) *Orchestration {
		k := r % steppingKeys
		body := func(o stages.Submitter, b *stages.Boundary) error {
			if err := rowBody(o, b); err != nil {
				return err
			}
			for range k {
				o.Submit(&stages.Task{Kind: stages.KindDummy, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1})
			}
			return nil
		}
		o := keysModel{keys: 1, calls: 1, body: body, config: func(int, int) []uint64 { return []uint64{uint64(k)} }}.orchestration("stepping")
		o.Step = fmt.Sprint(k)
		return o
	}
	o := round(0)
	o.At = round
	return o
}

// TestResidencyBudget: with room for one Definition, keys taking turns
// are evicted and recorded again, the device freeing their objects, every eviction counted, one
// warning in the run, and every pass still matches its golden reference
// (made per round's Step). Without a budget each key records once.
func TestResidencyBudget(t *testing.T) {
	const rounds = 2 * steppingKeys
	var unbounded int64 // the device's most Definition bytes without a budget
	for _, tc := range []struct {
		keep                 int
		keepBytes            int64 // 1: less than any Definition
		recorded, minEvicted int
	}{{0, 0, steppingKeys, 0}, {1, 0, rounds, 3}, {0, 1, rounds, 3}} {
		rt := newRuntime(t, Config{Recorders: 2, Golden: true, KeepDefinitions: tc.keep, KeepBytes: tc.keepBytes}, nil)
		budget := tc.keep > 0 || tc.keepBytes > 0
		orch := steppingOrch()
		var built, evicted, warned, met, rerecorded int
		var deviceMax int64
		for r := range rounds {
			res := runPass(t, rt, orch, r)
			if res.Golden == nil || !res.Golden.OK() {
				t.Fatalf("keep %d round %d: golden %+v", tc.keep, r, res.Golden)
			}
			// record_wait is inside graph_upload, and a pass of keys all
			// kept waits for none.
			if up, _ := res.Phase(trace.PhaseGraphUpload); time.Duration(res.Pass.RecordWaitNs) > up {
				t.Errorf("keep %d round %d: record_wait %v past graph_upload %v", tc.keep, r, time.Duration(res.Pass.RecordWaitNs), up)
			}
			if !budget && r >= steppingKeys && (res.Pass.RecordWaitNs != 0 || res.Counts.Shells != 0) {
				t.Errorf("round %d replays kept keys: record_wait %d ns, %d shells, want none", r, res.Pass.RecordWaitNs, res.Counts.Shells)
			}
			deviceMax = max(deviceMax, res.Pass.DeviceDefinitionBytes)
			built += res.Pass.BuiltDefinitions
			evicted += res.Counts.Evicted
			met += res.Counts.KeysMet
			rerecorded += res.Counts.Rerecorded
			if budget && res.Counts.Kept > max(tc.keep, 1) {
				t.Errorf("keep %d round %d: %d Definitions kept", tc.keep, r, res.Counts.Kept)
			}
			for _, w := range res.Warnings {
				if strings.Contains(w, "residency budget") {
					warned++
				}
			}
		}
		if built != tc.recorded {
			t.Errorf("keep %d: %d Definitions recorded over %d rounds, want %d", tc.keep, built, rounds, tc.recorded)
		}
		if evicted < tc.minEvicted || !budget && evicted != 0 {
			t.Errorf("keep %d: %d evicted, want at least %d", tc.keep, evicted, tc.minEvicted)
		}
		// The device frees what the budget evicts: it holds fewer
		// Definitions' bytes than all the keys' without one.
		if !budget {
			unbounded = deviceMax
		} else if deviceMax == 0 || deviceMax >= unbounded {
			t.Errorf("keep %d, %d bytes: the device held up to %d bytes of Definitions, without a budget %d", tc.keep, tc.keepBytes, deviceMax, unbounded)
		}
		if met != steppingKeys || met+rerecorded != built {
			t.Errorf("keep %d: %d keys met, %d recorded again, %d recordings: want %d keys, the rest re-recordings", tc.keep, met, rerecorded, built, steppingKeys)
		}
		want := 0
		if budget {
			want = 1
		}
		if warned != want {
			t.Errorf("keep %d: %d budget warnings, want %d (one a run)", tc.keep, warned, want)
		}
	}
}
