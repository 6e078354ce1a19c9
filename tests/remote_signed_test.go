package tests

// Signed Definitions across processes (issue 36 item 3): `hbgrun node`
// processes with mutual TLS whose certificates carry the recorder role.

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/trace"
)

// recordedNodes is a run's record_node count, over every pass.
func recordedNodes(rep *trace.Report) int64 {
	var n int64
	for _, p := range rep.Passes {
		n += p.Ops[trace.OpRecordNode].Count
	}
	return n
}

// TestSignedDefinitionsNotRerecorded: two recorder nodes over mutual TLS
// run DSv4 full, 2 ranks (one a node). In the first run each node records
// the keys it owns and replays the other's, signature verified: the
// cluster records as many nodes as one in-process rank does (before
// signatures, each node also recorded every fetched key once to check
// it: twice as many). A second run, a fresh runtime on each node, is each
// node's first pass again: it records 0 Definitions and 0 nodes and
// replays all 8. Nodes given --rerecord-signed (the control) record every
// fetched key again: twice one rank's nodes in the first run, and again
// in the second (the check recordings count in record_node, not as
// Definitions built).
func TestSignedDefinitionsNotRerecorded(t *testing.T) {
	want := localDigest(t)
	localOut, lerr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "1", "--ranks", "1", "--json", "--store", "off")
	require.Equal(t, 0, code, lerr)
	var local trace.Report
	require.NoError(t, json.Unmarshal([]byte(localOut), &local))
	perRank := recordedNodes(&local)
	require.Positive(t, perRank)

	ca := newPKI(t, "hbg test CA")
	driver := ca.issue(t, "driver")
	run := func(a, b *nodeProc) *trace.Report {
		t.Helper()
		args := append([]string{"run", dsv4, "--form", "full", "--ranks", "2", "--rounds", "1", "--json", "-v", "--store", "off",
			"--nodes", a.addr + "," + b.addr}, driver...)
		out, stderr, code := runCLI(t, args...)
		require.Equal(t, 0, code, stderr)
		d := passDigests(stderr)
		require.Len(t, d, 2, stderr)
		assert.Equal(t, want, d[0][0])
		assert.Equal(t, want, d[1][0])
		var rep trace.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		assert.Zero(t, rep.Counts.FetchRejected, rep.Warnings)
		return &rep
	}

	a := startNodeProc(t, "127.0.0.1:0", ca.issueRecorder(t, "node-a")...)
	b := startNodeProc(t, "127.0.0.1:0", ca.issueRecorder(t, "node-b")...)
	first := run(a, b)
	assert.Equal(t, int64(8), first.Counts.RecordedDefinitions)
	assert.Equal(t, int64(8), first.Counts.FetchedDefinitions)
	assert.Equal(t, perRank, recordedNodes(first), "nodes recorded across the cluster: one rank's, no check recordings")
	assert.NotContains(t, a.log.String()+b.log.String(), "refused a signed image")

	second := run(a, b)
	for _, p := range second.Passes {
		assert.Zero(t, p.BuiltDefinitions, "rank %d", p.Rank)
		assert.Zero(t, p.Ops[trace.OpRecordNode].Count, "rank %d records nodes", p.Rank)
		assert.Equal(t, 8, p.FetchedDefinitions, "rank %d", p.Rank)
	}

	// The control: the same cluster checking every signed image by
	// recording it.
	pa := startNodeProc(t, "127.0.0.1:0", append(ca.issueRecorder(t, "node-pa"), "--rerecord-signed")...)
	pb := startNodeProc(t, "127.0.0.1:0", append(ca.issueRecorder(t, "node-pb"), "--rerecord-signed")...)
	cold := run(pa, pb)
	again := run(pa, pb)
	t.Logf("control: cold %d nodes, fetched %d; again %d nodes, fetched %d built %d", recordedNodes(cold), cold.Counts.FetchedDefinitions, recordedNodes(again), again.Counts.FetchedDefinitions, again.Counts.RecordedDefinitions)
	assert.Equal(t, 2*perRank, recordedNodes(cold), "paranoid nodes record each fetched key to check it")
	assert.Positive(t, recordedNodes(again), "paranoid nodes check again in a fresh runtime")
}

// TestRevokedNodeNotReplayed: node a, told by --revoked that node b's
// certificate is revoked, replays nothing b signed: rank 0, on a, records
// all 8 Definitions and fetches none (b still replays a's), and a's log
// says why; the run's digests match. With --refuse-unsigned a fails the
// pass instead of recording b's keys.
func TestRevokedNodeNotReplayed(t *testing.T) {
	want := localDigest(t)
	ca := newPKI(t, "hbg test CA")
	driver := ca.issue(t, "driver")
	aFlags := ca.issueRecorder(t, "node-a")
	bFlags := ca.issueRecorder(t, "node-b")
	revoked := filepath.Join(t.TempDir(), "revoked")
	require.NoError(t, os.WriteFile(revoked, []byte(fmt.Sprintf("# node-b, disk stolen\n%x\n", certSerial(t, bFlags[1]))), 0o600))
	run := func(a, b *nodeProc) (*trace.Report, string, int) {
		t.Helper()
		args := append([]string{"run", dsv4, "--form", "full", "--ranks", "2", "--rounds", "1", "--json", "-v", "--store", "off",
			"--nodes", a.addr + "," + b.addr}, driver...)
		out, stderr, code := runCLI(t, args...)
		var rep trace.Report
		if code == 0 {
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
		}
		return &rep, stderr, code
	}

	a := startNodeProc(t, "127.0.0.1:0", append(aFlags, "--revoked", revoked)...)
	b := startNodeProc(t, "127.0.0.1:0", bFlags...)
	rep, stderr, code := run(a, b)
	require.Equal(t, 0, code, stderr)
	d := passDigests(stderr)
	require.Len(t, d, 2, stderr)
	assert.Equal(t, want, d[0][0])
	assert.Equal(t, want, d[1][0])
	assert.Contains(t, a.log.String(), "refusing the Definition signatures of 1 revoked certificate: [")
	var onA *trace.Pass
	for i := range rep.Passes {
		if rep.Passes[i].Rank == 0 {
			onA = &rep.Passes[i]
		}
	}
	require.NotNil(t, onA)
	assert.Equal(t, 8, onA.BuiltDefinitions, "rank 0 (node a) records every Definition")
	assert.Zero(t, onA.FetchedDefinitions, "rank 0 (node a) replays nothing node b signed")
	fetchedByB := int(rep.Counts.FetchedDefinitions)
	if fetchedByB < 8 {
		// a asked b for the keys b owns, and refused each image.
		assert.Contains(t, a.log.String(), "the signer's certificate is revoked")
	}
	t.Logf("node b fetched %d of a's keys; a refused %d of b's", fetchedByB, 8-fetchedByB)

	ra := startNodeProc(t, "127.0.0.1:0", append(ca.issueRecorder(t, "node-ra"), "--revoked", revoked, "--refuse-unsigned")...)
	rb := startNodeProc(t, "127.0.0.1:0", bFlags...)
	_, stderr, code = run(ra, rb)
	if code == 0 {
		// ra owns every key (1 in 256 with two nodes): it asked b nothing.
		assert.NotContains(t, ra.log.String(), "refused a signed image")
		t.Log("node ra owned every key: --refuse-unsigned was not exercised")
		return
	}
	assert.Contains(t, stderr, "this node refuses to record it itself")
	assert.Contains(t, stderr, "revoked")
}

// certSerial is the serial of the certificate in the PEM file path.
func certSerial(t *testing.T, path string) *big.Int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	b, _ := pem.Decode(data)
	require.NotNil(t, b, "no PEM in %s", path)
	c, err := x509.ParseCertificate(b.Bytes)
	require.NoError(t, err)
	return c.SerialNumber
}
