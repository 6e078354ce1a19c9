package stages

import (
	"reflect"
	"testing"
)

// TestHostWaitOrders: a host read waits for the tensor's creator and the
// writers of its region, a write for their consumers too; every task
// after the wait waits on it, whatever its scope, and a wait with nothing
// to wait for is none.
func TestHostWaitOrders(t *testing.T) {
	o := NewOrdinaryPath([]Root{{Name: "x", DType: FP32, Shape: []int64{16}, Elems: 16}, {Name: "y", DType: FP32, Shape: []int64{16}, Elems: 16}})
	x, y := NewView(0, 0, FP32, 16), NewView(1, 0, FP32, 16)
	sub := func(args ...Arg) TaskID {
		return o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: -1, Args: args})
	}
	if w := o.HostWait(y, true); w != NoTask {
		t.Fatalf("a wait on an untouched entry tensor is task %d, want none", w)
	}
	w1 := sub(Arg{Tag: TagOutputExisting, View: x})
	r := sub(Arg{Tag: TagInput, View: x})
	read := o.HostWait(x, false)
	if got := o.Fanin(read); !reflect.DeepEqual(got, []TaskID{w1}) {
		t.Errorf("a read waits on %v, want the writer %d", got, w1)
	}
	write := o.HostWait(x, true)
	if got := o.Fanin(write); !reflect.DeepEqual(got, []TaskID{w1, r, read}) {
		t.Errorf("a write waits on %v, want the writer, its reader and the previous wait", got)
	}
	o.ScopeBegin(ScopeManual)
	w2 := sub(Arg{Tag: TagOutputExisting, View: x})
	o.ScopeEnd()
	if got := o.Fanin(w2); !reflect.DeepEqual(got, []TaskID{write}) {
		t.Errorf("a later task in a manual scope waits on %v, want the wait %d", got, write)
	}
	if !o.IsHostWait(read) || !o.IsHostWait(write) || o.IsHostWait(w2) {
		t.Errorf("IsHostWait: %v %v %v", o.IsHostWait(read), o.IsHostWait(write), o.IsHostWait(w2))
	}
	o.Reset()
	if len(o.HostWaits()) != 0 || sub(Arg{Tag: TagInput, View: x}) != 0 {
		t.Error("Reset kept the waits")
	}
}
