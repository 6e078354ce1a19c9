package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

const devTimeout = 10 * time.Second

func devEntry() []stages.Root {
	return []stages.Root{
		{Name: "x", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{256}, Elems: 256, Creator: stages.NoTask},
		{Name: "w", Kind: stages.RootEntry, DType: stages.BF16, Shape: []int64{256, 256}, Elems: 65536, Creator: stages.NoTask},
		{Name: "y", Kind: stages.RootEntryOutput, DType: stages.BF16, Shape: []int64{256}, Elems: 256, Creator: stages.NoTask},
	}
}

func devKernels() []stages.Kernel {
	return []stages.Kernel{{Name: "mm", Core: stages.KindAIC, Code: "mm"}, {Name: "act", Core: stages.KindAIV, Code: "act"}}
}

// devRun is a small eager run through the ordinary submit path.
func devRun(scale uint64) []byte {
	o := stages.NewOrdinaryPath(devEntry())
	_, r := o.Alloc([]stages.RootSpec{{Name: "h", DType: stages.FP32, Shape: []int64{256}}})
	o.Submit(&stages.Task{Kind: stages.KindAIC, Kernel: [3]stages.KernelID{0, -1, -1}, BlockNum: 4,
		Args:    []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(0, 0, stages.BF16, 256)}, {Tag: stages.TagInput, View: stages.NewView(1, 0, stages.BF16, 256, 256)}, {Tag: stages.TagOutputExisting, View: stages.NewView(r, 0, stages.FP32, 256)}},
		Scalars: []stages.Scalar{stages.Static(scale)}})
	o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 1, -1}, BlockNum: 2,
		Args: []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(r, 0, stages.FP32, 256)}, {Tag: stages.TagOutputExisting, View: stages.NewView(2, 0, stages.BF16, 256)}}})
	return stages.EncodeRunImage(o.Image())
}

func request[T any](t *testing.T, sys *actor.ActorSystem, pid *actor.PID, msg any) T {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, msg, devTimeout).Result()
	if err != nil {
		t.Fatalf("%T: %v", msg, err)
	}
	r, ok := res.(T)
	if !ok {
		t.Fatalf("%T answered %T", msg, res)
	}
	return r
}

func TestDeviceActorServesInOrder(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(DeviceProps(npu.DefaultConfig()))

	request[*mailbox.DeviceRegistered](t, sys, pid, &mailbox.RegisterDevice{Entry: devEntry(), Kernels: devKernels()})
	// One-way copy, then a launch: the mailbox keeps them in order.
	sys.Root.Send(pid, &mailbox.CopyRun{Bytes: devRun(1)})
	l := request[*mailbox.Launched](t, sys, pid, &mailbox.Launch{Timeline: true})
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	if l.Result.Tasks != 3 || len(l.Result.Timeline) == 0 || l.Stats.H2DCopies != 1 {
		t.Fatalf("result %+v stats %+v", l.Result, l.Stats)
	}
	ref := l.Result.Digest

	// A refused upload is answered with its error ...
	def := &stages.Definition{FullKey: 1, Key: "empty"}
	img := stages.EncodeDefinition(def)
	bad := append([]byte(nil), img...)
	bad[len(bad)-1] ^= 1
	u := request[*mailbox.Uploaded](t, sys, pid, &mailbox.Upload{Bytes: bad})
	if u.Err == nil || !errors.Is(u.Err, stages.ErrBadImage) {
		t.Fatalf("bad upload answered %v", u.Err)
	}
	// ... and the next requests are served normally.
	u = request[*mailbox.Uploaded](t, sys, pid, &mailbox.Upload{Bytes: img})
	if u.Err != nil || u.Object == 0 || u.Hash != def.ContentHash {
		t.Fatalf("upload %+v", u)
	}
	u2 := request[*mailbox.Uploaded](t, sys, pid, &mailbox.Upload{Bytes: img})
	if u2.Object != u.Object {
		t.Fatalf("re-upload gave object %d, first %d", u2.Object, u.Object)
	}

	// A refused launch (cycle) then a good one.
	cyc, _ := stages.DecodeRunImage(devRun(1))
	cyc.Fanin[len(cyc.Fanin)-1] = 2 // task 2 waits on itself
	request[*mailbox.RunCopied](t, sys, pid, &mailbox.CopyRun{Bytes: stages.EncodeRunImage(cyc)})
	l = request[*mailbox.Launched](t, sys, pid, &mailbox.Launch{})
	if !errors.Is(l.Err, npu.ErrCycle) {
		t.Fatalf("cyclic launch answered %v", l.Err)
	}
	request[*mailbox.RunCopied](t, sys, pid, &mailbox.CopyRun{Bytes: devRun(1)})
	l = request[*mailbox.Launched](t, sys, pid, &mailbox.Launch{})
	if l.Err != nil || l.Result.Digest != ref {
		t.Fatalf("launch after a refusal: %v, digest %#x vs %#x", l.Err, l.Result.Digest, ref)
	}
	// A different scalar gives a different digest.
	request[*mailbox.RunCopied](t, sys, pid, &mailbox.CopyRun{Bytes: devRun(2)})
	if l = request[*mailbox.Launched](t, sys, pid, &mailbox.Launch{}); l.Err != nil || l.Result.Digest == ref {
		t.Fatalf("scalar change: %v", l.Err)
	}

	request[*mailbox.DeviceReset](t, sys, pid, &mailbox.ResetDevice{})
	if l = request[*mailbox.Launched](t, sys, pid, &mailbox.Launch{}); !errors.Is(l.Err, npu.ErrNoRunImage) {
		t.Fatalf("launch after reset answered %v", l.Err)
	}
	if st := request[npu.Stats](t, sys, pid, &mailbox.DeviceStats{}); st.DefinitionObjects != 0 || st.EntryRoots != 3 {
		t.Fatalf("stats after reset %+v", st)
	}
}

// The protocol as the runtime speaks it: the registration one-way (no
// answer to interleave with a pass's), the rest requests answered to their
// sender in order, a copy and a launch with their phase's timing.
func TestDeviceActorRuntimeProtocol(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(DeviceProps(npu.Config{}))
	sys.Root.Send(pid, &mailbox.RegisterDevice{Entry: devEntry(), Kernels: devKernels()})
	u := request[*mailbox.Uploaded](t, sys, pid, &mailbox.Upload{Bytes: stages.EncodeDefinition(&stages.Definition{Key: "k"})})
	if u.Err != nil || u.Object == 0 {
		t.Fatalf("upload reply %+v", u)
	}
	if c := request[*mailbox.RunCopied](t, sys, pid, &mailbox.CopyRun{Bytes: devRun(1)}); c.Err != nil || c.StartNs == 0 {
		t.Fatalf("copy reply %+v", c)
	}
	if l := request[*mailbox.Launched](t, sys, pid, &mailbox.Launch{}); l.Err != nil || l.Result.Tasks != 3 || l.Result.Timeline != nil || l.StartNs == 0 {
		t.Fatalf("launch reply %+v", l)
	}
}
