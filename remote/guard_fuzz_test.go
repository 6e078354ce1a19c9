package remote

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/hbg-dev/hbg/authn"
)

// fuzzTypes fill a generated batch's type table past its first name (the
// fuzzer's own): protoactor's system messages, hbg's, and some the guard
// refuses.
var fuzzTypes = []string{"hbg.wire.Ping", "actor.Watch", "actor.Terminated", "remote.ActorPidRequest",
	"actor.Unwatch", "actor.Stop", "hbg.wire.Place", "actor.PoisonPill", "hbg.wire.PassRequest", "remote.ActorPidResponse"}

// fuzzIDs are actor names a node or a driver has: the activator (spawns),
// the peer actor, a run host's prefix.
var fuzzIDs = []string{"activator", "hbg-peer", "activator/Remote$hbg-run-x", "", "$1"}

// FuzzGuardBatch drives live endpoints with generated calls and message
// batches: a node without TLS, a node with mutual TLS (both child
// processes, so that a panic ends the node and fails the test), and this
// process's driver remote (a driver is running on it; its guard's panics
// are counted here). Every index, table size, type name, serializer, PID
// of a Watch, Unwatch or Terminated, and the message bytes are the
// fuzzer's; so is, in one mode, the whole RemoteMessage. After the
// corpus, the plain node serves an honest pass to the driver, and the TLS
// node still answers a connect request.
//
// Before the guard (protoactor's endpoint reader alone), the first seed
// with a target or type index past its table, a sender past len+1, a type
// name not registered, a Terminated without Who, or either diagnostic
// call ended the process it was sent to (index out of range, nil
// dereference, or the unimplemented methods' own panic).
func FuzzGuardBatch(f *testing.F) {
	plain := startNode(f, "127.0.0.1:0")
	ca := newTestCA(f)
	secure := startNode(f, "127.0.0.1:0", ca.nodeEnv(f))
	sys, _ := sharedRemote(f)

	rt := startDriver(f, Config{Nodes: []string{plain.addr}, Ranks: 1})
	ctx := context.Background()
	if _, err := rt.Pass(ctx, rt.Orchestration(), 0, 0); err != nil {
		f.Fatalf("honest pass before the fuzz: %v", err)
	}
	drvAddr := sys.Address()

	type endpoint struct {
		addr string
		c    paremote.RemotingClient
	}
	dial := func(addr string, creds credentials.TransportCredentials) endpoint {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { _ = cc.Close() })
		return endpoint{addr, paremote.NewRemotingClient(cc)}
	}
	eps := []endpoint{
		dial(plain.addr, insecure.NewCredentials()),
		dial(secure.addr, credentials.NewTLS(ca.clientTLS(f, "fuzzer", "127.0.0.1"))),
		dial(drvAddr, insecure.NewCredentials()),
	}
	alive := func(t testing.TB) {
		t.Helper()
		for _, n := range []*testNode{plain, secure} {
			select {
			case <-n.done:
				t.Fatalf("node %s exited: %v", n.addr, n.err)
			default:
			}
		}
		if p := authn.GuardStats.Panics.Load(); p != 0 {
			t.Fatalf("the driver's guard recovered %d handler panics", p)
		}
	}
	f.Cleanup(func() {
		alive(f)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := rt.Pass(cctx, rt.Orchestration(), 0, 0); err != nil {
			f.Errorf("honest pass after the fuzz: %v", err)
		}
		if err := connects(cctx, eps[1].c); err != nil {
			f.Errorf("TLS node after the fuzz: %v", err)
		}
	})

	// Seeds: each a batch that ended a process before the guard, and the
	// boundaries of each index (testdata/fuzz/FuzzGuardBatch has more).
	f.Add(uint8(0), uint8(0), uint8(1), uint8(1), uint8(0), "hbg.wire.Ping", int32(0), int32(7), int32(0), int32(0), uint16(1), "", "x", []byte{})
	f.Add(uint8(0), uint8(0), uint8(1), uint8(1), uint8(2), "hbg.wire.Ping", int32(0), int32(0), int32(3), int32(0), uint16(1), "", "x", []byte{})
	f.Add(uint8(0), uint8(0), uint8(1), uint8(1), uint8(2), "hbg.wire.Ping", int32(0), int32(0), int32(2), int32(0), uint16(1), "", "x", []byte{})
	f.Add(uint8(2), uint8(0), uint8(0), uint8(1), uint8(0), "hbg.wire.Ping", int32(1), int32(0), int32(0), int32(0), uint16(1), "", "x", []byte{})
	f.Add(uint8(1), uint8(0), uint8(1), uint8(1), uint8(0), "hbg.nothing", int32(0), int32(0), int32(0), int32(0), uint16(1), "", "x", []byte{})
	f.Add(uint8(0), uint8(0x80), uint8(1), uint8(1), uint8(0), "actor.Terminated", int32(0), int32(0), int32(0), int32(0), uint16(1), "", "", []byte{})
	f.Add(uint8(2), uint8(0x80), uint8(1), uint8(1), uint8(1), "actor.Watch", int32(0), int32(0), int32(1), int32(0), uint16(1), "10.0.0.1:1", "w", []byte{})
	f.Add(uint8(0), uint8(1), uint8(0), uint8(0), uint8(0), "", int32(0), int32(0), int32(0), int32(0), uint16(0), "", "", []byte{})
	f.Add(uint8(2), uint8(2), uint8(0), uint8(0), uint8(0), "", int32(0), int32(0), int32(0), int32(0), uint16(0), "", "", []byte{})
	f.Add(uint8(1), uint8(0), uint8(1), uint8(1), uint8(0), "hbg.wire.Place", int32(0), int32(0), int32(0), int32(1), uint16(1), "", "activator", []byte{0xff, 0x01})
	f.Add(uint8(0), uint8(3), uint8(0), uint8(0), uint8(0), "", int32(0), int32(0), int32(0), int32(0), uint16(0), "", "", []byte{0x12, 0x04, 0x2a, 0x02, 0x08, 0x07})
	f.Add(uint8(0), uint8(0), uint8(3), uint8(2), uint8(2), "remote.ActorPidRequest", int32(0), int32(0), int32(0), int32(0), uint16(65535), "", "activator", []byte{})
	f.Add(uint8(0), uint8(0), uint8(1), uint8(1), uint8(0), "hbg.wire.Ping", int32(-1), int32(-1), int32(-1), int32(-1), uint16(1), "", "x", []byte{})

	f.Fuzz(func(t *testing.T, ep, mode, nTypes, nTargets, nSenders uint8, typeName string, typeID, target, sender, serializer int32,
		count uint16, pidAddr, pidID string, data []byte) {
		e := eps[int(ep)%len(eps)]
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		switch (mode & 0x7f) % 5 {
		case 1:
			_, _ = e.c.ListProcesses(cctx, &paremote.ListProcessesRequest{})
		case 2:
			_, _ = e.c.GetProcessDiagnostics(cctx, &paremote.GetProcessDiagnosticsRequest{})
		case 3:
			var m paremote.RemoteMessage
			if proto.Unmarshal(data, &m) == nil {
				send(cctx, e.c, &m)
			}
		default:
			b := fuzzBatch(e.addr, mode&0x80 != 0, nTypes, nTargets, nSenders, typeName, typeID, target, sender, serializer, count, pidAddr, pidID, data)
			msgs := []*paremote.RemoteMessage{{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: b}}}
			if (mode&0x7f)%5 == 4 {
				msgs = append([]*paremote.RemoteMessage{connectRequest()}, msgs...)
			}
			send(cctx, e.c, msgs...)
		}
		alive(t)
	})
}

// fuzzBatch is a batch of count envelopes (past 60000: one over the
// guard's bound) over tables the fuzzer sizes; the first envelope's
// indexes are the fuzzer's, the others walk the tables. With system,
// the message of a Watch, Unwatch or Terminated is one naming the
// fuzzer's PID, else the fuzzer's bytes.
func fuzzBatch(addr string, system bool, nTypes, nTargets, nSenders uint8, typeName string, typeID, target, sender, serializer int32,
	count uint16, pidAddr, pidID string, data []byte) *paremote.MessageBatch {
	b := &paremote.MessageBatch{}
	for i := range int(nTypes % 8) {
		name := typeName
		if i > 0 {
			name = fuzzTypes[(i+len(typeName))%len(fuzzTypes)]
		}
		b.TypeNames = append(b.TypeNames, name)
	}
	pid := func(i int) *actor.PID {
		a, id := addr, pidID
		if pidAddr != "" {
			a = pidAddr
		}
		if i > 0 {
			id = fuzzIDs[i%len(fuzzIDs)]
		}
		if id == "" && i%2 == 1 {
			return nil
		}
		return &actor.PID{Address: a, Id: id}
	}
	for i := range int(nTargets % 8) {
		b.Targets = append(b.Targets, pid(i))
	}
	for i := range int(nSenders % 8) {
		b.Senders = append(b.Senders, pid(i))
	}
	n := int(count % 16)
	if count > 60000 {
		n = authn.DefaultMaxEnvelopes + 1
	}
	for i := range n {
		env := &paremote.MessageEnvelope{TypeId: typeID, Target: target, Sender: sender, SerializerId: serializer, MessageData: data}
		if i > 0 {
			env.TypeId, env.Target, env.Sender = int32(i)%max(1, int32(len(b.TypeNames))), int32(i)%max(1, int32(len(b.Targets))), int32(i)%int32(len(b.Senders)+1)
		}
		if system && int(env.TypeId) >= 0 && int(env.TypeId) < len(b.TypeNames) {
			env.MessageData = systemMessage(b.TypeNames[env.TypeId], pid(0), data)
		}
		b.Envelopes = append(b.Envelopes, env)
	}
	return b
}

func systemMessage(name string, p *actor.PID, data []byte) []byte {
	var m proto.Message
	switch name {
	case "actor.Watch":
		m = &actor.Watch{Watcher: p}
	case "actor.Unwatch":
		m = &actor.Unwatch{Watcher: p}
	case "actor.Terminated":
		m = &actor.Terminated{Who: p, Why: actor.TerminatedReason(len(data))}
	default:
		return data
	}
	out, _ := proto.Marshal(m)
	return out
}

func connectRequest() *paremote.RemoteMessage {
	return &paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_ConnectRequest{ConnectRequest: &paremote.ConnectRequest{
		ConnectionType: &paremote.ConnectRequest_ServerConnection{ServerConnection: &paremote.ServerConnection{SystemId: "fuzzer", Address: "127.0.0.1:1"}}}}}
}

// send opens a message stream, sends msgs, closes its side and reads
// until the endpoint ends the stream (its refusal, or its end after ours).
func send(ctx context.Context, c paremote.RemotingClient, msgs ...*paremote.RemoteMessage) {
	s, err := c.Receive(ctx)
	if err != nil {
		return
	}
	for _, m := range msgs {
		if s.Send(m) != nil {
			break
		}
	}
	_ = s.CloseSend()
	for {
		if _, err := s.Recv(); err != nil {
			return
		}
	}
}

// connects says whether the endpoint answers a connect request.
func connects(ctx context.Context, c paremote.RemotingClient) error {
	s, err := c.Receive(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(connectRequest()); err != nil {
		return err
	}
	m, err := s.Recv()
	if err != nil {
		return err
	}
	_ = s.CloseSend()
	if m.GetConnectResponse() == nil {
		return errors.New("no connect response")
	}
	return nil
}
