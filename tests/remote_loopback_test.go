package tests

// TLS by default on loopback (issue 34, item 5): with no --cert-file, a
// node and a driver on loopback speak mutual TLS with the user's local
// PKI (authn/pki.Local), so a process without its certificate, another
// user's, and a reader of loopback traffic get nothing: no token to
// replay, no run host to spawn.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/authn/pki"
	"github.com/hbg-dev/hbg/trace"
)

// TestRemoteLoopbackTLS: a process without the local PKI's certificate
// (plain gRPC, or TLS with another CA's) spawns and places nothing on a
// default loopback node. Two nodes started at once on a fresh local PKI
// directory make one CA between them (the peers fetch from each other
// over TLS, and the driver's handshakes verify both); the default
// loopback run after the attacks matches the in-process digest and
// eager's. A driver with --insecure-loopback or another PKI is refused
// naming TLS. Before, a loopback node served
// plain gRPC to any local process: its spawns and placements were taken.
func TestRemoteLoopbackTLS(t *testing.T) {
	want := localDigest(t)
	dir := filepath.Join(t.TempDir(), "pki")
	env := append(os.Environ(), "HBG_STORE=off", pki.DirEnv+"="+dir)
	a, b := make(chan *nodeProc, 1), make(chan *nodeProc, 1)
	go func() { a <- startNodeBin(t, hbgrun(t), env, "127.0.0.1:0") }()
	b <- startNodeBin(t, hbgrun(t), env, "127.0.0.1:0")
	nodes := []*nodeProc{<-a, <-b}
	for _, n := range nodes {
		assert.Contains(t, n.log.String(), "mutual TLS with the local PKI in "+dir)
		assert.NotContains(t, n.log.String(), "no TLS")
	}

	addrs := []string{nodes[0].addr, nodes[1].addr}
	other := newPKI(t, "another CA")
	for name, s := range map[string]attackSpec{
		"plain spawn":         {Op: "spawn", Nodes: addrs, Ranks: 3},
		"plain place":         {Op: "all", Nodes: addrs},
		"another CA's spawn":  {Op: "spawn", Nodes: addrs, Ranks: 3, TLS: other.issue(t, "mallory"), Serve: other.issue(t, "mallory-serve")},
		"another CA's place":  {Op: "place", Nodes: addrs, TLS: other.issue(t, "mallory2"), Serve: other.issue(t, "mallory2-serve")},
		"this CA, other keys": {Op: "place", Nodes: addrs, TLS: append(other.issue(t, "mallory3")[:4], "--trusted-ca-file", filepath.Join(dir, "ca.crt")), Serve: other.issue(t, "mallory3-serve")},
	} {
		t.Run(name, func(t *testing.T) {
			res := attack(t, s)
			assert.Zero(t, res.Placed, "%+v", res)
			assert.Empty(t, res.Answered, "%+v", res)
		})
	}
	out, stderr, code := runDSv4(t, nodes, "--pki-dir", dir)
	require.Equal(t, 0, code, stderr)
	digests := passDigests(stderr)
	require.Len(t, digests, 4, stderr)
	for rank := range 4 {
		assert.Equal(t, want, digests[rank][1], "rank %d", rank)
	}
	var rep trace.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotNil(t, rep.Golden)
	assert.True(t, rep.Golden.Match, "golden: %+v", rep.Golden)
	assert.Equal(t, int64(8), rep.Counts.FetchedDefinitions, "the peers fetch over the local PKI's TLS")

	for _, c := range []struct {
		name  string
		flags []string
		says  string
	}{
		{"driver without TLS", []string{"--insecure-loopback"}, "this driver has no certificate"},
		{"driver with another local PKI", []string{"--pki-dir", filepath.Join(t.TempDir(), "pki")}, "certificate signed by unknown authority"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runDSv4(t, nodes, c.flags...)
			assert.Equal(t, 1, code, stderr)
			assert.Contains(t, stderr, "TLS")
			assert.Contains(t, stderr, c.says)
			assert.Empty(t, passDigests(stderr), "no pass ran")
		})
	}
}

// TestPKIDirUnsafe: a local PKI directory group or others may read, or a
// symbolic link, is refused by a node and by a driver: exit 2, the path
// and its mode named, nothing written there. Before, there was no local
// PKI: the node served without TLS.
func TestPKIDirUnsafe(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o755))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(open, link))
	for _, c := range []struct {
		name string
		args []string
		dir  string
		says string
	}{
		{"node", []string{"node", "--listen", "127.0.0.1:0"}, open, "has mode 0755"},
		{"driver", []string{"run", "--nodes", "127.0.0.1:1", "--rounds", "1", "--store", "off"}, open, "has mode 0755"},
		{"node, a symbolic link", []string{"node", "--listen", "127.0.0.1:0"}, link, "symbolic link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, hbgrun(t), c.args...)
			cmd.Env = append(os.Environ(), pki.DirEnv+"="+c.dir)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			require.Error(t, err, "served: %s", stderr.String())
			assert.Equal(t, 2, cmd.ProcessState.ExitCode(), stderr.String())
			assert.Contains(t, stderr.String(), "local PKI is not private to this user")
			assert.Contains(t, stderr.String(), c.dir)
			assert.Contains(t, stderr.String(), c.says)
			ents, _ := os.ReadDir(open)
			assert.Empty(t, ents, "written into the refused directory")
		})
	}
}

// TestPKIFlagMistakes: a loopback host the local PKI's certificate does
// not name (127.0.0.2: every peer verifying it would refuse it), and TLS
// files given with --insecure-loopback, are refused at start, exit 2,
// saying why. Before, the first served without TLS, and the flag did not
// exist.
func TestPKIFlagMistakes(t *testing.T) {
	certs := newPKI(t, "hbg test CA").issue(t, "node")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"node", "--listen", "127.0.0.2:0"}, "the local PKI's certificate names 127.0.0.1, ::1 and localhost only"},
		{[]string{"run", "--nodes", "127.0.0.2:7001", "--store", "off"}, "the local PKI's certificate names 127.0.0.1, ::1 and localhost only"},
		{append([]string{"node", "--listen", "127.0.0.1:0", "--insecure-loopback"}, certs...), "--cert-file with --insecure-loopback or --pki-dir: want one"},
	} {
		stderr, code := runBounded(t, 30*time.Second, c.args...)
		assert.Equal(t, 2, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.says, "%v", c.args)
	}
}
