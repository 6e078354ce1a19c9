package authn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Guard stands between the network and protoactor remote's gRPC service,
// which trusts what it reads: it indexes a batch's target and sender
// tables with the sender's own numbers, looks up type names without
// checking they exist, and panics in the two diagnostic methods it
// registers but does not implement. gRPC does not recover a handler's
// panic, so any of those was one message that ended the process. The
// guard refuses every method but the message stream (Unimplemented),
// checks each inbound batch before protoactor reads it (InvalidArgument,
// the stream ended), and recovers a handler's panic (Internal, counted).
//
// It is a set of grpc.ServerOptions (ServerOptions), so it applies to any
// protoactor remote a process starts: a node's, a driver's, a cluster's.
type Guard struct {
	// Allow says which message type names a batch may carry (nil:
	// DefaultAllow). A name must also be a registered protobuf message.
	Allow func(typeName string) bool
	// MaxEnvelopes bounds a batch's envelopes, and so its tables (0:
	// DefaultMaxEnvelopes; protoactor's writer sends at most 1000).
	MaxEnvelopes int
	// FirstMessage bounds the wait for a stream's first message (its
	// ConnectRequest): a stream opened and left silent ends then. 0: none.
	FirstMessage time.Duration
	// MessageLimit names, in the refusal of a message over gRPC's size
	// limit, what sets that limit (a flag), so the sender is told.
	MessageLimit string
	// Stats counts what the guard did (nil: the package's GuardStats).
	Stats *Stats
	// OnEvent, if set, hears each refusal and each recovered panic.
	OnEvent func(Event)
}

// Stats are a guard's counters.
type Stats struct {
	// Panics is handler panics recovered; Refused calls and batches
	// refused.
	Panics, Refused atomic.Int64
}

// GuardStats are the counters of every Guard without its own Stats.
var GuardStats Stats

// Event is one thing a guard refused or recovered.
type Event struct {
	// Peer is the connection's remote address; Method the gRPC method.
	Peer, Method string
	// Panic says a handler panicked (Err carries its value).
	Panic bool
	Err   error
}

// DefaultMaxEnvelopes bounds a batch (Guard.MaxEnvelopes).
const DefaultMaxEnvelopes = 4096

// receiveMethod is the one method protoactor remote's peers use.
const receiveMethod = "/remote.Remoting/Receive"

// ErrBadBatch is a batch whose tables do not hold what it refers to.
var ErrBadBatch = errors.New("malformed message batch")

// DefaultAllow takes protoactor's own messages that cross between
// processes (spawning, watching, dead letters, a cluster's activations)
// and hbg's (package names
// hbg.*). An actor.Stop or actor.PoisonPill passes here and is dropped by
// the stamp (no remote may stop an actor).
func DefaultAllow(name string) bool {
	switch name {
	case "actor.Watch", "actor.Unwatch", "actor.Terminated", "actor.Stop", "actor.PoisonPill",
		"actor.DeadLetterResponse", "actor.Touch", "actor.Touched",
		"remote.ActorPidRequest", "remote.ActorPidResponse", "remote.Ping", "remote.Pong",
		// A cluster's owner lookup (package peer): which member activates
		// a key's owner.
		"cluster.ActivationRequest", "cluster.ActivationResponse":
		return true
	}
	return strings.HasPrefix(name, "hbg.")
}

func (g Guard) stats() *Stats {
	if g.Stats != nil {
		return g.Stats
	}
	return &GuardStats
}

func (g Guard) event(ctx context.Context, method string, isPanic bool, err error) {
	if isPanic {
		g.stats().Panics.Add(1)
	} else {
		g.stats().Refused.Add(1)
	}
	if g.OnEvent != nil {
		g.OnEvent(Event{Peer: connOf(ctx).Addr, Method: method, Panic: isPanic, Err: err})
	}
}

// ServerOptions are the guard as gRPC options: its interceptors (first in
// the chain, before any other) and keepalive's enforcement.
func (g Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
	}
}

// Idle are the keepalive options that free a connection's slot: one with
// no stream for idle is closed (a stranger's handshaken, silent
// connection), and a peer that stops answering pings is found within
// ping plus its timeout.
func Idle(idle, ping time.Duration) grpc.ServerOption {
	return grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idle, Time: ping, Timeout: ping / 2})
}

// unary refuses every unary method: protoactor's remote registers
// ListProcesses and GetProcessDiagnostics, which panic.
func (g Guard) unary(ctx context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	err := status.Errorf(codes.Unimplemented, "%s: not served here", info.FullMethod)
	g.event(ctx, info.FullMethod, false, err)
	return nil, err
}

func (g Guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	if info.FullMethod != receiveMethod {
		err := status.Errorf(codes.Unimplemented, "%s: not served here", info.FullMethod)
		g.event(ctx, info.FullMethod, false, err)
		return err
	}
	gs := &guarded{ServerStream: ss, g: g, first: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				err := status.Errorf(codes.Internal, "hbg: a message this process could not handle (recovered: %v)", p)
				g.event(ctx, info.FullMethod, true, fmt.Errorf("%v\n%s", p, debug.Stack()))
				done <- err
			}
		}()
		done <- handler(srv, gs)
	}()
	var first <-chan time.Time
	if g.FirstMessage > 0 {
		t := time.NewTimer(g.FirstMessage)
		defer t.Stop()
		first = t.C
	}
	select {
	case err := <-done:
		return err
	case <-gs.first:
	case <-first:
		err := status.Errorf(codes.DeadlineExceeded, "no first message within %v", g.FirstMessage)
		g.event(ctx, info.FullMethod, false, err)
		// The handler is still reading; the stream's end (our return)
		// ends its read, and it returns to nobody.
		return err
	}
	return <-done
}

// guarded checks each message as protoactor reads it.
type guarded struct {
	grpc.ServerStream
	g         Guard
	firstOnce sync.Once
	first     chan struct{}
}

func (s *guarded) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err != nil {
		if status.Code(err) == codes.ResourceExhausted && s.g.MessageLimit != "" {
			// Said to the sender in the stream's status: its message
			// was over this process's limit, and which flag sets it.
			err = status.Errorf(codes.ResourceExhausted, "%v: over this process's message limit (%s)", status.Convert(err).Message(), s.g.MessageLimit)
			s.g.event(s.Context(), receiveMethod, false, err)
		}
		return err
	}
	s.firstOnce.Do(func() { close(s.first) })
	rm, ok := m.(*paremote.RemoteMessage)
	if !ok {
		return nil
	}
	if b := rm.GetMessageBatch(); b != nil {
		if err := s.g.checkBatch(b); err != nil {
			st := status.Errorf(codes.InvalidArgument, "hbg: %v", err)
			s.g.event(s.Context(), receiveMethod, false, err)
			return st
		}
	}
	return nil
}

// checkBatch refuses a batch protoactor's reader would index out of its
// tables, look a type up in that does not exist, or deserialize with a
// serializer hbg does not use.
func (g Guard) checkBatch(b *paremote.MessageBatch) error {
	max := g.MaxEnvelopes
	if max <= 0 {
		max = DefaultMaxEnvelopes
	}
	allow := g.Allow
	if allow == nil {
		allow = DefaultAllow
	}
	if n := len(b.Envelopes); n > max {
		return fmt.Errorf("%w: %d envelopes, over %d", ErrBadBatch, n, max)
	}
	if len(b.TypeNames) > max || len(b.Targets) > max || len(b.Senders) > max {
		return fmt.Errorf("%w: tables of %d types, %d targets, %d senders, over %d", ErrBadBatch, len(b.TypeNames), len(b.Targets), len(b.Senders), max)
	}
	for i, name := range b.TypeNames {
		if !allow(name) {
			return fmt.Errorf("%w: type %d %q is not one this process takes", ErrBadBatch, i, name)
		}
		if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name)); err != nil {
			return fmt.Errorf("%w: type %d %q: %v", ErrBadBatch, i, name, err)
		}
	}
	for i, p := range b.Targets {
		if p == nil || p.Id == "" {
			return fmt.Errorf("%w: target %d names no actor", ErrBadBatch, i)
		}
	}
	for i, p := range b.Senders {
		if p == nil {
			return fmt.Errorf("%w: sender %d is empty", ErrBadBatch, i+1)
		}
	}
	for i, e := range b.Envelopes {
		switch {
		case e == nil:
			return fmt.Errorf("%w: envelope %d is empty", ErrBadBatch, i)
		case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
			return fmt.Errorf("%w: envelope %d: type %d of %d", ErrBadBatch, i, e.TypeId, len(b.TypeNames))
		case e.Target < 0 || int(e.Target) >= len(b.Targets):
			return fmt.Errorf("%w: envelope %d: target %d of %d", ErrBadBatch, i, e.Target, len(b.Targets))
		case e.Sender < 0 || int(e.Sender) > len(b.Senders):
			return fmt.Errorf("%w: envelope %d: sender %d of %d", ErrBadBatch, i, e.Sender, len(b.Senders))
		case e.SerializerId != 0:
			return fmt.Errorf("%w: envelope %d: serializer %d (only protobuf, 0, is taken)", ErrBadBatch, i, e.SerializerId)
		}
		if err := checkSystem(b.TypeNames[e.TypeId], e.MessageData); err != nil {
			return fmt.Errorf("%w: envelope %d: %v", ErrBadBatch, i, err)
		}
	}
	return nil
}

// checkSystem refuses the system messages protoactor hands to an actor
// as they are: a watch without a watcher (the actor would later send its
// Terminated to nil), a Terminated without who.
func checkSystem(name string, data []byte) error {
	pid := func(p *actor.PID, what string) error {
		if p == nil || p.Id == "" {
			return fmt.Errorf("%s with no %s", name, what)
		}
		if _, _, err := net.SplitHostPort(p.Address); err != nil {
			return fmt.Errorf("%s: %s address %q: %v", name, what, p.Address, err)
		}
		return nil
	}
	var err error
	switch name {
	case "actor.Watch":
		var w actor.Watch
		if err = proto.Unmarshal(data, &w); err == nil {
			err = pid(w.Watcher, "watcher")
		}
	case "actor.Unwatch":
		var w actor.Unwatch
		if err = proto.Unmarshal(data, &w); err == nil {
			err = pid(w.Watcher, "watcher")
		}
	case "actor.Terminated":
		var t actor.Terminated
		if err = proto.Unmarshal(data, &t); err == nil {
			err = pid(t.Who, "who")
		}
	}
	return err
}
