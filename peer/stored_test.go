package peer

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/stages"
)

// verifierOf trusts ca's recorders.
func verifierOf(ca *testCA) *defsig.Verifier {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return defsig.NewVerifier(pool)
}

// storedItems is every entry of the store in dir, loaded, with its kept
// signature.
func storedItems(t *testing.T, dir string) []diskstore.Item {
	t.Helper()
	d := must(diskstore.Open(dir, diskstore.DefaultMax))(t)
	defer d.Close()
	var out []diskstore.Item
	for _, e := range must(d.List())(t) {
		var fk uint64
		if _, err := fmt.Sscanf(e.FullKey, "%x", &fk); err != nil {
			t.Fatal(err)
		}
		l := must(d.Load(fk, ""))(t)
		d.Unpin(fk)
		out = append(out, diskstore.Item{Def: l.Def, Image: l.Image, Model: e.Model, Signature: l.Signature})
	}
	return out
}

// servedFrom is a pass of a local node, trusting ca, whose every key's
// owner is a child node serving the store in dir (its verifier trusting
// ca and refusing denied).
func servedFrom(t *testing.T, ca *testCA, dir string, denied []string) (passResult, []Refused) {
	t.Helper()
	owner := startChild(t)
	owner.do(command{Op: "node", Spec: nodeSpec{Nodes: []string{owner.addr}, Owner: owner.addr, StoreDir: dir, TrustCA: ca.cert.Raw, Denied: denied}})
	var refused []Refused
	got := make(chan Refused, 64)
	nd := local(t, nodeSpec{Owner: owner.addr, verifier: verifierOf(ca), onRefused: func(r Refused) { got <- r }}, owner.addr)
	p := nd.pass(0)
	for len(got) > 0 {
		refused = append(refused, <-got)
	}
	return p, refused
}

// TestSignedImageKeptAndPassedOn: a Definition fetched signed is kept in
// the store on disk with its recorder's signature beside it; a node serving
// it from that store later passes the signature on (it has no signing key
// of its own here), so its asker replays it without recording it. A kept
// signature its signer's revocation, a changed signature or another image
// under it no longer verifies is not passed on: the asker records those.
func TestSignedImageKeptAndPassedOn(t *testing.T) {
	ref := must(dsv4Reference())(t)
	ours := newTestCA(t)
	cert, key, serial := ours.recorder(t, time.Now().Add(time.Hour))
	dir := t.TempDir()
	t.Run("kept", func(t *testing.T) {
		bad := startChild(t)
		bad.do(command{Op: "bad", Mode: "signed", SignCert: cert, SignKey: key})
		v := verifierOf(ours)
		nd := local(t, nodeSpec{Owner: bad.addr, verifier: v, StoreDir: dir}, bad.addr)
		p := nd.pass(0)
		checkPass(t, "the node", p, ref.digest)
		if p.Built != 0 || p.Fetched != dsv4Keys {
			t.Fatalf("built %d, fetched %d; want 0, %d", p.Built, p.Fetched, dsv4Keys)
		}
		if errs := nd.rt.FlushStore(); len(errs) > 0 {
			t.Fatal(errs[0])
		}
	})
	items := storedItems(t, dir)
	if len(items) != dsv4Keys {
		t.Fatalf("the store keeps %d Definitions, want %d", len(items), dsv4Keys)
	}
	v := verifierOf(ours)
	for _, it := range items {
		sig := must(defsig.Decode(it.Signature))(t)
		leaf, err := v.Verify(it.Def.FullKey, it.Def.ContentHash, stages.DefinitionVersion, sig)
		if err != nil || defsig.Serial(leaf) != serial {
			t.Fatalf("full_key %016x: kept signature %d bytes: %v (want the recorder's, serial %s)", it.Def.FullKey, len(it.Signature), err, serial)
		}
	}
	t.Run("passed-on", func(t *testing.T) {
		p, refused := servedFrom(t, ours, dir, nil)
		checkPass(t, "the asker", p, ref.digest)
		if p.Built != 0 || p.Fetched != dsv4Keys || len(refused) != 0 {
			t.Fatalf("built %d, fetched %d, refused %v; want 0, %d, none (warnings %q)", p.Built, p.Fetched, refused, dsv4Keys, p.Warnings)
		}
	})
	t.Run("revoked-since", func(t *testing.T) {
		p, refused := servedFrom(t, ours, dir, []string{serial})
		checkPass(t, "the asker", p, ref.digest)
		if p.Built != dsv4Keys || p.Fetched != 0 || len(refused) != dsv4Keys {
			t.Fatalf("built %d, fetched %d, %d refused; want %d, 0, %d", p.Built, p.Fetched, len(refused), dsv4Keys, dsv4Keys)
		}
	})
	t.Run("changed-on-disk", func(t *testing.T) {
		// Half the records keep a signature with one byte changed, the
		// other half the true signature beside another image (the chain
		// forgery, which decodes and keeps its own content hash).
		spoiled := t.TempDir()
		var out []diskstore.Item
		for i, it := range items {
			if i%2 == 0 {
				it.Signature = slices.Clone(it.Signature)
				it.Signature[4] ^= 0x01 // inside the signature, after its length
			} else {
				it.Image = chain(it.Image)
				d, _, err := stages.DecodeDefinitionHost(it.Image)
				if err != nil {
					t.Fatal(err)
				}
				it.Def = d
			}
			out = append(out, it)
		}
		d := must(diskstore.Open(spoiled, diskstore.DefaultMax))(t)
		if _, err := d.PutBatch(out); err != nil {
			t.Fatal(err)
		}
		d.Close()
		p, refused := servedFrom(t, ours, spoiled, nil)
		checkPass(t, "the asker", p, ref.digest)
		if p.Built != dsv4Keys || p.Fetched != 0 || len(refused) != dsv4Keys {
			t.Fatalf("built %d, fetched %d, %d refused; want %d, 0, %d", p.Built, p.Fetched, len(refused), dsv4Keys, dsv4Keys)
		}
		for _, r := range refused {
			if !strings.Contains(r.Why, strings.TrimPrefix(defsig.ErrUnsigned.Error(), "defsig: ")) {
				t.Fatalf("refused because %q, want %q: the owner does not pass on a kept signature that does not verify", r.Why, defsig.ErrUnsigned)
			}
		}
	})
}

// TestRefuseUnsignedFails: with Config.RefuseUnsigned, an image whose
// signature is refused fails the pass, saying why, and the node records
// nothing in its place.
func TestRefuseUnsignedFails(t *testing.T) {
	ours, other := newTestCA(t), newTestCA(t)
	stranger, strangerKey, _ := other.recorder(t, time.Now().Add(time.Hour))
	for _, c := range []struct {
		mode      string
		cert, key []byte
		want      error
	}{
		{"unsigned", nil, nil, defsig.ErrUnsigned},
		{"stranger", stranger, strangerKey, defsig.ErrUntrusted},
	} {
		t.Run(c.mode, func(t *testing.T) {
			bad := startChild(t)
			bad.do(command{Op: "bad", Mode: c.mode, SignCert: c.cert, SignKey: c.key})
			nd := local(t, nodeSpec{Owner: bad.addr, verifier: verifierOf(ours), refuseUnsigned: true}, bad.addr)
			p := nd.pass(0)
			for _, want := range []error{ErrRefusedImage, c.want} {
				if !strings.Contains(p.Err, strings.TrimPrefix(want.Error(), "defsig: ")) {
					t.Fatalf("pass error %q, want it to say %q", p.Err, want)
				}
			}
			if n := nd.rt.Stats.Recorded.Load(); n != 0 {
				t.Fatalf("%d Definitions recorded, want 0", n)
			}
		})
	}
}

// TestPublishedImageKeptSigned: an image another node recorded and
// Published to this node, its owner, signed, is kept in the owner's own
// store with the recorder's signature when the owner's own pass takes it
// (the owner recorded nothing, so it must not later sign it as its own).
func TestPublishedImageKeptSigned(t *testing.T) {
	ref := must(dsv4Reference())(t)
	ours := newTestCA(t)
	cert, key, serial := ours.recorder(t, time.Now().Add(time.Hour))
	self := must(host())(t).Address()
	dir := t.TempDir()
	v := verifierOf(ours)
	// The owner's node list matters not: Owner makes it every key's owner.
	owner := local(t, nodeSpec{Owner: self, verifier: v, StoreDir: dir})
	rec := startChild(t)
	rec.do(command{Op: "node", Spec: nodeSpec{Nodes: []string{rec.addr, self}, Owner: self, SignCert: cert, SignKey: key}})
	if r := rec.do(command{Op: "pass"}); r.Pass == nil || r.Pass.Built != dsv4Keys {
		t.Fatalf("the recorder's pass: %+v", r.Pass)
	}
	p := owner.pass(0)
	checkPass(t, "the owner", p, ref.digest)
	if p.Built != 0 {
		t.Fatalf("the owner built %d, want 0 (warnings %q)", p.Built, p.Warnings)
	}
	if errs := owner.rt.FlushStore(); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	items := storedItems(t, dir)
	if len(items) != dsv4Keys {
		t.Fatalf("the owner's store keeps %d, want %d", len(items), dsv4Keys)
	}
	for _, it := range items {
		sig, err := defsig.Decode(it.Signature)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := v.Verify(it.Def.FullKey, it.Def.ContentHash, stages.DefinitionVersion, sig)
		if err != nil || defsig.Serial(leaf) != serial {
			t.Fatalf("full_key %016x kept with signature of %d bytes: %v; want the recorder's (serial %s)", it.Def.FullKey, len(it.Signature), err, serial)
		}
	}
}
