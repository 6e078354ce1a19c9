package remote

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestGuardLiveNode drives a live node's endpoint with the calls and
// batches that ended a process before the guard (ListProcesses,
// GetProcessDiagnostics, a target index out of its table, an unknown
// type name): each is refused, the node still serves, and an honest run
// places on it afterwards. On the code before, the first call panics the
// test binary.
func TestGuardLiveNode(t *testing.T) {
	// The node is a child process (see TestMain): its exit fails the test
	// when a handler panic reached the guard's recovery.
	n := startNode(t, "127.0.0.1:0")
	// This process's remote starts before the test's own gRPC client:
	// protoactor's Remote.Start sets gRPC's process-wide logger, which a
	// live client reads.
	sharedRemote(t)
	cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := paremote.NewRemotingClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.ListProcesses(ctx, &paremote.ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ListProcesses: %v, want Unimplemented", err)
	}
	if _, err := c.GetProcessDiagnostics(ctx, &paremote.GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetProcessDiagnostics: %v, want Unimplemented", err)
	}
	for name, b := range map[string]*paremote.MessageBatch{
		"target out of range": {TypeNames: []string{"hbg.wire.Ping"}, Targets: []*actor.PID{{Address: n.addr, Id: "x"}}, Envelopes: []*paremote.MessageEnvelope{{Target: 7}}},
		"sender out of range": {TypeNames: []string{"hbg.wire.Ping"}, Targets: []*actor.PID{{Address: n.addr, Id: "x"}}, Envelopes: []*paremote.MessageEnvelope{{Sender: 3}}},
		"type out of range":   {Targets: []*actor.PID{{Address: n.addr, Id: "x"}}, Envelopes: []*paremote.MessageEnvelope{{TypeId: 1}}},
		"unknown type":        {TypeNames: []string{"hbg.nothing"}, Targets: []*actor.PID{{Address: n.addr, Id: "x"}}, Envelopes: []*paremote.MessageEnvelope{{}}},
		"watch without who":   {TypeNames: []string{"actor.Watch"}, Targets: []*actor.PID{{Address: n.addr, Id: "x"}}, Envelopes: []*paremote.MessageEnvelope{{}}},
	} {
		s, err := c.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: %v, want InvalidArgument", name, err)
		}
	}
	rt := startDriver(t, Config{Nodes: []string{n.addr}, Ranks: 1})
	if _, err := rt.Pass(ctx, rt.Orchestration(), 0, 0); err != nil {
		t.Fatalf("honest pass after the attack: %v", err)
	}
}
