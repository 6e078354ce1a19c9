package diskstore

import (
	"os"
	"path/filepath"
	"testing"
)

// An entry whose index is lost or unreadable while its image is damaged
// too: the key is recorded again and Put, and the next load must find the
// new image, not the damaged one still under its name.
func TestPutReplacesDamagedImage(t *testing.T) {
	for _, c := range []struct {
		name  string
		index func(t *testing.T, idx string)
	}{
		{"index removed", func(t *testing.T, idx string) {
			if err := os.Remove(idx); err != nil {
				t.Fatal(err)
			}
		}},
		{"index cut short", func(t *testing.T, idx string) { write(t, idx, read(t, idx)[:10]) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 0)
			d, img := testDef(0x51, 12)
			mustPut(t, s, d, img, "m/full@1")
			obj := s.objectPath(hex16(d.ContentHash))
			write(t, obj, img[:100])
			c.index(t, s.indexPath(0x51))

			if got, err := s.Load(0x51, "m/full@1"); got != nil {
				t.Fatalf("first load: %v, %v; want a miss or a rejection", got, err)
			}
			mustPut(t, s, d, img, "m/full@1") // recorded again
			got, err := s.Load(0x51, "m/full@1")
			if err != nil || got == nil {
				t.Fatalf("load after the Put: %v, %v; want the image just put", got, err)
			}
			s.Unpin(0x51)
			if q, _ := os.ReadDir(filepath.Join(dir, "quarantine")); len(q) == 0 {
				t.Fatal("the damaged image was not moved aside")
			}
		})
	}
}
