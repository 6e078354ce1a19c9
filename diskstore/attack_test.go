package diskstore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestPlantedEntriesStayOutside: files planted in objects/ and index/
// after Open (a symbolic link and a hard link to files outside the store,
// named as entries are) are removed or moved aside as the store's own
// names at most: gc, eviction, Verify and Load never delete, truncate or
// write the files outside.
func TestPlantedEntriesStayOutside(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	s := open(t, dir, 200)
	d, img := testDef(1, 10)
	mustPut(t, s, d, img, "m")
	want := []byte("not the store's")
	var planted []string
	for i, p := range []struct {
		name string
		link func(string, string) error
	}{
		{"objects/" + hex16(0xaa) + hex16(0xbb) + hex16(0xcc) + hex16(0xdd) + ".hbgd", os.Symlink},
		{"objects/" + hex16(0xee) + hex16(0xbb) + hex16(0xcc) + hex16(0xdd) + ".hbgd", os.Link},
		{filepath.Base(s.indexPath(7)), os.Symlink},
		{filepath.Base(s.indexPath(8)), os.Link},
	} {
		out := filepath.Join(outside, "precious", hex16(uint64(i)))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, out, want)
		name := p.name
		if filepath.Dir(name) == "." {
			name = filepath.Join(filepath.Base(filepath.Dir(s.indexPath(7))), name)
		}
		if err := p.link(out, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, out)
	}
	_, _ = s.Verify()
	for _, k := range []uint64{1, 7, 8} {
		if l, _ := s.Load(k, ""); l != nil {
			s.Unpin(k)
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
