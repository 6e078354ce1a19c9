package diskstore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPlantedFilesEnd: a named pipe or a symbolic link to a device in
// place of a pack, or beside it named as one, makes Open, Load, Verify and
// GC refuse that file and end, instead of blocking in open(2) on the pipe
// (which hung run and store verify past SIGTERM) or reading /dev/zero
// without end.
func TestPlantedFilesEnd(t *testing.T) {
	plant := map[string]func(t *testing.T, p string){
		"fifo": func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		},
		"symlink to /dev/zero": func(t *testing.T, p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		},
	}
	for kind, mk := range plant {
		for _, where := range []string{"pack", "beside"} {
			t.Run(kind+" as "+where, func(t *testing.T) {
				dir := t.TempDir()
				d, img := testDef(0xabc, 20)
				s := open(t, dir, 0)
				mustPut(t, s, d, img, "m")
				p, _ := packOf(t, s, 0xabc)
				if where == "pack" {
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
				} else {
					p = filepath.Join(dir, "packs", hex16(1)+"-00000000"+packSuffix)
				}
				mk(t, p)
				// s read the pack's table before: its load opens the
				// planted file.
				if got, _ := s.Load(0xabc, "m"); got != nil && where == "pack" {
					t.Fatal("a planted " + kind + " loaded as a Definition")
				}
				done := make(chan string, 1)
				go func() {
					s, err := Open(dir, 0)
					if err != nil {
						done <- "open: " + err.Error()
						return
					}
					defer s.Close()
					if got, _ := s.Load(0xabc, "m"); (got != nil) != (where == "beside") {
						done <- "a planted " + kind + ": the load is wrong"
						return
					}
					if _, err := s.Verify(); err != nil {
						done <- "verify: " + err.Error()
						return
					}
					if _, err := s.GC(1); err != nil {
						done <- "gc: " + err.Error()
						return
					}
					done <- ""
				}()
				select {
				case msg := <-done:
					if msg != "" {
						t.Fatal(msg)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("the store did not end with a %s as its %s", kind, where)
				}
			})
		}
	}
}
