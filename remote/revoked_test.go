package remote

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/internal/etcdtest"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/stages"
)

// TestRevokedInEtcd: a node certificate revoked in the cluster's deny list
// in etcd (Revoke, hbgrun cluster revoke) has its Definition signatures
// refused by a node following the list from the moment its watch hears
// it, and by one that starts later from its first read; another cluster's
// list in the same etcd is not this one's, and the node's static list
// (NodeConfig.Revoked) holds beside etcd's.
func TestRevokedInEtcd(t *testing.T) {
	e, _ := testEtcd(t, "t-revoke")
	pki := etcdtest.NewPKI(t, t.TempDir(), "cluster CA")
	rec := pki.Issue(t, "recorder-a", defsig.RecorderSAN())
	other := pki.Issue(t, "recorder-b", defsig.RecorderSAN())
	signer, v, err := defsig.Load(rec[0], rec[1], pki.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, _, err := defsig.Load(other[0], other[1], pki.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := signer.Sign(7, 8, stages.DefinitionVersion)
	otherSig, _ := otherSigner.Sign(7, 8, stages.DefinitionVersion)
	serial := serialOf(t, v, sig)
	otherSerial := serialOf(t, v, otherSig)
	changed := make(chan []string, 16)
	w, err := watchRevoked(e, v, []string{otherSerial}, func(s []string) { changed <- s })
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop()
	waitDenied(t, changed, otherSerial)
	if _, err := v.Verify(7, 8, stages.DefinitionVersion, sig); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}
	elsewhere := e
	elsewhere.Cluster = "t-revoke-other"
	if err := Revoke(context.Background(), elsewhere, serial, "another cluster's"); err != nil {
		t.Fatal(err)
	}
	if err := Revoke(context.Background(), e, strings.ToUpper("0x"+serial), "key leaked\nto a log"); err != nil {
		t.Fatal(err)
	}
	waitDenied(t, changed, serial)
	for _, s := range []defsig.Signature{sig, otherSig} {
		if _, err := v.Verify(7, 8, stages.DefinitionVersion, s); !errors.Is(err, defsig.ErrRevoked) {
			t.Fatalf("after the revocation: %v, want %v", err, defsig.ErrRevoked)
		}
	}
	m, err := Revoked(context.Background(), e)
	if err != nil || len(m) != 1 || !strings.HasSuffix(m[serial], ": key leaked to a log") {
		t.Fatalf("the deny list: %v, %q", err, m)
	}
	// A node that starts later reads it.
	_, later, _ := defsig.Load(rec[0], rec[1], pki.CAFile())
	w2, err := watchRevoked(e, later, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.stop()
	if _, err := later.Verify(7, 8, stages.DefinitionVersion, sig); !errors.Is(err, defsig.ErrRevoked) {
		t.Fatalf("a node started after the revocation: %v, want %v", err, defsig.ErrRevoked)
	}
	if _, err := later.Verify(7, 8, stages.DefinitionVersion, otherSig); err != nil {
		t.Fatalf("a serial only another cluster, or another node's file, revoked: %v", err)
	}
}

func serialOf(t *testing.T, v *defsig.Verifier, s defsig.Signature) string {
	t.Helper()
	leaf, err := v.Verify(7, 8, stages.DefinitionVersion, s)
	if err != nil {
		t.Fatal(err)
	}
	return defsig.Serial(leaf)
}

// waitDenied waits for a deny list that holds serial.
func waitDenied(t *testing.T, ch <-chan []string, serial string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case s := <-ch:
			if slices.Contains(s, serial) {
				return
			}
		case <-deadline:
			t.Fatalf("no deny list with serial %s within 30s", serial)
		}
	}
}
