package diskstore

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// snapshot is every path under dir with its size and mtime: what a
// refused Open must leave as it was.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = info.Mode().String() + " " + info.ModTime().String() + " " + string(rune(info.Size()%1000+'0'))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNotAStoreRefused: a directory that holds files and no marker (a
// mistyped --store, a home directory, the system's temporary directory)
// is refused at Open with ErrNotStore, and nothing in it is created,
// removed or touched, whatever look-alike subdirectories it has. On the
// code before, Open made packs/, tmp/, quarantine/ and gc emptied every
// look-alike subdirectory.
func TestNotAStoreRefused(t *testing.T) {
	layouts := map[string][]string{
		"look-alike subdirectories": {"tmp/notes.txt", "quarantine/thesis.tex", "objects/photo.jpg", "index/index.html"},
		"packs too":                 {"packs/a.hbgp", "tmp/pack-1", "quarantine/x", "lock"},
		"a user's top level":        {"notes.txt", "src/main.go"},
		"only tmp/":                 {"tmp/pack-12"},
		"pack names, a user's file": {"packs/" + hex16(1) + "-00000000" + packSuffix, "README"},
	}
	for name, files := range layouts {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range files {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(dir, f), []byte("a user's "+f))
			}
			old := time.Now().Add(-3 * time.Hour)
			for _, f := range files {
				_ = os.Chtimes(filepath.Join(dir, f), old, old)
			}
			before := snapshot(t, dir)
			s, err := Open(dir, 64<<10)
			if err == nil {
				_, _ = s.GC(1)
				s.Close()
			}
			if !errors.Is(err, ErrNotStore) {
				t.Fatalf("Open of a directory with %v: %v, want ErrNotStore", files, err)
			}
			if after := snapshot(t, dir); len(after) != len(before) {
				t.Fatalf("a refused Open changed the directory: %d paths before, %d after", len(before), len(after))
			} else {
				for p, v := range before {
					if after[p] != v {
						t.Fatalf("a refused Open changed %s: %s, now %s", p, v, after[p])
					}
				}
			}
		})
	}
}

// TestMarkerMade: a new or empty directory becomes a store with the
// marker; a marker of a newer format or a foreign file in its place is
// refused; a store an earlier hbg made (its layout, no marker) is adopted
// with its entries.
func TestMarkerMade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "store")
	s := open(t, dir, 0)
	d, img := testDef(1, 10)
	mustPut(t, s, d, img, "m")
	s.Close()
	b, err := os.ReadFile(filepath.Join(dir, markerName))
	if err != nil || !strings.HasPrefix(string(b), markerHead) {
		t.Fatalf("marker: %q, %v", b, err)
	}
	// An earlier hbg's store: the same files, no marker.
	if err := os.Remove(filepath.Join(dir, markerName)); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, 0)
	if l, err := s.Load(1, "m"); err != nil || l == nil {
		t.Fatalf("an earlier hbg's store, adopted: load %v, %v", l, err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, markerName)); err != nil {
		t.Fatalf("adopted without its marker: %v", err)
	}
	write(t, filepath.Join(dir, markerName), []byte(markerHead+"9\n"))
	if _, err := Open(dir, 0); !errors.Is(err, ErrNewerStore) {
		t.Fatalf("a newer store's marker: %v, want ErrNewerStore", err)
	}
	write(t, filepath.Join(dir, markerName), []byte("hello"))
	if _, err := Open(dir, 0); !errors.Is(err, ErrNotStore) {
		t.Fatalf("a marker that is not hbg's: %v, want ErrNotStore", err)
	}
}

// TestClaimConcurrent: processes that open one new directory at once all
// get the store; another's temporary marker, or the marker it linked
// between our read and our listing, is hbg's own and never "not a store".
func TestClaimConcurrent(t *testing.T) {
	for round := range 20 {
		dir := filepath.Join(t.TempDir(), "store")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() { errs <- claim(dir) }()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok, err := readMarker(dir); !ok || err != nil {
			t.Fatalf("round %d: marker %v, %v", round, ok, err)
		}
	}
	// A temporary marker left by a killed process is no user's file.
	dir := t.TempDir()
	write(t, filepath.Join(dir, "."+markerName+"-123"), []byte(markerHead))
	if err := claim(dir); err != nil {
		t.Fatalf("a killed claim's temporary marker: %v", err)
	}
}

// TestMaintenanceLeavesForeignNames: in a store of hbg's, a file that is
// not of hbg's layout (a user's file dropped into tmp/ or quarantine/)
// is left by gc and by eviction, and named by verify.
func TestMaintenanceLeavesForeignNames(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 64<<10)
	d, img := testDef(1, 10)
	mustPut(t, s, d, img, "m")
	planted := []string{"tmp/notes.txt", "quarantine/thesis.tex", "packs/keep.me"}
	for _, p := range planted {
		write(t, filepath.Join(dir, p), []byte("a user's"))
	}
	if _, err := s.GC(1); err != nil {
		t.Fatal(err)
	}
	for _, p := range planted {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Fatalf("gc removed %s, a name hbg never makes: %v", p, err)
		}
	}
	v, err := s.Verify()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range planted {
		found := false
		for _, pr := range v.Problems {
			found = found || strings.HasSuffix(pr.Path, p)
		}
		if !found {
			t.Errorf("verify does not name %s: %+v", p, v.Problems)
		}
	}
}

// TestNoTouchThroughHardLink: a pack with a second name outside the store
// (a hard link planted to a user's file, or the other way round) is not
// touched by a load's last-use update, which would rewrite the outside
// file's mtime; on the code before it was.
func TestNoTouchThroughHardLink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	s := open(t, dir, 0)
	d, img := testDef(1, 10)
	mustPut(t, s, d, img, "m")
	names, _ := readDirNames(filepath.Join(dir, "packs"))
	if len(names) != 1 {
		t.Fatalf("packs: %v", names)
	}
	pack := filepath.Join(dir, "packs", names[0])
	old := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	if err := os.Chtimes(pack, old, old); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(outside, "precious")
	if err := os.Link(pack, link); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, 0)
	if l, err := s2.Load(1, "m"); err != nil || l == nil {
		t.Fatalf("load: %v, %v", l, err)
	}
	s2.Unpin(1)
	st, err := os.Stat(link)
	if err != nil {
		t.Fatal(err)
	}
	if !st.ModTime().Equal(old) {
		t.Fatalf("the outside file's mtime moved from %v to %v", old, st.ModTime())
	}
}

// sparsePack writes a consistent pack of n records whose images are each
// imageLen bytes never written (a sparse file of a few KB): its table of
// contents tiles the file exactly, so only the declared lengths are wrong.
func sparsePack(t *testing.T, path string, n int, imageLen uint32) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := append([]byte(packMagic), binary.LittleEndian.AppendUint32(nil, packFormat)...)
	head = append(head, make([]byte, 8)...)
	if _, err := f.WriteAt(head, 0); err != nil {
		t.Fatal(err)
	}
	off := int64(packHeader)
	var toc []byte
	for i := range n {
		hdr := appendRecordHeader(nil, 3, "m", "k", 0, imageLen, uint64(100+i), uint64(200+i))
		hdr = append(hdr, "mk"...)
		if _, err := f.WriteAt(hdr, off); err != nil {
			t.Fatal(err)
		}
		toc = binary.LittleEndian.AppendUint64(toc, uint64(off))
		toc = append(toc, hdr...)
		off += int64(len(hdr)) + int64(imageLen)
	}
	tail := append([]byte(nil), toc...)
	tail = binary.LittleEndian.AppendUint64(tail, uint64(off))
	tail = binary.LittleEndian.AppendUint32(tail, uint32(n))
	tail = binary.LittleEndian.AppendUint32(tail, uint32(len(toc)))
	tail = binary.LittleEndian.AppendUint64(tail, xxhash.Sum64(toc))
	tail = append(tail, footMagic...)
	if _, err := f.WriteAt(tail, off); err != nil {
		t.Fatal(err)
	}
}

// TestSparsePackNotAllocated: a consistent pack that declares 8 images of
// 2 GiB (and one that declares 8 of 200 MiB, under the per-image bound)
// in a sparse file of a few KB is a bad pack: Open, Load, Verify and gc
// allocate nothing near its declared length (on the code before, a load
// allocated 2 GiB and verify 16).
func TestSparsePackNotAllocated(t *testing.T) {
	for _, c := range []struct {
		name string
		len  uint32
		want string
	}{{"2GiB", 2 << 30, "sparse"}, {"200MiB", 200 << 20, "sparse"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			open(t, dir, 0).Close()
			sparsePack(t, filepath.Join(dir, "packs", hex16(5)+"-00000000"+packSuffix), 8, c.len)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			s := open(t, dir, 0)
			if l, err := s.Load(100, "m"); l != nil || err != nil {
				t.Fatalf("load of a sparse pack's entry: %v, %v; want a miss", l, err)
			}
			v, err := s.Verify()
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Problems) != 1 || !strings.Contains(v.Problems[0].Reason, c.want) {
				t.Fatalf("verify: %+v, want one problem saying %q", v.Problems, c.want)
			}
			if r, err := s.GC(0); err != nil || r.BadPacks != 1 {
				t.Fatalf("gc: %+v, %v; want the bad pack removed", r, err)
			}
			runtime.ReadMemStats(&m1)
			if got := m1.TotalAlloc - m0.TotalAlloc; got > 64<<20 {
				t.Fatalf("Open, Load, Verify and gc of a sparse pack allocated %d bytes", got)
			}
		})
	}
}

// TestDeclaredImageBounded: a table of contents that declares an image
// over maxImageBytes is refused before anything reads it, whatever the
// file's length (a file that is not sparse is refused by this alone).
func TestDeclaredImageBounded(t *testing.T) {
	hdr := appendRecordHeader(nil, 3, "m", "k", 0, 2<<30, 1, 2)
	hdr = append(hdr, "mk"...)
	toc := append(binary.LittleEndian.AppendUint64(nil, packHeader), hdr...)
	_, reason := parseTOC(toc, xxhash.Sum64(toc), packHeader+int64(len(hdr))+2<<30, 1, nil)
	if !strings.Contains(reason, "over the") {
		t.Fatalf("a 2 GiB image in a table of contents: %q, want it refused by the bound", reason)
	}
}

// TestVerifyInterrupted: verify and gc with an ended context stop before
// the next record, with the context's error, removing nothing.
func TestVerifyInterrupted(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	for k := uint64(1); k <= 4; k++ {
		d, img := testDef(k, 10)
		mustPut(t, s, d, img, "m")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.VerifyContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("verify: %v, want context.Canceled", err)
	}
	if _, err := s.GCContext(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("gc: %v, want context.Canceled", err)
	}
	if l, _ := s.List(); len(l) != 4 {
		t.Fatalf("an interrupted gc left %d entries of 4", len(l))
	}
}
