package remote

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCA is a throwaway certificate authority for the package's TLS
// tests (tests/remote_sec_test.go has the CLI's; this one stays in the
// package, for child nodes and raw clients).
type testCA struct {
	dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hbg test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	c := &testCA{dir: t.TempDir(), ca: ca, key: key, next: 2}
	writeTestPEM(t, c.caFile(), "CERTIFICATE", der)
	return c
}

func (c *testCA) caFile() string { return filepath.Join(c.dir, "ca.crt") }

// issue makes a certificate with subject CN cn and the IP SANs ips (none:
// a CN-only certificate), good for serving and dialling; it returns its
// certificate and key files.
func (c *testCA) issue(t testing.TB, cn string, ips ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(c.next), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	c.next++
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	name := strings.NewReplacer(".", "_", " ", "_").Replace(cn)
	certFile, keyFile = filepath.Join(c.dir, name+".crt"), filepath.Join(c.dir, name+".key")
	writeTestPEM(t, certFile, "CERTIFICATE", der)
	writeTestPEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// nodeEnv is the environment that makes a child node serve mutual TLS
// with a certificate for 127.0.0.1.
func (c *testCA) nodeEnv(t testing.TB) string {
	cert, key := c.issue(t, "node", "127.0.0.1")
	return nodeTLSEnv + "=" + cert + "," + key + "," + c.caFile()
}

// clientTLS is a raw client's TLS configuration with a certificate for
// 127.0.0.1 from this CA, trusting the CA's servers.
func (c *testCA) clientTLS(t testing.TB, cn string, ips ...string) *tls.Config {
	t.Helper()
	certFile, keyFile := c.issue(t, cn, ips...)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(c.ca)
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

func writeTestPEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}
