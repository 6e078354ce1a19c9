package tests

// Recorded once per cluster (issue 14 point 4), with tests/remote_test.go's
// harness: `hbgrun node` processes on 127.0.0.1 driven by `hbgrun run
// --nodes`.

import (
	"encoding/json"
	"testing"

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
		out, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--ranks", "4", "--rounds", "3", "--json", "-v", "--store", "off",
			"--nodes", a.addr+","+b.addr)
		require.Equal(t, 0, code, stderr)
		digests := passDigests(stderr)
		require.Len(t, digests, 4, stderr)
		for rank := range 4 {
			for round := range 3 {
				assert.Equal(t, want, digests[rank][round], "rank %d round %d", rank, round)
			}
		}
		var rep trace.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.Len(t, rep.Passes, 12)
		for _, p := range rep.Passes {
			if p.Round > 0 {
				assert.Zero(t, p.BuiltDefinitions+p.FetchedDefinitions+int(p.Ops[trace.OpPeerFetch].Count),
					"rank %d round %d: built %d, fetched %d, asked %d", p.Rank, p.Round, p.BuiltDefinitions, p.FetchedDefinitions, p.Ops[trace.OpPeerFetch].Count)
			}
		}
		assert.Zero(t, rep.Counts.FetchRejected, rep.Warnings)
		return &rep
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
