package diskstore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestPlantedEntriesStayOutside: files planted in packs/ and in the legacy
// objects/ and index/ after Open (symbolic and hard links to files outside
// the store, named as packs and entries are) are removed or moved aside as
// the store's own names at most: gc, eviction, Verify and Load never
// delete, truncate or write the files outside.
func TestPlantedEntriesStayOutside(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	s := open(t, dir, 200)
	d, img := testDef(1, 10)
	mustPut(t, s, d, img, "m")
	for _, sub := range legacyDirs {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := []byte("not the store's")
	var planted []string
	for i, p := range []struct {
		name string
		link func(string, string) error
	}{
		{"packs/" + hex16(0xaa) + "-00000000" + packSuffix, os.Symlink},
		{"packs/" + hex16(0xbb) + "-00000000" + packSuffix, os.Link},
		{"objects/" + hex16(0xcc) + ".hbgd", os.Symlink},
		{"objects/" + hex16(0xdd) + ".hbgd", os.Link},
		{"index/" + hex16(7) + "-v3.json", os.Symlink},
		{"index/" + hex16(8) + "-v3.json", os.Link},
	} {
		out := filepath.Join(outside, "precious", hex16(uint64(i)))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, out, want)
		if err := p.link(out, filepath.Join(dir, p.name)); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, out)
	}
	_, _ = s.Verify()
	s2 := open(t, dir, 200)
	for _, k := range []uint64{1, 7, 8} {
		for _, st := range []*Store{s, s2} {
			if l, _ := st.Load(k, ""); l != nil {
				st.Unpin(k)
			}
		}
	}
	_, _ = s.GC(0)
	for k := uint64(2); k < 6; k++ { // over the limit: evictions
		d, img := testDef(k, 10)
		_ = s.Put(d, img, "m")
	}
	_, _ = s.GC(1)
	for _, p := range planted {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("the file planted outside the store, %s: %q, %v", p, got, err)
		}
	}
}
