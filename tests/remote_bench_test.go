package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/remote"
)

// wireCount counts the gRPC messages and their bytes on the wire
// (stats.OutPayload/InPayload WireLength: protoactor's batches, envelopes
// and all) of one side of a connection.
type wireCount struct {
	out         bool
	msgs, bytes atomic.Int64
}

func (w *wireCount) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (w *wireCount) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (w *wireCount) HandleConn(context.Context, stats.ConnStats) {}
func (w *wireCount) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch p := s.(type) {
	case *stats.OutPayload:
		if w.out {
			w.msgs.Add(1)
			w.bytes.Add(int64(p.WireLength))
		}
	case *stats.InPayload:
		if !w.out {
			w.msgs.Add(1)
			w.bytes.Add(int64(p.WireLength))
		}
	}
}

// BenchmarkRemotePass is one warm DSv4 full pass of one rank, in this
// process and on an `hbgrun node` process over loopback (protoactor
// remote, gRPC): the difference is what the wire adds to a pass. Passes
// run one after another (each waits for the previous: latency, not
// throughput). With device=skip the pass is the control plane alone; with
// device=sim it includes the simulated device. Metrics: ns/op is the
// pass as its caller sees it; hbg_msgs/op and hbg_bytes/op the wire
// package's messages (a PassRequest out, a PassResult back) and their
// encoded sizes; grpc_msgs/op and grpc_wire_bytes/op what gRPC put on the
// wire both ways, counted by stats handlers on the driver. The node
// timeout is an hour, so no ping falls in the measurement.
func BenchmarkRemotePass(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "hbgrun")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/hbgrun").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	node := startNodeBin(b, bin, append(os.Environ(), "HBG_STORE=off"), "127.0.0.1:0")
	model, err := os.ReadFile(dsv4)
	if err != nil {
		b.Fatal(err)
	}
	m := loadDSv4(b)
	orch := orchestration(m, "full")
	sent, received := &wireCount{out: true}, &wireCount{}
	sys := actors.NewActorSystem(nil)
	defer sys.Shutdown()
	rem, err := remote.StartRemote(sys, "127.0.0.1:0",
		paremote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStatsHandler(sent)),
		paremote.WithServerOptions(grpc.StatsHandler(received)))
	if err != nil {
		b.Fatal(err)
	}
	for _, dev := range []struct {
		name string
		skip bool
	}{{"device=skip", true}, {"device=sim", false}} {
		cfg := actors.Config{SkipDevice: dev.skip}
		b.Run("in-process/"+dev.name, func(b *testing.B) {
			rt := startRuntime(b, cfg)
			warmLoop(b, rt.Pass, orch, func() {})
		})
		b.Run("remote/"+dev.name, func(b *testing.B) {
			rt, err := remote.Start(sys, remote.Config{Nodes: []string{node.addr}, Ranks: 1, ModelName: dsv4, Model: model, Form: "full",
				Runtime: cfg, NodeTimeout: time.Hour, Remote: rem})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Stop(context.Background())
			var hbgSent, hbgRecv, hbgMsgs, grpcMsgs, grpcBytes int64
			n := warmLoop(b, rt.Pass, rt.Orchestration(), func() {
				// After the cold pass: the figures are the warm passes'.
				hbgSent, hbgRecv = rt.Wire.SentBytes.Load(), rt.Wire.ReceivedBytes.Load()
				hbgMsgs = rt.Wire.Sent.Load() + rt.Wire.Received.Load()
				grpcMsgs = sent.msgs.Load() + received.msgs.Load()
				grpcBytes = sent.bytes.Load() + received.bytes.Load()
			})
			b.ReportMetric(float64(rt.Wire.Sent.Load()+rt.Wire.Received.Load()-hbgMsgs)/float64(n), "hbg_msgs/op")
			b.ReportMetric(float64(rt.Wire.SentBytes.Load()+rt.Wire.ReceivedBytes.Load()-hbgSent-hbgRecv)/float64(n), "hbg_bytes/op")
			b.ReportMetric(float64(sent.msgs.Load()+received.msgs.Load()-grpcMsgs)/float64(n), "grpc_msgs/op")
			b.ReportMetric(float64(sent.bytes.Load()+received.bytes.Load()-grpcBytes)/float64(n), "grpc_wire_bytes/op")
		})
	}
}

// warmLoop runs the cold pass, calls warm, then runs b.N warm passes one
// after another, and returns how many it timed.
func warmLoop(b *testing.B, pass func(context.Context, *actors.Orchestration, int, int) (*actors.PassResult, error), orch *actors.Orchestration, warm func()) int {
	ctx := context.Background()
	if _, err := pass(ctx, orch, 0, 0); err != nil {
		b.Fatal(err)
	}
	warm()
	round := 1
	for b.Loop() {
		if _, err := pass(ctx, orch, 0, round); err != nil {
			b.Fatal(err)
		}
		round++
	}
	return round - 1
}
