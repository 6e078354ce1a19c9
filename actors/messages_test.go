package actors

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/mailbox"
)

// warmPassMessages is what one warm pass posts to the rank's mailboxes,
// whatever the model: the caller's request and the slot's release
// (submission), the handoff and the device's two answers (replay), the copy
// and the launch (device). The store, the recorders and the
// uploader hear nothing. Without the device: no launch, one answer.
func warmPassMessages(rank int, skipDevice bool) map[string]int64 {
	dev := int64(2)
	if skipDevice {
		dev = 1
	}
	return map[string]int64{
		fmt.Sprintf("submission-%d", rank): 2,
		fmt.Sprintf("replay-%d", rank):     1 + dev,
		fmt.Sprintf("device-%d", rank):     dev,
	}
}

// postedSince is what each mailbox received since before (names with none
// left out).
func postedSince(before, after []mailbox.Snapshot) map[string]int64 {
	was := map[string]int64{}
	for _, s := range before {
		was[s.Name] = s.Posted
	}
	out := map[string]int64{}
	for _, s := range after {
		if d := s.Posted - was[s.Name]; d != 0 {
			out[s.Name] = d
		}
	}
	return out
}

// TestWarmPassMessages counts, through the mailbox counters, the messages
// of warm passes of a small and a large model: the same fixed number.
func TestWarmPassMessages(t *testing.T) {
	for _, m := range []keysModel{{keys: 1, calls: 1}, {keys: 64, calls: 4}} {
		for _, skip := range []bool{false, true} {
			// With workers spinning too: a handoff to a spinner is the
			// same message.
			for _, spin := range []time.Duration{0, 250 * time.Microsecond} {
				t.Run(fmt.Sprintf("keys=%d calls=%d skip-device=%v spin=%v", m.keys, m.calls, skip, spin), func(t *testing.T) {
					rt := newRuntime(t, Config{SkipDevice: skip, SpinFor: spin}, nil)
					orch := m.orchestration("messages")
					runPass(t, rt, orch, 0)
					runPass(t, rt, orch, 1)
					before := rt.Mailboxes.Snapshots()
					const n = 5
					for round := 2; round < 2+n; round++ {
						runPass(t, rt, orch, round)
					}
					got := postedSince(before, rt.Mailboxes.Snapshots())
					want := warmPassMessages(0, skip)
					for k := range want {
						want[k] *= n
					}
					if !maps.Equal(got, want) {
						t.Fatalf("%d warm passes posted %v, want %v", n, got, want)
					}
				})
			}
		}
	}
}

// TestNewKeyMessages counts the messages a cold pass adds for each new key,
// on top of a warm pass's: RecordJob and the recorder's Built (recorded and
// imaged, and the recorder free again) to the store, the job to a
// recorder, DefinitionReady and the device's answer to the uploader, the
// upload to the device, DefinitionUploaded to the replay; and one learned
// to the submission per pass, not per key. (Before the recorders built
// what they recorded, a recording also went to a builder and the recorder's
// release to the store: two more a key.)
func TestNewKeyMessages(t *testing.T) {
	for _, keys := range []int{1, 5} {
		t.Run(fmt.Sprintf("keys=%d", keys), func(t *testing.T) {
			rt := newRuntime(t, Config{SkipDevice: true}, nil)
			// The rank's actors start on its first pass: that one is
			// another model's.
			runPass(t, rt, keysModel{keys: 1, calls: 1}.orchestration("first"), 0)
			before := rt.Mailboxes.Snapshots()
			runPass(t, rt, keysModel{keys: keys, calls: 1}.orchestration("new-keys"), 1)
			got := postedSince(before, rt.Mailboxes.Snapshots())
			recorders := int64(0)
			for name, n := range got {
				if strings.HasPrefix(name, "recorder-") {
					recorders += n
					delete(got, name)
				}
			}
			k := int64(keys)
			want := warmPassMessages(0, true)
			want["submission-0"]++ // learned
			want["store"] = 2 * k
			want["uploader-0"] = 2 * k
			want["device-0"] += k + 1 // and the new model's entry roots and kernels, once
			want["replay-0"] += k
			if !maps.Equal(got, want) || recorders != k {
				t.Fatalf("a cold pass of %d new keys posted %v and %d to the recorders, want %v and %d", keys, got, recorders, want, k)
			}
		})
	}
}
