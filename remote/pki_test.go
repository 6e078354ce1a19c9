package remote

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/authn/pki"
)

// testCA is a throwaway certificate authority (authn/pki, as the local
// PKI is made) for the package's TLS tests, child nodes and raw clients.
type testCA struct {
	dir string
	ca  *pki.CA
	n   int
}

const testValidity = 24 * time.Hour

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	ca, err := pki.NewCA("hbg test CA", testValidity)
	require.NoError(t, err)
	c := &testCA{dir: t.TempDir(), ca: ca}
	_, err = ca.WriteCA(c.dir)
	require.NoError(t, err)
	return c
}

// issue makes a certificate with subject CN cn and the IP SANs ips (none:
// a CN-only certificate), good for serving and dialling.
func (c *testCA) issue(t testing.TB, cn string, ips ...string) pki.Files {
	t.Helper()
	var n pki.Names
	for _, ip := range ips {
		n.IPs = append(n.IPs, net.ParseIP(ip))
	}
	c.n++
	f, err := c.ca.WriteLeaf(c.dir, fmt.Sprintf("leaf-%d", c.n), cn, n, testValidity)
	require.NoError(t, err)
	return f
}

// nodeEnv is the environment that makes a child node serve mutual TLS
// with a certificate for 127.0.0.1.
func (c *testCA) nodeEnv(t testing.TB) string {
	f := c.issue(t, "node", "127.0.0.1")
	return nodeTLSEnv + "=" + f.CertFile + "," + f.KeyFile + "," + f.CAFile
}

// clientTLS is a raw client's TLS configuration with a certificate for
// ips from this CA, trusting the CA's servers.
func (c *testCA) clientTLS(t testing.TB, cn string, ips ...string) *tls.Config {
	t.Helper()
	f := c.issue(t, cn, ips...)
	pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: c.ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}
