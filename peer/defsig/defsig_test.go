package defsig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/url"
	"testing"
	"time"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	n    int64
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &ca{cert: c, key: key, n: 1}
}

func (c *ca) pool() *x509.CertPool { p := x509.NewCertPool(); p.AddCert(c.cert); return p }

// issue makes a node certificate; role gives it the recorder URI SAN.
func (c *ca) issue(t *testing.T, role bool, notAfter time.Time, ed bool) tls.Certificate {
	t.Helper()
	var pub crypto.PublicKey
	var priv crypto.Signer
	if ed {
		p, k, _ := ed25519.GenerateKey(rand.Reader)
		pub, priv = p, k
	} else {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		pub, priv = &k.PublicKey, k
	}
	c.n++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(c.n), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if role {
		tmpl.URIs = []*url.URL{RecorderSAN()}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}
}

func TestSignVerify(t *testing.T) {
	a, b := newCA(t), newCA(t)
	later := time.Now().Add(time.Hour)
	for _, ed := range []bool{false, true} {
		s, err := NewSigner(a.issue(t, true, later, ed))
		if err != nil {
			t.Fatal(err)
		}
		sig, err := s.Sign(7, 9, 3)
		if err != nil {
			t.Fatal(err)
		}
		v := NewVerifier(a.pool())
		leaf, err := v.Verify(7, 9, 3, sig)
		if err != nil {
			t.Fatalf("ed25519 %v: %v", ed, err)
		}
		for name, c := range map[string]struct {
			fk, h uint64
			ver   uint16
		}{"other key": {8, 9, 3}, "other hash": {7, 10, 3}, "other version": {7, 9, 4}} {
			if _, err := v.Verify(c.fk, c.h, c.ver, sig); !errors.Is(err, ErrBadSignature) {
				t.Errorf("%s: %v, want ErrBadSignature", name, err)
			}
		}
		if _, err := NewVerifier(b.pool()).Verify(7, 9, 3, sig); !errors.Is(err, ErrUntrusted) {
			t.Errorf("another CA: %v, want ErrUntrusted", err)
		}
		v.SetDenied([]string{Serial(leaf)})
		if _, err := v.Verify(7, 9, 3, sig); !errors.Is(err, ErrRevoked) {
			t.Errorf("revoked: %v, want ErrRevoked", err)
		}
	}
	v := NewVerifier(a.pool())
	if _, err := v.Verify(7, 9, 3, Signature{}); !errors.Is(err, ErrUnsigned) {
		t.Errorf("unsigned: %v", err)
	}
	// Signed while valid, checked after expiry.
	s, err := NewSigner(a.issue(t, true, time.Now().Add(time.Minute), false))
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := s.Sign(7, 9, 3)
	v.Now = func() time.Time { return time.Now().Add(time.Hour) }
	if _, err := v.Verify(7, 9, 3, sig); !errors.Is(err, ErrUntrusted) {
		t.Errorf("expired: %v, want ErrUntrusted", err)
	}
	// A certificate without the role cannot sign, and its forged signature
	// (made with its key directly) is refused.
	nr := a.issue(t, false, later, false)
	if _, err := NewSigner(nr); !errors.Is(err, ErrNoRole) {
		t.Errorf("NewSigner without role: %v", err)
	}
	forged := (&Signer{key: nr.PrivateKey.(crypto.Signer), cert: nr.Certificate[0]})
	fs, _ := forged.Sign(7, 9, 3)
	if _, err := NewVerifier(a.pool()).Verify(7, 9, 3, fs); !errors.Is(err, ErrNoRole) {
		t.Errorf("no role: %v, want ErrNoRole", err)
	}
}
