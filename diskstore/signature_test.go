package diskstore

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestSignatureKeptBesideImage: a signature put with an image is kept in
// its record and read back by a fresh store's load, list, Verify and
// ReadPack; an image put without one reads as unsigned. A signature
// changed on disk does not make the image bad (it verifies on its own,
// which the caller checks): the load still succeeds and returns the
// changed bytes. A pack of format 1 (before signatures) reads as unsigned.
func TestSignatureKeptBesideImage(t *testing.T) {
	dir := t.TempDir()
	d1, img1 := testDef(0x5161, 12)
	d2, img2 := testDef(0x5162, 12)
	sig := []byte("\x04\x00SIGNcertificate DER")
	if _, err := open(t, dir, 0).PutBatch([]Item{{Def: d1, Image: img1, Model: "m", Signature: sig}, {Def: d2, Image: img2, Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, 0)
	for _, c := range []struct {
		fk   uint64
		want []byte
	}{{0x5161, sig}, {0x5162, nil}} {
		l, err := s.Load(c.fk, "m")
		if l == nil || err != nil {
			t.Fatalf("load %x: %v", c.fk, err)
		}
		s.Unpin(c.fk)
		if !bytes.Equal(l.Signature, c.want) || l.Entry.Signed != (c.want != nil) {
			t.Fatalf("load %x: signature %q (signed %v), want %q", c.fk, l.Signature, l.Entry.Signed, c.want)
		}
	}
	r, err := s.Verify()
	if err != nil || len(r.Problems) != 0 || len(r.Signed) != 1 || r.Signed[0].FullKey != 0x5161 || !bytes.Equal(r.Signed[0].Signature, sig) || r.Signed[0].Hash != d1.ContentHash {
		t.Fatalf("verify: %v, %+v", err, r)
	}
	list := must(s.List())(t)
	packPath := filepath.Join(dir, "packs", list[0].Pack)
	b := must(os.ReadFile(packPath))(t)
	recs := must(ReadPack(b))(t)
	var at int64 = -1
	for _, rec := range recs {
		if rec.Entry.FullKey == "0000000000005161" {
			if !bytes.Equal(rec.Signature, sig) {
				t.Fatalf("ReadPack: signature %q, want %q", rec.Signature, sig)
			}
			at = rec.ImageOffset - int64(len(sig)) + 3
		}
	}
	if at < 0 {
		t.Fatal("ReadPack: no record of 5161")
	}

	t.Run("changed", func(t *testing.T) {
		c := bytes.Clone(b)
		c[at] ^= 0x20
		dir2 := t.TempDir()
		copyStore(t, dir, dir2, list[0].Pack, c)
		s := open(t, dir2, 0)
		l, err := s.Load(0x5161, "m")
		if l == nil || err != nil {
			t.Fatalf("load with a changed signature: %v (the image is still good)", err)
		}
		s.Unpin(0x5161)
		if bytes.Equal(l.Signature, sig) || len(l.Signature) != len(sig) {
			t.Fatalf("signature %q read back, want the changed bytes", l.Signature)
		}
		if r, err := s.Verify(); err != nil || len(r.Problems) != 0 || len(r.Signed) != 1 || bytes.Equal(r.Signed[0].Signature, sig) {
			t.Fatalf("verify: %v, %+v", err, r)
		}
	})
	t.Run("format-1", func(t *testing.T) {
		dir3 := t.TempDir()
		d3, img3 := testDef(0x5163, 8)
		mustPut(t, open(t, dir3, 0), d3, img3, "m")
		name := must(open(t, dir3, 0).List())(t)[0].Pack
		p := filepath.Join(dir3, "packs", name)
		c := must(os.ReadFile(p))(t)
		binary.LittleEndian.PutUint32(c[4:], packFormatV1)
		if err := os.WriteFile(p, c, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := open(t, dir3, 0).Load(0x5163, "m")
		if l == nil || err != nil || l.Signature != nil {
			t.Fatalf("a format 1 pack's load: %v, %v", l, err)
		}
	})
}

// copyStore makes a store in dst with the packs of src, pack name's bytes
// replaced with b.
func copyStore(t *testing.T, src, dst, name string, b []byte) {
	t.Helper()
	open(t, dst, 0)
	ents := must(os.ReadDir(filepath.Join(src, "packs")))(t)
	for _, e := range ents {
		data := b
		if e.Name() != name {
			data = must(os.ReadFile(filepath.Join(src, "packs", e.Name())))(t)
		}
		if err := os.WriteFile(filepath.Join(dst, "packs", e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
