package actors

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hbg-dev/hbg/diskstore"
)

// storedImage is one image in a store's packs: the pack's path, and where
// the image is in it.
type storedImage struct {
	pack   string
	off, n int64
	entry  diskstore.Entry
}

// storeImages lists the images of the store in dir, pack by pack.
func storeImages(t *testing.T, dir string) []storedImage {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.hbgp"))
	sort.Strings(packs)
	var out []storedImage
	for _, p := range packs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := diskstore.ReadPack(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, r := range recs {
			out = append(out, storedImage{pack: p, off: r.ImageOffset, n: r.Entry.Bytes, entry: r.Entry})
		}
	}
	return out
}

// damage flips the image's last byte.
func (im storedImage) damage(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(im.pack)
	if err != nil {
		t.Fatal(err)
	}
	b[im.off+im.n-1] ^= 0xff
	if err := os.WriteFile(im.pack, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
