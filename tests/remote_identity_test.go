package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// issueNamed is pki.issue with the given IP SANs only (none: a
// certificate whose subject CN alone names a host).
func (p *pki) issueNamed(t *testing.T, cn string, ips ...string) []string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p.next++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.next), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	require.NoError(t, err)
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	name := cn + "-" + big.NewInt(p.next).String()
	cert, keyFile := filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kd)
	return []string{"--cert-file", cert, "--key-file", keyFile, "--trusted-ca-file", p.caFile()}
}

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
