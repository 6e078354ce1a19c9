package tests

// The limits a node enforces (issue 27 point 3): each a flag, each refusal
// named and at once, with `hbgrun node` processes on 127.0.0.1.

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigModel is DSv4 with a comment that makes it n bytes or more: a valid
// model of that size.
func bigModel(t *testing.T, n int) string {
	t.Helper()
	data, err := os.ReadFile(dsv4)
	require.NoError(t, err)
	var b bytes.Buffer
	b.Write(data)
	line := "# " + strings.Repeat("x", 1000) + "\n"
	for b.Len() < n {
		b.WriteString(line)
	}
	p := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

// runBounded is runCLI, failing the test if the run outlasts within (the
// driver's placement wait was 2 minutes).
func runBounded(t *testing.T, within time.Duration, args ...string) (string, int) {
	t.Helper()
	type done struct {
		stderr string
		code   int
	}
	ch := make(chan done, 1)
	go func() {
		_, stderr, code := runCLI(t, args...)
		ch <- done{stderr, code}
	}()
	select {
	case d := <-ch:
		return d.stderr, d.code
	case <-time.After(within):
		t.Fatalf("hbgrun %s: still running after %v", strings.Join(args, " "), within)
		return "", 0
	}
}

// TestNodeLimits: a placement over each of a node's limits is refused at
// once, naming the limit, its flag and the value; a model over gRPC's
// default message size (4 MiB) runs; one over the node's message limit
// fails the run with the node lost, not after the placement's 2-minute
// wait.
func TestNodeLimits(t *testing.T) {
	const bound = 40 * time.Second // well inside the 2-minute placement wait
	n := startNodeProc(t, "127.0.0.1:0", "--max-ranks", "2", "--max-model", "1MiB")

	stderr, code := runBounded(t, bound, "run", dsv4, "--ranks", "4", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", n.addr)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "over a node's limit of ranks per placement: 4 ranks, over the node's limit of 2 (--max-ranks)")

	stderr, code = runBounded(t, bound, "run", bigModel(t, 2<<20), "--ranks", "1", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", n.addr)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "over a node's limit of model bytes")
	assert.Contains(t, stderr, "over the node's limit of 1048576 (--max-model)")

	// Over what the node's gRPC takes (its model limit and 4 MiB): the
	// connection ends, and the node is lost to the run at once.
	stderr, code = runBounded(t, bound, "run", bigModel(t, 6<<20), "--ranks", "1", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", n.addr, "--node-timeout", "5s")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "lost", stderr)

	// A 5 MB model is a valid model: it runs on a node with the default
	// limits (it exceeded gRPC's 4 MiB, and the run hung).
	d := startNodeProc(t, "127.0.0.1:0")
	stderr, code = runBounded(t, bound, "run", bigModel(t, 5<<20), "--ranks", "2", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", d.addr)
	assert.Equal(t, 0, code, stderr)

	// 70 MB: more than hbgrun reads as a model, said before any node is
	// asked.
	stderr, code = runBounded(t, bound, "run", bigModel(t, 70<<20), "--ranks", "1", "--rounds", "1", "--store", "off", "--nodes", d.addr)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "more than a model file can be")

	// 65536 ranks in one Place, from a process that is no hbgrun driver
	// (hbgrun run takes at most 4096): the node's default limit refuses it.
	res := attack(t, attackSpec{Op: "place", Local: true, Nodes: []string{d.addr}, Ranks: 65536})
	assert.Zero(t, res.Placed)
	assert.Equal(t, "LIMIT_RANKS", res.Kind, res.Failure)
	assert.Contains(t, res.Failure, "65536 ranks, over the node's limit of 4096 (--max-ranks)")
}

// TestNodeDriverLimit: with --max-drivers 4, four drivers hold runs on a
// node, and a fifth is refused at once, naming the limit; with
// --max-placements 2, a third run is.
func TestNodeDriverLimit(t *testing.T) {
	n := startNodeProc(t, "127.0.0.1:0", "--max-drivers", "4")
	holdRuns(t, n, 4)
	stderr, code := runBounded(t, 40*time.Second, "run", dsv4, "--ranks", "1", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", n.addr)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "over a node's limit of concurrent drivers: 4 drivers have runs placed already, the node's limit (--max-drivers 4)")

	p := startNodeProc(t, "127.0.0.1:0", "--max-placements", "2")
	holdRuns(t, p, 2)
	stderr, code = runBounded(t, 40*time.Second, "run", dsv4, "--ranks", "1", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", p.addr)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "over a node's limit of placements: 2 runs placed already, the node's limit (--max-placements 2)")
}

// holdRuns starts k drivers with runs on n that last until the test ends,
// and returns once each has run a pass.
func holdRuns(t *testing.T, n *nodeProc, k int) {
	t.Helper()
	for i := range k {
		cmd := exec.Command(hbgrun(t), "run", dsv4, "--ranks", "1", "--rounds", "100000000", "--skip-device", "--store", "off", "-v", "--nodes", n.addr)
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
			}
		})
		// Placed once its first pass ends.
		passed := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "hbgrun: pass ended") {
					passed <- true
					break
				}
			}
			for sc.Scan() {
			}
			passed <- false
		}()
		select {
		case ok := <-passed:
			require.True(t, ok, "driver %d ended before a pass", i)
		case <-time.After(time.Minute):
			t.Fatalf("driver %d: no pass within a minute", i)
		}
	}
}
