package defsig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEncodedSignatureChecks: a signature as a store keeps it decodes to
// itself and checks against its own certificate (no CA); a byte changed
// in it, or a check over another content hash, fails; bytes that do not
// read are ErrMalformed, none is ErrUnsigned.
func TestEncodedSignatureChecks(t *testing.T) {
	c := newCA(t)
	s, err := NewSigner(c.issue(t, true, time.Now().Add(time.Hour), false))
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := s.Sign(1, 2, 3)
	b := sig.Encode()
	got, err := Decode(b)
	if err != nil || string(got.Sig) != string(sig.Sig) || string(got.Cert) != string(sig.Cert) {
		t.Fatalf("decode: %v", err)
	}
	if _, err := CheckSelf(1, 2, 3, got); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckSelf(1, 9, 3, got); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("over another hash: %v", err)
	}
	b[4] ^= 1
	if changed, err := Decode(b); err != nil {
		t.Fatal(err)
	} else if _, err := CheckSelf(1, 2, 3, changed); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("changed: %v", err)
	}
	for _, bad := range [][]byte{{1}, {0, 0, 1}, {200, 0, 1, 2}} {
		if _, err := Decode(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("decode %v: %v", bad, err)
		}
	}
	if _, err := CheckSelf(1, 2, 3, Signature{}); !errors.Is(err, ErrUnsigned) {
		t.Fatal(err)
	}
}

// TestDenyListForms: a deny list takes a serial as openssl and Serial
// print it, and says file:line of one that does not read.
func TestDenyListForms(t *testing.T) {
	for _, in := range []string{"1a2b", "serial=1A2B", "0x1a2b", "1A:2B", "00001a2b", " 1a2b "} {
		if s, err := ParseSerial(in); err != nil || s != "1a2b" {
			t.Fatalf("ParseSerial(%q) = %q, %v", in, s, err)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "revoked")
	if err := os.WriteFile(p, []byte("# revoked nodes\n1a2b # leaked\n\nserial=03\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDenyList(p)
	if err != nil || strings.Join(got, ",") != "1a2b,3" {
		t.Fatalf("%q, %v", got, err)
	}
	if err := os.WriteFile(p, []byte("1a2b\nnode-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDenyList(p); err == nil || !strings.Contains(err.Error(), p+":2:") || !strings.Contains(err.Error(), `"node-a"`) {
		t.Fatalf("a bad line: %v", err)
	}
}
