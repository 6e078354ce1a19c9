package tests

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRemoteCertNames: identity is a certificate's SANs alone. A process
// with a certificate our CA signed whose subject CN is 127.0.0.1 and that
// has no SAN, or whose SAN is another address, places nothing on a TLS
// node, and hbgrun refuses to drive with either, naming the reason. Before,
// hbg's authn took the CN as a name, and then (CN dropped) a certificate
// without SANs was taken for a connection without TLS, whose IP address
// vouched for it; a wrong-SAN driver was told "no answer to spawning"
// after 5 s. An honest driver runs after.
func TestRemoteCertNames(t *testing.T) {
	ca := newPKI(t, "hbg test CA")
	n := startNodeProc(t, "127.0.0.1:0", ca.issue(t, "node")...)
	serve := ca.issue(t, "attacker")
	for name, flags := range map[string][]string{
		"CN only":   ca.issueNamed(t, "127.0.0.1"),
		"wrong SAN": ca.issueNamed(t, "127.0.0.1", "10.1.2.3"),
	} {
		t.Run(name, func(t *testing.T) {
			res := attack(t, attackSpec{Op: "place", Nodes: []string{n.addr}, TLS: flags, Serve: serve})
			assert.Zero(t, res.Placed, res.Answered)
			assert.Equal(t, "UNAUTHORIZED", res.Kind, res.Failure)
			assert.Contains(t, res.Failure, "does not name its host 127.0.0.1")

			_, stderr, code := runDSv4(t, []*nodeProc{n}, flags...)
			assert.NotEqual(t, 0, code, stderr)
			assert.Contains(t, stderr, "127.0.0.1", stderr)
			assert.Empty(t, passDigests(stderr), "no pass ran")
		})
	}
	_, stderr, code := runDSv4(t, []*nodeProc{n}, ca.issue(t, "driver")...)
	assert.Equal(t, 0, code, stderr)
}
