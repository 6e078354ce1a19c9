package diskstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLayoutRefused: a store whose subdirectory is a symbolic link (to a
// directory outside it) or not a directory at all is refused at Open, and
// the files outside survive.
func TestLayoutRefused(t *testing.T) {
	for _, sub := range append(append([]string(nil), storeDirs...), legacyDirs...) {
		for _, kind := range []string{"symlink", "file"} {
			t.Run(sub+"/"+kind, func(t *testing.T) {
				dir, outside := t.TempDir(), t.TempDir()
				planted := filepath.Join(outside, "precious")
				write(t, planted, []byte("not the store's"))
				open(t, dir, 0).Close() // hbg's store, marker and all
				p := filepath.Join(dir, sub)
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
				if kind == "symlink" {
					if err := os.Symlink(outside, p); err != nil {
						t.Fatal(err)
					}
				} else {
					write(t, p, []byte("x"))
				}
				s, err := Open(dir, 0)
				if !errors.Is(err, ErrLayout) {
					if s != nil {
						s.Close()
					}
					t.Fatalf("Open of a store whose %s is a %s: %v, want ErrLayout", sub, kind, err)
				}
				if _, err := os.Stat(planted); err != nil {
					t.Fatalf("the file outside the store: %v", err)
				}
			})
		}
	}
}

// TestRemovalStaysInside: a subdirectory swapped for a symbolic link
// after Open (the checks at Open passed) does not lead gc or an eviction
// out of the store: the file planted outside survives both.
func TestRemovalStaysInside(t *testing.T) {
	for _, sub := range []string{"quarantine", "tmp", "packs", "objects", "index"} {
		t.Run(sub, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			s := open(t, dir, 200)
			d, img := testDef(1, 10)
			mustPut(t, s, d, img, "m")
			planted := filepath.Join(outside, "precious.hbgd")
			write(t, planted, []byte("not the store's"))
			p := filepath.Join(dir, sub)
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
			_, _ = s.GC(0)
			for k := uint64(2); k < 6; k++ { // over the limit: evictions
				d, img := testDef(k, 10)
				_ = s.Put(d, img, "m")
			}
			_, _ = s.GC(1)
			if _, err := os.Stat(planted); err != nil {
				t.Fatalf("the file planted outside the store, behind %s/: %v", sub, err)
			}
		})
	}
}
