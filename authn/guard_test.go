package authn

import (
	"errors"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"
)

// TestGuardSenderBound: protoactor's endpoint reader takes a sender index
// of 0 as no sender and n as Senders[n-1] (deserializeSender), so the
// indexes it reads safely are 0 to len(Senders), and a target index
// Targets[n] (deserializeTarget) 0 to len-1. The guard takes exactly
// those: len+1 (and -1) would index out of range in protoactor, and
// refusing len would drop an honest sender.
func TestGuardSenderBound(t *testing.T) {
	pid := &actor.PID{Address: "127.0.0.1:1", Id: "x"}
	batch := func(sender, target int32) *paremote.MessageBatch {
		return &paremote.MessageBatch{TypeNames: []string{"actor.Touch"}, Targets: []*actor.PID{pid, pid},
			Senders: []*actor.PID{pid, pid}, Envelopes: []*paremote.MessageEnvelope{{Sender: sender, Target: target}}}
	}
	for _, c := range []struct {
		sender, target int32
		ok             bool
	}{{0, 0, true}, {1, 0, true}, {2, 1, true}, {3, 0, false}, {-1, 0, false}, {0, 2, false}, {0, -1, false}} {
		err := Guard{}.checkBatch(batch(c.sender, c.target))
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadBatch)) {
			t.Errorf("sender %d, target %d of 2: %v, want ok %v", c.sender, c.target, err, c.ok)
		}
	}
}

// TestStampWatcher: a Watch, an Unwatch or a Terminated is dropped unless
// the connection speaks for the PID it names (the watcher, who died):
// over a stranger's connection, a Watch naming another address made this
// process dial there when the watched actor stopped, and a Terminated
// naming a node or a driver told its watchers it was gone. Before, only
// Terminated was checked.
func TestStampWatcher(t *testing.T) {
	enc := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	far, near := &actor.PID{Address: "10.9.9.9:1", Id: "w"}, &actor.PID{Address: "127.0.0.1:7", Id: "w"}
	for _, c := range []struct {
		name string
		m    proto.Message
		drop bool
	}{
		{"actor.Watch", &actor.Watch{Watcher: far}, true},
		{"actor.Watch", &actor.Watch{Watcher: near}, false},
		{"actor.Unwatch", &actor.Unwatch{Watcher: far}, true},
		{"actor.Unwatch", &actor.Unwatch{Watcher: near}, false},
		{"actor.Terminated", &actor.Terminated{Who: far}, true},
		{"actor.Terminated", &actor.Terminated{Who: near}, false},
	} {
		s := &stamped{addr: "127.0.0.1:5555"}
		b := &paremote.MessageBatch{TypeNames: []string{c.name}, Envelopes: []*paremote.MessageEnvelope{{MessageData: enc(c.m)}}}
		if got := s.refused(b, b.Envelopes[0]); got != c.drop {
			t.Errorf("%s %v over a connection from 127.0.0.1: dropped %v, want %v", c.name, c.m, got, c.drop)
		}
	}
	// With TLS, the certificate's names speak, not the address.
	s := &stamped{addr: "127.0.0.1:5555", names: "node-b.example"}
	b := &paremote.MessageBatch{TypeNames: []string{"actor.Terminated"}, Envelopes: []*paremote.MessageEnvelope{{MessageData: enc(&actor.Terminated{Who: near})}}}
	if !s.refused(b, b.Envelopes[0]) {
		t.Error("a Terminated for 127.0.0.1 over a connection whose certificate names node-b.example was taken")
	}
}

// TestCNOnlyVouchesNothing: a verified certificate without subject
// alternative names (a CN alone, which Go's TLS and hbg ignore) vouches
// for no host. Before, its connection had no names, was taken for one
// without TLS, and vouched for its IP address: a CN-only certificate from
// a driver's or a node's machine spoke for them.
func TestCNOnlyVouchesNothing(t *testing.T) {
	c := Conn{Addr: "127.0.0.1:5555", TLS: true}
	if c.Vouches("127.0.0.1") {
		t.Error("a CN-only certificate's connection vouches for its IP address")
	}
	if !(Conn{Addr: "127.0.0.1:5555"}).Vouches("127.0.0.1") {
		t.Error("without TLS, a loopback connection no longer vouches for loopback")
	}
	s := &stamped{addr: "127.0.0.1:5555", tls: true}
	b := &paremote.MessageBatch{TypeNames: []string{"actor.Terminated"}, Envelopes: []*paremote.MessageEnvelope{{}}}
	b.Envelopes[0].MessageData, _ = proto.Marshal(&actor.Terminated{Who: &actor.PID{Address: "127.0.0.1:7", Id: "d"}})
	if !s.refused(b, b.Envelopes[0]) {
		t.Error("a Terminated over a CN-only certificate's connection was taken")
	}
}
