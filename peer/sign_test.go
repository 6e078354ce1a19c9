package peer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/peer/defsig"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	n    int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))(t)
	return &testCA{cert: must(x509.ParseCertificate(der))(t), key: key, n: 1}
}

// recorder issues a recorder certificate valid until notAfter: its DER,
// its key's PKCS#8 DER, and its deny-list name.
func (c *testCA) recorder(t *testing.T, notAfter time.Time) (cert, key []byte, serial string) {
	t.Helper()
	k := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))(t)
	c.n++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(c.n), Subject: pkix.Name{CommonName: "recorder"},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{defsig.RecorderSAN()}}
	cert = must(x509.CreateCertificate(rand.Reader, tmpl, c.cert, &k.PublicKey, c.key))(t)
	return cert, must(x509.MarshalPKCS8PrivateKey(k))(t), strings.ToLower(big.NewInt(c.n).Text(16))
}

// signedRun is a local node, trusting ours, whose every key's owner is a
// peer that answers with its true image signed as mode says.
func signedRun(t *testing.T, bad *child, ours *testCA, denied []string, mode string, cert, key []byte) (passResult, []Refused) {
	t.Helper()
	if r := bad.do(command{Op: "bad", Mode: mode, SignCert: cert, SignKey: key}); r.Err != "" {
		t.Fatal(r.Err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ours.cert)
	v := defsig.NewVerifier(pool)
	v.SetDenied(denied)
	var mu sync.Mutex
	var refused []Refused
	nd := local(t, nodeSpec{Owner: bad.addr, verifier: v, onRefused: func(r Refused) {
		mu.Lock()
		refused = append(refused, r)
		mu.Unlock()
	}}, bad.addr)
	p := nd.pass(0)
	mu.Lock()
	defer mu.Unlock()
	return p, append([]Refused(nil), refused...)
}

// TestSignedImageReplayed: an image its recorder signed with a recorder
// certificate of the cluster's CA is replayed as it came: the node's
// first pass records nothing and fetches every Definition.
func TestSignedImageReplayed(t *testing.T) {
	ref := must(dsv4Reference())(t)
	bad := startChild(t)
	ours := newTestCA(t)
	cert, key, _ := ours.recorder(t, time.Now().Add(time.Hour))
	p, refused := signedRun(t, bad, ours, nil, "signed", cert, key)
	checkPass(t, "the node", p, ref.digest)
	if p.Built != 0 || p.Recorded != 0 || p.Fetched != dsv4Keys || len(refused) != 0 {
		t.Fatalf("built %d (%d nodes), fetched %d, refused %v; want 0, 0, %d, none (warnings %q)", p.Built, p.Recorded, p.Fetched, refused, dsv4Keys, p.Warnings)
	}
}

// TestStrangerSignatureRefused: an image signed by another CA's recorder,
// by a revoked recorder, by an expired one, unsigned, or a forgery with a
// good signature over the true image's bytes is never replayed: the node
// records every Definition itself and refuses each image, saying why.
func TestStrangerSignatureRefused(t *testing.T) {
	ref := must(dsv4Reference())(t)
	bad := startChild(t)
	ours, other := newTestCA(t), newTestCA(t)
	later := time.Now().Add(time.Hour)
	good, goodKey, _ := ours.recorder(t, later)
	stranger, strangerKey, _ := other.recorder(t, later)
	revoked, revokedKey, revokedSerial := ours.recorder(t, later)
	expired, expiredKey, _ := ours.recorder(t, time.Now().Add(-time.Minute))
	for _, c := range []struct {
		mode      string
		cert, key []byte
		want      error
	}{
		{"unsigned", nil, nil, defsig.ErrUnsigned},
		{"stranger", stranger, strangerKey, defsig.ErrUntrusted},
		{"revoked", revoked, revokedKey, defsig.ErrRevoked},
		{"expired", expired, expiredKey, defsig.ErrUntrusted},
		{"other-bytes", good, goodKey, defsig.ErrBadSignature},
	} {
		t.Run(c.mode, func(t *testing.T) {
			p, refused := signedRun(t, bad, ours, []string{revokedSerial}, c.mode, c.cert, c.key)
			checkPass(t, "the node", p, ref.digest)
			if p.Built != dsv4Keys || p.Fetched != 0 {
				t.Fatalf("built %d, fetched %d; want %d, 0 (warnings %q)", p.Built, p.Fetched, dsv4Keys, p.Warnings)
			}
			if len(refused) != dsv4Keys {
				t.Fatalf("%d images refused, want %d: %v", len(refused), dsv4Keys, refused)
			}
			for _, r := range refused {
				if !strings.Contains(r.Why, strings.TrimPrefix(c.want.Error(), "defsig: ")) {
					t.Fatalf("refused because %q, want %q", r.Why, c.want)
				}
			}
			if n := countContaining(p.Warnings, "signature is refused"); n != dsv4Keys {
				t.Fatalf("%d warnings say so, want %d: %q", n, dsv4Keys, p.Warnings)
			}
		})
	}
}
