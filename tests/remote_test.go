package tests

// Ranks on many machines, as OS processes on 127.0.0.1: `hbgrun node`
// processes host ranks, `hbgrun run --nodes` drives them.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/trace"
)

// nodeProc is an `hbgrun node` process.
type nodeProc struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done
	log  nodeLog       // its stderr, line by line
}

// startNodeProc starts `hbgrun node --listen listen` (127.0.0.1:0: any
// free port) and waits for the line that says where it serves.
func startNodeProc(t *testing.T, listen string, args ...string) *nodeProc {
	t.Helper()
	return startNodeBin(t, hbgrun(t), append(os.Environ(), "HBG_STORE=off"), listen, args...)
}

// startNodeBin starts bin as a node, with env.
func startNodeBin(t testing.TB, bin string, env []string, listen string, args ...string) *nodeProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"node", "--listen", listen}, args...)...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	n := &nodeProc{cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			n.log.add(sc.Text())
			if a, ok := strings.CutPrefix(sc.Text(), "hbgrun node: listening on "); ok {
				ready <- a
			}
		}
		close(ready)
	}()
	go func() {
		n.err = cmd.Wait()
		close(n.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	select {
	case a, ok := <-ready:
		require.True(t, ok, "hbgrun node exited before serving")
		n.addr = a
	case <-time.After(30 * time.Second):
		t.Fatal("hbgrun node: no 'listening on' line within 30s")
	}
	return n
}

// stop sends SIGTERM and waits for the exit (bounded).
func (n *nodeProc) stop(t *testing.T) error {
	t.Helper()
	require.NoError(t, n.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-n.done:
		return n.err
	case <-time.After(20 * time.Second):
		t.Fatal("hbgrun node did not stop within 20s of SIGTERM")
		return nil
	}
}

var passLine = regexp.MustCompile(`^hbgrun: pass ended: rank (\d+) round (\d+) \(digest ([0-9a-f]{16})\)$`)

// passDigests reads -v's pass lines: rank -> round -> digest.
func passDigests(stderr string) map[int]map[int]string {
	out := map[int]map[int]string{}
	for _, l := range strings.Split(stderr, "\n") {
		m := passLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var rank, round int
		fmt.Sscan(m[1], &rank)
		fmt.Sscan(m[2], &round)
		if out[rank] == nil {
			out[rank] = map[int]string{}
		}
		out[rank][round] = m[3]
	}
	return out
}

// localDigest is DSv4 full's digest run in one process.
func localDigest(t *testing.T) string {
	t.Helper()
	_, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "1", "--ranks", "1", "-v", "--store", "off")
	require.Equal(t, 0, code, stderr)
	d := passDigests(stderr)[0][0]
	require.NotEmpty(t, d, stderr)
	return d
}

// runOnNodes runs DSv4 full on nodes a and b, 4 ranks and 3 rounds, and
// checks that it exits 0 and that every rank ends every round with digest
// want; it returns the run's JSON report.
func runOnNodes(t *testing.T, want string, a, b *nodeProc) *trace.Report {
	t.Helper()
	out, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--ranks", "4", "--rounds", "3", "--json", "-v", "--store", "off",
		"--nodes", a.addr+","+b.addr)
	require.Equal(t, 0, code, stderr)
	digests := passDigests(stderr)
	require.Len(t, digests, 4, stderr)
	for rank := range 4 {
		require.Len(t, digests[rank], 3, "rank %d", rank)
		for round := range 3 {
			assert.Equal(t, want, digests[rank][round], "rank %d round %d", rank, round)
		}
	}
	var rep trace.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Passes, 12)
	return &rep
}

// TestRemoteRun: a driver and two nodes, DSv4 full, 4 ranks, 3 rounds:
// every rank ends every round with the digest of an in-process run, and
// the report is a local run's.
func TestRemoteRun(t *testing.T) {
	want := localDigest(t)
	a, b := startNodeProc(t, "127.0.0.1:0"), startNodeProc(t, "127.0.0.1:0")
	rep := runOnNodes(t, want, a, b)
	assert.Equal(t, 4, rep.Ranks)
	assert.Len(t, rep.Passes, 12)
	require.NotNil(t, rep.Golden)
	assert.Equal(t, "match", rep.Golden.Verdict)
	assert.Equal(t, want, fmt.Sprintf("%016x", uint64(rep.Golden.Digest)))
	assert.Equal(t, int64(15972), rep.Counts.DeviceTasks)
	assert.Equal(t, int64(8), rep.Counts.Definitions)
	require.NotNil(t, rep.Sim)
	assert.Equal(t, 4, rep.ColdPhases.Phases[trace.PhaseHostOrch].N, "one cold pass per rank")
	assert.Equal(t, 8, rep.Phases.Phases[trace.PhaseHostOrch].N)

	// The text report is the local run's report.
	text, stderr, code := runCLI(t, "run", dsv4, "--ranks", "2", "--rounds", "2", "--store", "off", "--nodes", a.addr+","+b.addr)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, text, "model dsv4_flash_decode, form full, 2 rounds x 2 ranks, device sim")
	assert.Contains(t, text, "golden: match (digest "+want)
	assert.Regexp(t, `counts \(per pass of one rank\): device_tasks 15972`, text)

	// SIGTERM: the node stops and exits 0.
	require.NoError(t, a.stop(t))
}

// TestRemoteNodeKilled: a node killed (SIGKILL) mid-run fails its ranks'
// passes within --node-timeout, naming it and its ranks; the other node's
// ranks complete; the driver exits 1; a node restarted on the same address
// serves the next run.
func TestRemoteNodeKilled(t *testing.T) {
	a, b := remoteNodeLost(t, syscall.SIGKILL)

	// The same address, a new process: the next run is served.
	b2 := startNodeProc(t, b.addr)
	require.Equal(t, b.addr, b2.addr)
	_, errs, code := runCLI(t, "run", dsv4, "--form", "full", "--ranks", "4", "--rounds", "1", "--store", "off",
		"--node-timeout", "3s", "--nodes", a.addr+","+b2.addr)
	assert.Equal(t, 0, code, errs)
}

// TestRemoteNodeStopped: a node stopped (SIGTERM) mid-run fails its passes
// in flight, exits 0, and is lost to the run as a killed one is.
func TestRemoteNodeStopped(t *testing.T) {
	_, b := remoteNodeLost(t, syscall.SIGTERM)
	<-b.done
	assert.NoError(t, b.err, "a node stopped by SIGTERM exits 0")
}

// remoteNodeLost runs 4 ranks on nodes a and b, and sends sig to b once
// rank 1 (on b) has ended a pass; it checks what the driver says and does.
func remoteNodeLost(t *testing.T, sig syscall.Signal) (a, b *nodeProc) {
	const timeout = 3 * time.Second
	a, b = startNodeProc(t, "127.0.0.1:0"), startNodeProc(t, "127.0.0.1:0")
	const rounds = 20
	cmd := exec.Command(hbgrun(t), "run", dsv4, "--form", "full", "--ranks", "4", "--rounds", fmt.Sprint(rounds), "--json", "-v",
		"--store", "off", "--node-timeout", timeout.String(), "--nodes", a.addr+","+b.addr)
	var out bytes.Buffer
	cmd.Stdout = &out
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var stderr strings.Builder
	var killed, lostAt time.Time
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		line := sc.Text()
		stderr.WriteString(line + "\n")
		// Rank 1 lives on b: once it has a pass behind it, b dies.
		if killed.IsZero() && strings.HasPrefix(line, "hbgrun: pass ended: rank 1 round 1 ") {
			require.NoError(t, b.cmd.Process.Signal(sig))
			killed = time.Now()
		}
		if !killed.IsZero() && lostAt.IsZero() && strings.Contains(line, "node "+b.addr+" lost") {
			lostAt = time.Now()
		}
	}
	_, _ = io.Copy(io.Discard, errPipe)
	err = cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "the driver must fail: %v\n%s", err, stderr.String())
	assert.Equal(t, 1, ee.ExitCode(), stderr.String())
	require.False(t, killed.IsZero(), "rank 1 never ended round 1:\n%s", stderr.String())
	require.False(t, lostAt.IsZero(), "the driver never said the node was lost:\n%s", stderr.String())
	assert.Less(t, lostAt.Sub(killed), timeout+time.Second, "lost within --node-timeout")
	// The error names the node and its ranks.
	assert.Regexp(t, `rank [13] round \d+: node `+regexp.QuoteMeta(b.addr)+` lost: .* \(its ranks: 1, 3\)`, stderr.String())

	// The surviving node's ranks completed; the report says the run failed.
	var rep trace.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
	done := map[int]int{}
	for _, p := range rep.Passes {
		done[p.Rank]++
	}
	assert.Equal(t, rounds, done[0])
	assert.Equal(t, rounds, done[2])
	assert.Less(t, done[1], rounds)
	assert.Less(t, done[3], rounds)
	assert.Contains(t, strings.Join(rep.Warnings, "\n"), "a node was lost")
	return a, b
}

// TestRemoteUsage: the flags' mistakes are the user's (exit 2), an
// unreachable node a failed run (exit 1) within --node-timeout.
func TestRemoteUsage(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--nodes", "nohostport"},
		{"run", "--nodes", "127.0.0.1:0"},
		{"run", "--nodes", "127.0.0.1:1", "--node-timeout", "0s"},
		{"node"},
		{"node", "--listen", "127.0.0.1:99999"},
		{"node", "--listen", "0.0.0.0:7001"},
		{"node", "--listen", ":7001"},
		{"run", "--nodes", "127.0.0.1:7001", "--driver-listen", "0.0.0.0:0"},
		{"node", "--listen", "0.0.0.0:7001", "--advertise", "0.0.0.0:7001"},
		{"node", "--listen", "127.0.0.1:7001", "--advertise", "127.0.0.1:0"},
		{"node", "--listen", "0.0.0.0:7001", "--advertise", "nohostport"},
		{"run", "--nodes", "127.0.0.1:7001", "--driver-advertise", "127.0.0.1:7002"},
		{"run", "--nodes", "127.0.0.1:7001", "--driver-listen", "0.0.0.0:0", "--driver-advertise", "0.0.0.0:7002"},
	} {
		_, stderr, code := runCLI(t, args...)
		assert.Equal(t, 2, code, "%v: %s", args, stderr)
	}
	t0 := time.Now()
	_, stderr, code := runCLI(t, "run", "--nodes", "127.0.0.1:1", "--node-timeout", "1s", "--store", "off")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "node 127.0.0.1:1 lost")
	// Said once: the refused connection, not also a timeout after it.
	assert.Equal(t, 1, strings.Count(stderr, "lost"), stderr)
	assert.Less(t, time.Since(t0), 10*time.Second)
	// Refused before the default timeout: the connection's end is the cause.
	_, stderr, code = runCLI(t, "run", "--nodes", "127.0.0.1:1", "--store", "off")
	assert.Equal(t, 1, code, stderr)
	assert.Equal(t, 1, strings.Count(stderr, "lost"), stderr)
}

// TestRemoteAdvertise: a node and a driver that listen on every interface
// and advertise the loopback address serve a run: the PIDs they hand out
// carry the advertised address, which the other side reaches. Every
// interface without TLS takes --insecure (TestNodeInsecureRefused).
func TestRemoteAdvertise(t *testing.T) {
	port := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	np, dp := port(), port()
	n := startNodeProc(t, "0.0.0.0:"+np, "--advertise", "127.0.0.1:"+np, "--insecure")
	assert.Equal(t, "127.0.0.1:"+np, n.addr)
	_, stderr, code := runCLI(t, "run", "--nodes", n.addr, "--ranks", "2", "--rounds", "2", "--skip-device", "--store", "off",
		"--driver-listen", "0.0.0.0:"+dp, "--driver-advertise", "127.0.0.1:"+dp)
	assert.Equal(t, 0, code, stderr)
}
