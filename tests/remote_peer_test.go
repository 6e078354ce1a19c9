package tests

// Recorded once per cluster (issue 14 point 4), with tests/remote_test.go's
// harness: `hbgrun node` processes on 127.0.0.1 driven by `hbgrun run
// --nodes`.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/trace"
)

// TestRemoteRecordedOnce: a driver and two nodes, DSv4 full, 4 ranks, 3
// rounds: every rank ends every round with the digest of an in-process run;
// the cluster records each of the 8 Definitions once (the node that records
// a key does not fetch it, the other fetches it: recorded_definitions 8 and
// fetched_definitions 8 across the two nodes), and the rounds after the
// first record and fetch nothing. A second run on the same nodes (a fresh
// runtime per run, no store on disk) records nothing: every Definition is
// fetched from the node that owns it.
func TestRemoteRecordedOnce(t *testing.T) {
	want := localDigest(t)
	a, b := startNodeProc(t, "127.0.0.1:0"), startNodeProc(t, "127.0.0.1:0")
	run := func() *trace.Report {
		t.Helper()
		rep := runOnNodes(t, want, a, b)
		for _, p := range rep.Passes {
			if p.Round > 0 {
				assert.Zero(t, p.BuiltDefinitions+p.FetchedDefinitions+int(p.Ops[trace.OpPeerFetch].Count),
					"rank %d round %d: built %d, fetched %d, asked %d", p.Rank, p.Round, p.BuiltDefinitions, p.FetchedDefinitions, p.Ops[trace.OpPeerFetch].Count)
			}
		}
		assert.Zero(t, rep.Counts.FetchRejected, rep.Warnings)
		return rep
	}

	rep := run()
	c := rep.Counts
	assert.Equal(t, int64(8), c.RecordedDefinitions, "recorded across the two nodes")
	assert.Equal(t, int64(8), c.FetchedDefinitions, "fetched across the two nodes")
	assert.Positive(t, c.FetchedBytes)
	// Ranks go round robin: even ranks on a, odd on b. Each node needs all 8
	// Definitions once (its ranks share its store): recorded or fetched.
	var perNode [2]int
	for _, p := range rep.Passes {
		perNode[p.Rank%2] += p.BuiltDefinitions + p.FetchedDefinitions
	}
	assert.Equal(t, [2]int{8, 8}, perNode, "Definitions recorded or fetched by node a, node b")

	again := run().Counts
	assert.Zero(t, again.RecordedDefinitions, "a second run records")
	assert.Equal(t, int64(16), again.FetchedDefinitions, "a second run fetches each Definition on each node")
}

// TestJaegerPeerSpans: a run on two nodes exporting to a real Jaeger is one
// trace in which every request to the cluster is a peer_fetch span under the
// asking pass's host_orch, and every request that crossed to the other node
// is answered by a peer_serve span from that node's process, a child of the
// asker's peer_fetch: the span context crosses with the request.
func TestJaegerPeerSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a real Jaeger; skipped in -short")
	}
	jaeger := jaegerStart(t, jaegerBinary(t))
	bin := jaegerHbgrunBinary(t)
	tag := fmt.Sprintf("peer-%d", time.Now().UnixNano())
	since := time.Now().Add(-time.Minute)
	a, b := startTracedNodes(t, bin, jaeger, tag)
	rep := jaegerHbgrunRun(t, bin, tag, "run", "config/models/dsv4_flash_decode.yaml", "--form", "full", "--rounds", "1", "--ranks", "2",
		"--json", "--store", "off", "--otlp", jaeger.OTLPHTTP(), "--nodes", a.addr+","+b.addr)
	require.Equal(t, int64(8), rep.Counts.RecordedDefinitions)
	require.Equal(t, int64(8), rep.Counts.FetchedDefinitions)

	// Each node asks for each of the 8 keys once; the asks that cross to
	// the other node (the keys it owns) are served there.
	var asks int64
	for _, p := range rep.Passes {
		asks += p.Ops[trace.OpPeerFetch].Count
	}
	require.Equal(t, int64(16), asks)
	complete := func(trs []jaegerTrace) bool {
		n := map[string]int{}
		for _, tr := range trs {
			for _, s := range tr.Spans {
				n[s.OperationName]++
			}
		}
		return len(trs) == 1 && n[trace.SpanPeerFetch] == 16 && n[trace.SpanPeerServe] == 8
	}
	trs := jaeger.waitTraces(t, tag, since, complete)
	require.Len(t, trs, 1, "one run is one trace")
	tr := &trs[0]
	byID := map[string]*jaegerSpan{}
	for i := range tr.Spans {
		byID[tr.Spans[i].SpanID] = &tr.Spans[i]
	}
	instance := func(s *jaegerSpan) string {
		for _, tg := range tr.Processes[s.ProcessID].Tags {
			if tg.Key == "service.instance.id" {
				return fmt.Sprint(tg.Value)
			}
		}
		return ""
	}
	serves, images := 0, 0
	for i := range tr.Spans {
		s := &tr.Spans[i]
		parent := byID[s.parentID()]
		switch s.OperationName {
		case trace.SpanPeerFetch:
			require.NotNil(t, parent, "peer_fetch has its parent in the trace")
			assert.Equal(t, trace.PhaseHostOrch.String(), parent.OperationName)
			if o, _ := s.tag(string(trace.KeyPeerOutcome)); o == "image" {
				images++
			}
		case trace.SpanPeerServe:
			serves++
			require.NotNil(t, parent, "peer_serve has its parent in the trace")
			assert.Equal(t, trace.SpanPeerFetch, parent.OperationName)
			assert.NotEqual(t, instance(parent), instance(s), "a peer_serve comes from the other node's process")
		}
	}
	// Every ask the other node answered crossed: between the 8 keys of one
	// node and the 8 of the other, each key's owner serves its non-owner once.
	assert.Equal(t, 8, serves, "asks served across the two nodes")
	assert.Equal(t, 8, images, "asks answered with an image")
}
