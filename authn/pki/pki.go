// Package pki makes the certificates hbg's mutual TLS runs on, with Go's
// crypto/x509 and crypto/ecdsa only: a user's local PKI for loopback
// (Local: hbgrun's default when no --cert-file is given and every address
// is loopback), and the throwaway authorities of the tests (NewCA, Issue).
//
// It is one package so that what the tests trust is made the way the
// default is: an ECDSA P-256 authority, leaves that name their hosts by
// subject alternative names only (authn never reads a CN), keys written
// 0600.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// CA is a certificate authority held in memory: its certificate, and its
// key for as long as the CA lives (Local writes none to disk).
type CA struct {
	Cert *x509.Certificate
	DER  []byte
	key  *ecdsa.PrivateKey
}

// Names are what a leaf certifies: its subject alternative names.
type Names struct {
	IPs  []net.IP
	DNS  []string
	URIs []*url.URL
}

// LoopbackNames are this machine's loopback names: 127.0.0.1, ::1 and
// localhost.
func LoopbackNames() Names {
	return Names{IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNS: []string{"localhost"}}
}

// Has says whether host (an IP address or a DNS name) is among the names.
func (n Names) Has(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		for _, i := range n.IPs {
			if i.Equal(ip) {
				return true
			}
		}
		return false
	}
	return slices.Contains(n.DNS, host)
}

// NewCA makes an authority named name, valid from an hour ago (clocks of
// one machine's processes agree; a test's own may not be monotonic with
// a certificate's second) for validity.
func NewCA(name string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	return &CA{Cert: cert, DER: der, key: key}, nil
}

// newSerial is a random 128-bit serial: two authorities' leaves never
// share one (a deny list names them by serial).
func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}

// Leaf is an issued certificate and its key, DER.
type Leaf struct {
	Cert    *x509.Certificate
	DER     []byte
	KeyPKCS []byte
}

// Issue makes a leaf named cn (its subject; no name authn reads) with the
// names n, good for serving and dialling, valid for validity.
func (c *CA) Issue(cn string, n Names, validity time.Duration) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: %s key: %w", cn, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: n.IPs, DNSNames: n.DNS, URIs: n.URIs,
	}
	if tmpl.NotAfter.After(c.Cert.NotAfter) {
		tmpl.NotAfter = c.Cert.NotAfter // a leaf outliving its CA would not verify
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("pki: %s certificate: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: %s certificate: %w", cn, err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: %s key: %w", cn, err)
	}
	return &Leaf{Cert: cert, DER: der, KeyPKCS: kd}, nil
}

// TLS is the leaf as a tls.Certificate.
func (l *Leaf) TLS() (tls.Certificate, error) {
	return tls.X509KeyPair(CertPEM(l.DER), KeyPEM(l.KeyPKCS))
}

// Pool is a pool of the CA's certificate alone.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// CertPEM and KeyPEM are DER as the PEM files hbg reads.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// KeyPEM is a PKCS #8 key's PEM.
func KeyPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// Files are a leaf's certificate and key files and its CA's, the three of
// --cert-file, --key-file and --trusted-ca-file.
type Files struct {
	CertFile, KeyFile, CAFile string
}

// Flags are the files as hbgrun's flags.
func (f Files) Flags() []string {
	return []string{"--cert-file", f.CertFile, "--key-file", f.KeyFile, "--trusted-ca-file", f.CAFile}
}

// WriteCA writes the CA's certificate to dir/ca.crt (0644: it is public)
// and returns its path.
func (c *CA) WriteCA(dir string) (string, error) {
	p := filepath.Join(dir, "ca.crt")
	if err := writeFile(p, CertPEM(c.DER), 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// WriteLeaf issues a leaf (as Issue) and writes it to dir/name.crt and
// dir/name.key (0600), beside the CA's dir/ca.crt (written if missing).
func (c *CA) WriteLeaf(dir, name, cn string, n Names, validity time.Duration) (Files, error) {
	l, err := c.Issue(cn, n, validity)
	if err != nil {
		return Files{}, err
	}
	f := Files{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key"), CAFile: filepath.Join(dir, "ca.crt")}
	if _, err := os.Stat(f.CAFile); os.IsNotExist(err) {
		if _, err := c.WriteCA(dir); err != nil {
			return Files{}, err
		}
	}
	if err := writeFile(f.KeyFile, KeyPEM(l.KeyPKCS), 0o600); err != nil {
		return Files{}, err
	}
	if err := writeFile(f.CertFile, CertPEM(l.DER), 0o644); err != nil {
		return Files{}, err
	}
	return f, nil
}

// writeFile writes a file (perm when it is new) and syncs
// it, so that a directory renamed into place after holds whole files.
func writeFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pki: %s: %w", path, err)
	}
	return nil
}
