package authn

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCertNames(t *testing.T) {
	u, _ := url.Parse("spiffe://hbg/node-a")
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "node-a"}, DNSNames: []string{"a.example", "bad,name"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.2")}, URIs: []*url.URL{u}}
	got := certNames(leaf)
	want := []string{"a.example", "10.0.0.2", "spiffe://hbg/node-a"}
	if !slices.Equal(got, want) {
		t.Fatalf("certNames = %q, want %q (SANs only, a name with a comma dropped)", got, want)
	}
	// A certificate whose CN alone is a node's address names nothing.
	cnOnly := &x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"}}
	if got := certNames(cnOnly); len(got) != 0 || (Conn{Addr: "127.0.0.2:1", Names: got}).Vouches("127.0.0.1") {
		t.Fatalf("CN-only certificate: names %q, want none", got)
	}
}

// TestVouches: with TLS a connection speaks for the hosts its certificate
// names; without, for its own IP address only.
func TestVouches(t *testing.T) {
	tlsConn := Conn{Addr: "10.0.0.9:5555", Names: []string{"node-a", "10.0.0.2"}}
	plain := Conn{Addr: "127.0.0.1:5555"}
	for _, c := range []struct {
		c    Conn
		host string
		want bool
	}{
		{tlsConn, "10.0.0.2", true},
		{tlsConn, "node-a", true},
		{tlsConn, "10.0.0.9", false}, // its address, not a name it was verified for
		{plain, "127.0.0.1", true},
		{plain, "::ffff:127.0.0.1", true},
		{plain, "127.0.0.2", false},
		{plain, "localhost", false},
	} {
		if got := c.c.Vouches(c.host); got != c.want {
			t.Errorf("%+v vouches for %s: %v, want %v", c.c, c.host, got, c.want)
		}
	}
	if tlsConn.Identity() == (Conn{Addr: "10.0.0.9:5556", Names: tlsConn.Names}).Identity() {
		t.Error("two connections with one certificate have one identity")
	}
}

func TestFilesCheck(t *testing.T) {
	if err := (Files{CertFile: "c"}).Check(); err == nil || !strings.Contains(err.Error(), "--key-file and --trusted-ca-file missing") {
		t.Fatalf("Check of a certificate alone: %v", err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Files{CertFile: ca, KeyFile: ca, TrustedCAFile: ca}.Configs()
	if err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Configs of files that hold no PEM: %v", err)
	}
}
