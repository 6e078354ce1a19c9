package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// BenchmarkRemotePass is one warm DSv4 full pass of one rank in this
// process against the same pass on an `hbgrun node` process over loopback
// (protoactor remote, gRPC): the difference is what the wire adds to a
// pass. Each iteration runs one pass of each, alternating, one after
// another (latency, not throughput), so both see the same load; ns/op is
// their sum. With device=skip a pass is the control plane alone; with
// device=sim it includes the simulated device (on the node, for remote).
//
// Metrics: in_process_us and remote_us are the medians of each kind's
// passes as the caller sees them, added_us the median of the per-iteration
// differences; hbg_msgs/pass and hbg_bytes/pass are the wire package's
// messages (a PassRequest out, a PassResult back) and their encoded sizes;
// grpc_msgs/pass and grpc_wire_bytes/pass what gRPC put on the wire both
// ways (protoactor's batches and envelopes included), counted by stats
// handlers on the driver. The node timeout is an hour, so no ping falls in
// the measurement.
func BenchmarkRemotePass(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "hbgrun")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/hbgrun").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	// Without TLS: the wire's own bytes, comparable with earlier figures.
	node := startNodeBin(b, bin, append(os.Environ(), "HBG_STORE=off"), "127.0.0.1:0", "--insecure-loopback")
	model, err := os.ReadFile(dsv4)
	if err != nil {
		b.Fatal(err)
	}
	orch := orchestration(loadDSv4(b), "full")
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
		b.Run(dev.name, func(b *testing.B) {
			cfg := actors.Config{SkipDevice: dev.skip}
			local := startRuntime(b, cfg)
			far, err := remote.Start(sys, remote.Config{Nodes: []string{node.addr}, Ranks: 1, ModelName: dsv4, Model: model, Form: "full",
				Runtime: cfg, NodeTimeout: time.Hour, Remote: rem})
			if err != nil {
				b.Fatal(err)
			}
			defer far.Stop(context.Background())
			ctx := context.Background()
			timed := func(pass func(context.Context, *actors.Orchestration, int, int) (*actors.PassResult, error), o *actors.Orchestration, round int) time.Duration {
				t0 := time.Now()
				if _, err := pass(ctx, o, 0, round); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			// The cold passes, untimed and uncounted.
			timed(local.Pass, orch, 0)
			timed(far.Pass, far.Orchestration(), 0)
			hbgMsgs := far.Wire.Sent.Load() + far.Wire.Received.Load()
			hbgBytes := far.Wire.SentBytes.Load() + far.Wire.ReceivedBytes.Load()
			grpcMsgs := sent.msgs.Load() + received.msgs.Load()
			grpcBytes := sent.bytes.Load() + received.bytes.Load()
			var in, out, added []float64
			round := 1
			for b.Loop() {
				l := timed(local.Pass, orch, round)
				r := timed(far.Pass, far.Orchestration(), round)
				in, out, added = append(in, us(l)), append(out, us(r)), append(added, us(r-l))
				round++
			}
			n := float64(len(in))
			b.ReportMetric(median(in), "in_process_us")
			b.ReportMetric(median(out), "remote_us")
			b.ReportMetric(median(added), "added_us")
			b.ReportMetric(float64(far.Wire.Sent.Load()+far.Wire.Received.Load()-hbgMsgs)/n, "hbg_msgs/pass")
			b.ReportMetric(float64(far.Wire.SentBytes.Load()+far.Wire.ReceivedBytes.Load()-hbgBytes)/n, "hbg_bytes/pass")
			b.ReportMetric(float64(sent.msgs.Load()+received.msgs.Load()-grpcMsgs)/n, "grpc_msgs/pass")
			b.ReportMetric(float64(sent.bytes.Load()+received.bytes.Load()-grpcBytes)/n, "grpc_wire_bytes/pass")
		})
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
