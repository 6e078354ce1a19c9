package tests

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"

	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/remote"
)

// holdConns opens k raw TCP connections to addr from the local IP from
// and sends nothing on them; the test's end closes them.
func holdConns(t *testing.T, addr, from string, k int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	var conns []net.Conn
	for range k {
		c, err := d.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, c)
	}
	return conns
}

// refusalLine is what a connection's server says first, within d.
func refusalLine(t *testing.T, c net.Conn, d time.Duration) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	r := bufio.NewReader(c)
	// An accepted connection's first bytes are HTTP/2's settings, no line.
	head := make([]byte, len(authn.RefusalPrefix))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != authn.RefusalPrefix {
		return string(head)
	}
	rest, _ := r.ReadString('\n')
	return string(head) + rest
}

// TestNodePeerConnFlood: raw TCP connections from one address fill that
// address's share (--max-conns-per-peer), not the node: the one over it
// is told the limit in a line before TLS and closed, a driver from
// another loopback address runs while the flood holds its share, and a
// driver from the flooding address is told which limit refused it. Before
// the per-peer bound, one address held every slot of --max-conns (its
// default too), no line said why, and the driver was told "is a node
// listening there?".
func TestNodePeerConnFlood(t *testing.T) {
	n := startNodeProc(t, "127.0.0.1:0", "--max-conns-per-peer", "3")
	flood := holdConns(t, n.addr, "127.0.0.2", 4)
	// The node takes them in whichever order their handshakes run: one
	// of the four, any, is refused.
	var refusals []string
	for _, c := range flood {
		if line := refusalLine(t, c, 10*time.Second); strings.HasPrefix(line, authn.RefusalPrefix) {
			refusals = append(refusals, line)
		}
	}
	require.Len(t, refusals, 1, n.log.String())
	assert.Contains(t, refusals[0], "--max-conns-per-peer 3")

	// The honest driver (127.0.0.1) gets in beside the held three.
	_, stderr, code := runCLI(t, "run", dsv4, "--ranks", "1", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", n.addr)
	assert.Equal(t, 0, code, stderr)

	// A driver from the flooding address itself is refused, with the
	// limit named.
	holdConns(t, n.addr, "127.0.0.1", 3)
	_, stderr, code = runCLI(t, "run", dsv4, "--ranks", "1", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", n.addr, "--node-timeout", "5s")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "--max-conns-per-peer 3", stderr)
}

// TestNodeIdleConns: on a TLS node, a connection that never starts its
// handshake is closed within the handshake timeout, and one that finishes
// the TLS and HTTP/2 handshakes (a valid client certificate) and opens no
// stream is closed after --idle-timeout; then an honest driver runs.
// Before, gRPC's defaults held the first 120 s and the second forever:
// enough of them locked every driver out ("TLS handshake: EOF").
func TestNodeIdleConns(t *testing.T) {
	ca := newPKI(t, "hbg test CA")
	n := startNodeProc(t, "127.0.0.1:0", append(ca.issue(t, "node"), "--idle-timeout", "1s")...)

	raw := holdConns(t, n.addr, "127.0.0.1", 1)[0]
	start := time.Now()
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(3*remote.HandshakeTimeout)))
	_, err := io.Copy(io.Discard, raw)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "a connection without a handshake still open after %v", 3*remote.HandshakeTimeout)
	t.Logf("no handshake: closed after %v", time.Since(start))

	cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(t, ca, "idler"))))
	require.NoError(t, err)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		require.True(t, cc.WaitForStateChange(ctx, s), "never ready (%v)", s)
	}
	idle := time.Now()
	// The node's GOAWAY takes the connection out of Ready; 30 s, the
	// default idle timeout, is the bound here.
	require.True(t, cc.WaitForStateChange(ctx, connectivity.Ready), "an idle connection still open after 30s")
	t.Logf("idle after its handshakes: closed after %v", time.Since(idle))
	_, stderr, code := runDSv4(t, []*nodeProc{n}, ca.issue(t, "driver")...)
	assert.Equal(t, 0, code, stderr)
}

// clientTLS is a raw client's TLS with a certificate ca issued as cn.
func clientTLS(t *testing.T, ca *testPKI, cn string) *tls.Config {
	t.Helper()
	f := ca.issue(t, cn)
	pair, err := tls.LoadX509KeyPair(f[1], f[3])
	require.NoError(t, err)
	pool := ca.pool()
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// TestNodeSpawnFlood: run hosts spawned without a placement are bounded
// (--max-unplaced, a quarter from one connection): a stranger's hundred
// spawns get one host, and an honest driver's spawn and run get in.
// Before, each spawn made a host that stayed: a million in 21 s took a
// node from 23 MB to 1.87 GB.
func TestNodeSpawnFlood(t *testing.T) {
	n := startNodeProc(t, "127.0.0.1:0", "--max-unplaced", "4")
	res := attack(t, attackSpec{Op: "spawn", Local: true, Nodes: []string{n.addr}, Ranks: 100})
	assert.Equal(t, 1, res.Placed, "run hosts spawned from one connection: %+v", res)
	_, stderr, code := runCLI(t, "run", dsv4, "--ranks", "1", "--rounds", "1", "--skip-device", "--store", "off", "--nodes", n.addr)
	assert.Equal(t, 0, code, stderr)
}
