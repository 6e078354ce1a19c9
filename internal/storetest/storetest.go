// Package storetest lists the images of a Definition store's packs, for
// tests that look at or damage what a store wrote.
package storetest

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hbg-dev/hbg/diskstore"
)

// Image is one image in a store's packs: the pack's path, where the image
// lies in it, and its entry.
type Image struct {
	Pack   string
	Off, N int
	Entry  diskstore.Entry
}

// Images lists the images of the store in dir, pack by pack (in the
// packs' name order), each as the pack's table of contents places it.
func Images(t testing.TB, dir string) []Image {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.hbgp"))
	sort.Strings(packs)
	var out []Image
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
			out = append(out, Image{Pack: p, Off: int(r.ImageOffset), N: int(r.Entry.Bytes), Entry: r.Entry})
		}
	}
	return out
}
