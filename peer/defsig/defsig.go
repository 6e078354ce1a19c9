// Package defsig signs and verifies Definitions that travel between the
// nodes of an hbg cluster, so that a node replays an image another node
// recorded without recording it itself, and only when a node the cluster
// trusts to record vouches for exactly those bytes.
//
// # What is signed
//
// The signed message is a fixed 36-byte string: the domain tag
// "hbg-definition-v1\x00" (18 bytes), the full_key (8 bytes, little
// endian), the image's content hash (8 bytes, little endian) and the
// image format version (2 bytes, little endian). The content hash covers
// every byte of the image (stages.DefinitionHash), and the receiver
// recomputes it from the bytes it got before it checks the signature: a
// good signature over another image, another key or another format
// version does not verify.
//
// # Who may sign: the recorder role
//
// The signer is the node's TLS key (the private key of its --cert-file),
// through crypto.Signer: ECDSA (SHA-256 digest, ASN.1 signature) or
// Ed25519 (the message itself). The signature travels with the signer's
// certificate (DER). A receiver takes it only when that certificate
//   - chains to the cluster's CA (the --trusted-ca-file every node has),
//   - is valid now (NotBefore..NotAfter; an expired certificate's
//     signatures are refused, even over images it signed while valid),
//   - carries the recorder role: the URI SAN RecorderURI
//     ("urn:hbg:role:recorder"); a CA issues it only to nodes that may
//     record for the cluster, never to drivers,
//   - is not revoked: its serial number (hex) is not in the verifier's
//     deny list.
//
// An image with no signature, or one that fails any of those, is never
// replayed: the receiver records the Definition itself.
package defsig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// RecorderURI is the URI SAN that gives a node certificate the recorder
// role.
const RecorderURI = "urn:hbg:role:recorder"

// domain separates a Definition signature from any other use of the key
// (a TLS handshake signs other structures).
const domain = "hbg-definition-v1\x00"

// Errors a Verify returns, matchable with errors.Is.
var (
	ErrUnsigned     = errors.New("defsig: the image is not signed")
	ErrUntrusted    = errors.New("defsig: the signer's certificate does not chain to the cluster's CA or is not valid now")
	ErrNoRole       = errors.New("defsig: the signer's certificate lacks the recorder role (URI SAN " + RecorderURI + ")")
	ErrRevoked      = errors.New("defsig: the signer's certificate is revoked")
	ErrBadSignature = errors.New("defsig: the signature does not verify over this full_key, content hash and format version")
)

// Signature is a Definition's signature and the certificate of the node
// that made it.
type Signature struct {
	Sig  []byte
	Cert []byte // DER, the signer's leaf certificate
}

// Empty says whether s carries no signature.
func (s Signature) Empty() bool { return len(s.Sig) == 0 && len(s.Cert) == 0 }

// Message is the bytes signed for a Definition.
func Message(fullKey, contentHash uint64, version uint16) []byte {
	b := make([]byte, 0, len(domain)+18)
	b = append(b, domain...)
	b = binary.LittleEndian.AppendUint64(b, fullKey)
	b = binary.LittleEndian.AppendUint64(b, contentHash)
	return binary.LittleEndian.AppendUint16(b, version)
}

// Signer signs Definitions with a node's TLS key.
type Signer struct {
	key  crypto.Signer
	cert []byte
}

// NewSigner makes a Signer from a node's certificate and key (as
// tls.LoadX509KeyPair returns them). It checks that the key signs for
// the certificate, and says so when the certificate lacks the recorder
// role (its signatures would be refused everywhere).
func NewSigner(c tls.Certificate) (*Signer, error) {
	if len(c.Certificate) == 0 {
		return nil, fmt.Errorf("defsig: the node certificate is empty")
	}
	key, ok := c.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("defsig: the node key (%T) cannot sign", c.PrivateKey)
	}
	switch key.Public().(type) {
	case *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("defsig: the node key is %T; Definitions are signed with ECDSA or Ed25519 keys", key.Public())
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("defsig: the node certificate: %w", err)
	}
	if !hasRole(leaf) {
		return nil, fmt.Errorf("defsig: node certificate %q: %w", leaf.Subject.CommonName, ErrNoRole)
	}
	s := &Signer{key: key, cert: c.Certificate[0]}
	probe, err := s.Sign(0, 0, 0)
	if err != nil {
		return nil, err
	}
	if err := checkSig(leaf, Message(0, 0, 0), probe.Sig); err != nil {
		return nil, fmt.Errorf("defsig: the node key does not match its certificate: %w", err)
	}
	return s, nil
}

// Sign signs a Definition.
func (s *Signer) Sign(fullKey, contentHash uint64, version uint16) (Signature, error) {
	msg := Message(fullKey, contentHash, version)
	var sig []byte
	var err error
	if _, ok := s.key.Public().(ed25519.PublicKey); ok {
		sig, err = s.key.Sign(rand.Reader, msg, crypto.Hash(0))
	} else {
		d := sha256.Sum256(msg)
		sig, err = s.key.Sign(rand.Reader, d[:], crypto.SHA256)
	}
	if err != nil {
		return Signature{}, fmt.Errorf("defsig: signing full_key %016x: %w", fullKey, err)
	}
	return Signature{Sig: sig, Cert: s.cert}, nil
}

// Verifier checks Definition signatures against the cluster's CA and a
// deny list. It is safe for concurrent use.
type Verifier struct {
	roots *x509.CertPool
	// Now is the clock certificates are checked against (time.Now when
	// nil).
	Now    func() time.Time
	mu     sync.RWMutex
	denied map[string]bool
}

// NewVerifier makes a Verifier that trusts signatures of recorder
// certificates the CAs in roots issued.
func NewVerifier(roots *x509.CertPool) *Verifier {
	return &Verifier{roots: roots, denied: map[string]bool{}}
}

// Serial is a certificate's name in a deny list: its serial number in
// lower-case hex.
func Serial(c *x509.Certificate) string { return strings.ToLower(c.SerialNumber.Text(16)) }

// ParseSerial reads a certificate serial number as an operator gives it
// (hex, as Serial, openssl x509 -serial or openssl's "Serial Number:"
// print it: with or without "serial=", "0x", colons and leading zeros) and
// returns it in Serial's form.
func ParseSerial(s string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimPrefix(strings.TrimPrefix(t, "serial="), "0x")
	t = strings.ReplaceAll(t, ":", "")
	n, ok := new(big.Int).SetString(t, 16)
	if !ok || t == "" || n.Sign() < 0 {
		return "", fmt.Errorf("serial %q: want a certificate serial number in hex (openssl x509 -noout -serial prints it)", s)
	}
	return strings.ToLower(n.Text(16)), nil
}

// ReadDenyList reads a file of revoked serial numbers, one a line (blank
// lines and text after # are ignored), each as ParseSerial takes it.
func ReadDenyList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("defsig: deny list: %w", err)
	}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		s, err := ParseSerial(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// SetDenied replaces the deny list (serial numbers, as ParseSerial takes
// them; one that does not read denies nothing).
func (v *Verifier) SetDenied(serials []string) {
	m := make(map[string]bool, len(serials))
	for _, s := range serials {
		if t, err := ParseSerial(s); err == nil {
			m[t] = true
		}
	}
	v.mu.Lock()
	v.denied = m
	v.mu.Unlock()
}

// Verify checks that sig is a recorder's signature over the Definition
// (fullKey, contentHash, version). The content hash must be the one the
// caller computed from the bytes it holds. It returns the signer's
// certificate.
func (v *Verifier) Verify(fullKey, contentHash uint64, version uint16, sig Signature) (*x509.Certificate, error) {
	if sig.Empty() {
		return nil, ErrUnsigned
	}
	leaf, err := x509.ParseCertificate(sig.Cert)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: v.roots, CurrentTime: now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUntrusted, leaf.Subject.CommonName, err)
	}
	if !hasRole(leaf) {
		return nil, fmt.Errorf("%q: %w", leaf.Subject.CommonName, ErrNoRole)
	}
	v.mu.RLock()
	denied := v.denied[Serial(leaf)]
	v.mu.RUnlock()
	if denied {
		return nil, fmt.Errorf("%q serial %s: %w", leaf.Subject.CommonName, Serial(leaf), ErrRevoked)
	}
	if err := checkSig(leaf, Message(fullKey, contentHash, version), sig.Sig); err != nil {
		return nil, fmt.Errorf("%w (signer %q): %v", ErrBadSignature, leaf.Subject.CommonName, err)
	}
	return leaf, nil
}

func checkSig(leaf *x509.Certificate, msg, sig []byte) error {
	switch pub := leaf.PublicKey.(type) {
	case *ecdsa.PublicKey:
		d := sha256.Sum256(msg)
		if !ecdsa.VerifyASN1(pub, d[:], sig) {
			return errors.New("ECDSA signature invalid")
		}
	case ed25519.PublicKey:
		if !ed25519.Verify(pub, msg, sig) {
			return errors.New("Ed25519 signature invalid")
		}
	default:
		return fmt.Errorf("public key %T is not ECDSA or Ed25519", leaf.PublicKey)
	}
	return nil
}

func hasRole(c *x509.Certificate) bool {
	for _, u := range c.URIs {
		if u != nil && u.String() == RecorderURI {
			return true
		}
	}
	return false
}

// RecorderSAN is RecorderURI parsed, for a CA's certificate template.
func RecorderSAN() *url.URL {
	u, err := url.Parse(RecorderURI)
	if err != nil {
		panic(err) // a constant
	}
	return u
}

// Load makes a node's Signer and Verifier from its TLS files (etcd's
// --cert-file, --key-file, --trusted-ca-file): the Verifier trusts the
// CAs in caFile; the Signer is nil when the node's certificate lacks the
// recorder role (the node then signs nothing, and its peers record what it
// sends them).
func Load(certFile, keyFile, caFile string) (*Signer, *Verifier, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("defsig: %s, %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, fmt.Errorf("defsig: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("defsig: %s: no PEM certificate in it", caFile)
	}
	s, err := NewSigner(cert)
	if errors.Is(err, ErrNoRole) {
		s, err = nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return s, NewVerifier(pool), nil
}

// ErrMalformed is a stored signature whose encoding does not read.
var ErrMalformed = errors.New("defsig: the stored signature does not read")

// Encode is s as a store keeps it beside an image (diskstore.Item's
// Signature): the signature's length (u16, little endian), the signature,
// the signer's certificate (DER). An empty s encodes as nil.
func (s Signature) Encode() []byte {
	if s.Empty() {
		return nil
	}
	b := make([]byte, 0, 2+len(s.Sig)+len(s.Cert))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s.Sig)))
	b = append(b, s.Sig...)
	return append(b, s.Cert...)
}

// Decode reads a signature Encode made (nil or empty: no signature).
func Decode(b []byte) (Signature, error) {
	if len(b) == 0 {
		return Signature{}, nil
	}
	if len(b) < 2 {
		return Signature{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	n := int(binary.LittleEndian.Uint16(b))
	if n == 0 || 2+n >= len(b) {
		return Signature{}, fmt.Errorf("%w: a signature of %d bytes in %d", ErrMalformed, n, len(b))
	}
	return Signature{Sig: b[2 : 2+n : 2+n], Cert: b[2+n:]}, nil
}

// CheckSelf checks sig over the Definition against the certificate it
// carries, trusting no CA: what a store verify without --trusted-ca-file
// can say (a signature or image changed since it was signed fails; a
// stranger's good signature passes). It returns the signer's certificate.
func CheckSelf(fullKey, contentHash uint64, version uint16, sig Signature) (*x509.Certificate, error) {
	if sig.Empty() {
		return nil, ErrUnsigned
	}
	leaf, err := x509.ParseCertificate(sig.Cert)
	if err != nil {
		return nil, fmt.Errorf("%w: the signer's certificate: %v", ErrMalformed, err)
	}
	if err := checkSig(leaf, Message(fullKey, contentHash, version), sig.Sig); err != nil {
		return leaf, fmt.Errorf("%w (signer %q): %v", ErrBadSignature, leaf.Subject.CommonName, err)
	}
	return leaf, nil
}

// Describe names a signer's certificate for an operator: its subject,
// serial (Serial's form), issuer and validity.
func Describe(c *x509.Certificate) string {
	return fmt.Sprintf("subject %q, serial %s, issuer %q, valid %s to %s", c.Subject.String(), Serial(c), c.Issuer.String(),
		c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
}
