package actors

import (
	"testing"
	"time"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/trace"
)

// TestOrdinaryWhileRecording: with Config.OrdinaryWhileRecording, a pass
// that meets a key with no Definition runs its calls on the ordinary path
// and returns while the recording is held back (a pass that waited for it
// would not return); it matches its golden reference, barriers discounted.
// Once the recording is let go, a later pass replays the key, waiting for
// nothing. Without the option the calls are shells their pass waits for.
func TestOrdinaryWhileRecording(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	hook := func(*mailbox.RecordJob) {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
	}
	rt := newRuntime(t, Config{Recorders: 2, Golden: true, OrdinaryWhileRecording: true}, hook)
	orch := keysModel{keys: 1, calls: 2}.orchestration("ordinary-while-recording")
	for r := range 2 {
		res := runPass(t, rt, orch, r)
		c := res.Counts
		if c.OrdinaryWhileRecording != 2 || c.Shells != 0 || c.Barriers != 4 || res.Pass.BuiltDefinitions != 0 || res.Pass.RecordWaitNs != 0 {
			t.Fatalf("round %d (recording held): counts %+v, built %d, record_wait %d: want both calls ordinary, 4 barriers, no wait", r, c, res.Pass.BuiltDefinitions, res.Pass.RecordWaitNs)
		}
		if res.Golden == nil || !res.Golden.OK() {
			t.Fatalf("round %d: golden %+v", r, res.Golden)
		}
	}
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no recording started")
	}
	close(release)
	// The Definition reaches the rank beside the passes: the passes that
	// run before it do not wait, and once one replays, every later does.
	replayed := -1
	for r := 2; r < 202 && replayed < 0; r++ {
		res := runPass(t, rt, orch, r)
		if res.Golden == nil || !res.Golden.OK() {
			t.Fatalf("round %d: golden %+v", r, res.Golden)
		}
		if res.Counts.OrdinaryWhileRecording == 0 {
			replayed = r
			if res.Counts.GraphSubmissions != 2 || res.Counts.Barriers != 0 {
				t.Fatalf("round %d: counts %+v, want two replays", r, res.Counts)
			}
		}
	}
	if replayed < 0 {
		t.Fatal("no pass replayed the key after its recording was let go")
	}
	if res := runPass(t, rt, orch, replayed+1); res.Counts.OrdinaryWhileRecording != 0 || res.Counts.GraphSubmissions != 2 {
		t.Fatalf("after the first replay: counts %+v", res.Counts)
	}

	wait := newRuntime(t, Config{Recorders: 2, Golden: true}, nil)
	res := runPass(t, wait, keysModel{keys: 1, calls: 2}.orchestration("waits"), 0)
	if c := res.Counts; c.OrdinaryWhileRecording != 0 || c.Shells != 2 || res.Pass.BuiltDefinitions != 1 {
		t.Fatalf("waiting: counts %+v, built %d: want two shells and one recording", c, res.Pass.BuiltDefinitions)
	}
	if up, _ := res.Phase(trace.PhaseGraphUpload); time.Duration(res.Pass.RecordWaitNs) > up {
		t.Errorf("record_wait %v past graph_upload %v", time.Duration(res.Pass.RecordWaitNs), up)
	}
}
