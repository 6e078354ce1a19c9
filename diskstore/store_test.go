package diskstore

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/hbg-dev/hbg/stages"
)

// testDef is a Definition of n chained dummy nodes; its image is some
// tens of bytes per node.
func testDef(fullKey uint64, n int) (*stages.Definition, []byte) {
	d := &stages.Definition{FullKey: fullKey, Key: "layer", HeapBytes: 4096}
	for i := 0; i < n; i++ {
		nd := stages.NodeDesc{Kind: stages.KindDummy, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1,
			Fanin: stages.Span{Off: uint32(len(d.Fanin))}}
		if i > 0 {
			d.Fanin = append(d.Fanin, uint32(i-1))
			nd.Fanin.N = 1
		}
		d.Nodes = append(d.Nodes, nd)
	}
	img := stages.EncodeDefinition(d)
	return d, img
}

func open(t testing.TB, dir string, max int64) *Store {
	t.Helper()
	s, err := Open(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustPut(t testing.TB, s *Store, d *stages.Definition, img []byte, model string) {
	t.Helper()
	if err := s.Put(d, img, model); err != nil {
		t.Fatal(err)
	}
}

func TestPutThenLoadInAnotherStore(t *testing.T) {
	dir := t.TempDir()
	d, img := testDef(0xabc, 20)
	mustPut(t, open(t, dir, 0), d, img, "m/full@1")

	s := open(t, dir, 0) // as a fresh process would
	got, err := s.Load(0xabc, "m/full@1")
	if err != nil || got == nil {
		t.Fatalf("load: %v, %v", got, err)
	}
	// A load decodes the host's part (the device decodes the image).
	full, err := stages.DecodeDefinition(img)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Image) != string(img) || got.Def.ContentHash != d.ContentHash || got.Def.FullKey != d.FullKey ||
		got.Def.Key != d.Key || len(got.Def.Nodes) != len(d.Nodes) || !slices.Equal(got.Written, full.WrittenSlots()) {
		t.Fatal("loaded Definition differs from the one put")
	}
	if !s.Pinned(0xabc) {
		t.Fatal("a loaded entry is not pinned")
	}
	s.Unpin(0xabc)
	if s.Pinned(0xabc) {
		t.Fatal("still pinned after Unpin")
	}
	if got, err := s.Load(0xdef, ""); got != nil || err != nil {
		t.Fatalf("a key never stored: %v, %v; want a miss", got, err)
	}
	if r, err := s.Verify(); err != nil || len(r.Problems) != 0 || r.Entries != 1 || r.Images != 1 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
}

// rehash sets an image's content hash field to its content hash, as an
// image of another format version written by another hbg would have.
func rehash(b []byte) {
	const off = 16
	binary.LittleEndian.PutUint64(b[off:], 0)
	binary.LittleEndian.PutUint64(b[off:], xxhash.Sum64(b))
}

// packOf is the path of the pack holding fullKey's entry, and the entry.
func packOf(t testing.TB, s *Store, fullKey uint64) (string, packEntry) {
	t.Helper()
	p, e, ok := s.lookup(fullKey)
	if !ok {
		t.Fatalf("no entry %016x in the index", fullKey)
	}
	return s.packDir + p.name, e
}

// TestCorruption: each way the disk can lie is detected: on load, moved
// aside (not deleted) and reported as a rejection, or, for a pack whose
// table of contents does not read, never used (a miss) and reported by
// verify; then the Definition is stored again and loads. Nothing panics.
func TestCorruption(t *testing.T) {
	const fk, model = 0x1234, "m/full@1"
	// image is the range of the image in the pack.
	type at struct{ off, n int }
	cases := []struct {
		name   string
		damage func(t *testing.T, pack string, img at)
		// miss: a fresh process does not see the entry (no rejection);
		// bad: verify names the pack.
		miss, bad bool
		reason    string
		model     string // the model the load asks for
	}{
		{"flipped byte", func(t *testing.T, pack string, img at) {
			b := read(t, pack)
			b[img.off+img.n/2] ^= 0x10
			write(t, pack, b)
		}, false, true, "content hash", ""},
		{"another format version", func(t *testing.T, pack string, img at) {
			b := read(t, pack)
			im := b[img.off : img.off+img.n]
			binary.LittleEndian.PutUint16(im[4:], stages.DefinitionVersion+1)
			rehash(im)
			write(t, pack, b)
		}, false, true, "version", ""},
		{"another key's image in its place", func(t *testing.T, pack string, img at) {
			_, other := testDef(0x9999, 20) // same size, another full_key
			b := read(t, pack)
			copy(b[img.off:], other)
			write(t, pack, b)
		}, false, true, "content hash", ""},
		{"entry of another model", func(t *testing.T, pack string, img at) {}, false, false, "model", "other/full@2"},
		{"garbled record header", func(t *testing.T, pack string, img at) {
			b := read(t, pack)
			b[packHeader+20] ^= 0xff
			write(t, pack, b)
		}, false, true, "sum", ""},
		{"record's model changed", func(t *testing.T, pack string, img at) {
			b := read(t, pack)
			copy(b[packHeader+recHeaderSize:], "M")
			write(t, pack, b)
		}, false, true, "sum", ""},
		{"missing pack", func(t *testing.T, pack string, img at) {
			if err := os.Remove(pack); err != nil {
				t.Fatal(err)
			}
		}, true, false, "", ""},
		{"truncated pack", func(t *testing.T, pack string, img at) {
			write(t, pack, read(t, pack)[:img.off+img.n-7])
		}, true, true, "", ""},
		{"garbled table of contents", func(t *testing.T, pack string, img at) {
			b := read(t, pack)
			b[len(b)-footSize-10] ^= 0xff
			write(t, pack, b)
		}, true, true, "", ""},
		{"footer claiming a huge table of contents", func(t *testing.T, pack string, img at) {
			b := read(t, pack)
			binary.LittleEndian.PutUint32(b[len(b)-footSize+12:], 1<<31)
			write(t, pack, b)
		}, true, true, "", ""},
		{"pack that is a directory", func(t *testing.T, pack string, img at) {
			if err := os.Remove(pack); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(pack, 0o755); err != nil {
				t.Fatal(err)
			}
		}, true, true, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			d, img := testDef(fk, 20)
			s := open(t, dir, 0)
			mustPut(t, s, d, img, model)
			pack, e := packOf(t, s, fk)
			c.damage(t, pack, at{int(e.off + e.imageOff()), len(img)})
			if r, _ := s.Verify(); c.bad != (len(r.Problems) > 0) {
				t.Fatalf("verify: %+v; want problems: %v", r, c.bad)
			}
			want := model
			if c.model != "" {
				want = c.model
			}
			for _, who := range []string{"a fresh process", "the writer, which read the table before"} {
				s2 := open(t, dir, 0)
				if who != "a fresh process" {
					s2 = s
				}
				got, err := s2.Load(fk, want)
				if got != nil && s2 == s && strings.Contains(c.name, "table") && string(got.Image) == string(img) {
					// Only the table is damaged, which s read before:
					// the record it reads verifies.
					s.Unpin(fk)
					continue
				}
				if got != nil {
					t.Fatalf("%s: a damaged entry loaded", who)
				}
				var rej *Rejected
				switch {
				case c.miss && err != nil && !errors.As(err, &rej):
					t.Fatalf("%s: %v, want a miss or a rejection", who, err)
				case c.miss && who == "a fresh process" && err != nil:
					t.Fatalf("%s: %v, want a miss", who, err)
				case !c.miss && (!errors.As(err, &rej) || !strings.Contains(rej.Reason, c.reason)):
					t.Fatalf("%s: load error %v, want a rejection mentioning %q", who, err, c.reason)
				}
				if rej != nil {
					if len(rej.Moved) == 0 {
						t.Fatal("nothing moved aside")
					}
					for _, m := range rej.Moved {
						if _, err := os.Stat(filepath.Join(dir, m)); err != nil {
							t.Fatalf("moved aside to %s: %v", m, err)
						}
					}
					if got, err := s2.Load(fk, want); got != nil || err != nil {
						t.Fatalf("after the rejection: %v, %v; want a miss", got, err)
					}
					break // the pack is aside: the writer has nothing left to see
				}
			}
			// Recorded again: stored, and it loads.
			s3 := open(t, dir, 0)
			mustPut(t, s3, d, img, model)
			if got, err := s3.Load(fk, model); err != nil || got == nil || string(got.Image) != string(img) {
				t.Fatalf("after storing again: %v, %v", got, err)
			}
			if g, err := s3.GC(0); err != nil {
				t.Fatalf("gc: %+v, %v", g, err)
			}
			if r, _ := s3.Verify(); len(r.Problems) != 0 || r.Quarantined != 0 {
				t.Fatalf("verify after repair and gc: %+v", r)
			}
		})
	}
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// age sets an entry's last use: its pack's.
func age(t *testing.T, s *Store, fk uint64, at time.Time) {
	t.Helper()
	p, _ := packOf(t, s, fk)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// stored is whether the store directory holds fk's pack (as the index of
// a fresh process finds it).
func stored(t *testing.T, dir string, fk uint64) bool {
	t.Helper()
	s := open(t, dir, 0)
	defer s.Close()
	_, _, ok := s.lookup(fk)
	return ok
}

// TestEvictionLRU: the store stays under its limit, evicting the least
// recently used entries, and never one a pass has loaded (pinned), even
// when that is the oldest.
func TestEvictionLRU(t *testing.T) {
	dir := t.TempDir()
	_, one := testDef(1, 50)
	per := int64(len(one)) + 300 // image plus its entry, roughly
	s := open(t, dir, 4*per)
	base := time.Now().Add(-time.Hour)
	for k := uint64(1); k <= 3; k++ {
		d, img := testDef(k, 50)
		mustPut(t, s, d, img, "m")
		age(t, s, k, base.Add(time.Duration(k)*time.Minute))
	}
	// Entry 1, the oldest, is loaded by a pass: pinned.
	if l, err := s.Load(1, "m"); l == nil || err != nil {
		t.Fatal(l, err)
	}
	age(t, s, 1, base)
	for k := uint64(4); k <= 8; k++ {
		d, img := testDef(k, 50)
		mustPut(t, s, d, img, "m")
		age(t, s, k, base.Add(time.Duration(k)*time.Minute))
		if sz := measure(t, dir); sz > s.Max() {
			t.Fatalf("after put %d the store holds %d bytes, limit %d", k, sz, s.Max())
		}
	}
	if !stored(t, dir, 1) {
		t.Fatal("the pinned entry was evicted")
	}
	if stored(t, dir, 2) {
		t.Fatal("entry 2 (least recently used, not pinned) survived")
	}
	if !stored(t, dir, 8) {
		t.Fatal("the newest entry was evicted")
	}
	// Another process's gc respects the pin too (flock, not memory).
	other := open(t, dir, per)
	r, err := other.GC(1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pinned != 1 || r.After > per {
		t.Fatalf("gc to 1 byte: %+v; want only the pinned entry kept", r)
	}
	if !stored(t, dir, 1) {
		t.Fatal("another process's gc evicted a pinned entry")
	}
	s.Unpin(1)
	if r, _ := other.GC(1); len(r.Evicted) != 1 || r.After != 0 {
		t.Fatalf("gc after unpin: %+v; want the last entry evicted", r)
	}
}

// TestConcurrentPuts: stores in one directory (as separate processes
// would have: separate locks) write the same Definitions at once; each
// ends on disk valid, maybe more than once (each process writes what it
// has not seen), and gc leaves it once.
func TestConcurrentPuts(t *testing.T) {
	dir := t.TempDir()
	const writers, defs = 4, 8
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		s := open(t, dir, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := uint64(1); k <= defs; k++ {
				d, img := testDef(k, 30)
				if err := s.Put(d, img, "m"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	s := open(t, dir, 0)
	r, err := s.Verify()
	if err != nil || len(r.Problems) != 0 || r.Entries < defs || r.Temp != 0 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
	if l, err := s.List(); err != nil || len(l) != defs {
		t.Fatalf("list: %d entries, %v; want %d", len(l), err, defs)
	}
	if _, err := s.GC(0); err != nil {
		t.Fatal(err)
	}
	r, err = s.Verify()
	if err != nil || len(r.Problems) != 0 || r.Entries != defs || r.Images != defs || r.Shadowed != 0 {
		t.Fatalf("verify after gc: %+v, %v", r, err)
	}
	for k := uint64(1); k <= defs; k++ {
		if l, err := s.Load(k, "m"); l == nil || err != nil {
			t.Fatalf("load %d after gc: %v", k, err)
		}
	}
}

func TestGCRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	d, img := testDef(7, 10)
	mustPut(t, s, d, img, "m")
	// An earlier hbg's layout: one file per image and per entry.
	_, old := testDef(8, 10)
	for _, sub := range legacyDirs {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, "objects", hex16(stages.DefinitionHash(old))+".hbgd"), old)
	write(t, filepath.Join(dir, "index", hex16(8)+"-v3.json"), []byte(`{"format":1}`))
	write(t, filepath.Join(dir, "tmp", "pack-123"), []byte("half"))
	if v, err := s.Verify(); err != nil || v.Legacy != 2 || v.Temp != 1 || len(v.Problems) != 0 {
		t.Fatalf("verify: %+v, %v; want 2 legacy files, 1 temporary", v, err)
	}
	if l, err := s.Load(8, ""); l != nil || err != nil {
		t.Fatalf("a legacy entry: %v, %v; want a miss", l, err)
	}
	r, err := s.GC(0)
	if err != nil || r.Legacy != 2 || r.Temp != 1 || len(r.Evicted) != 0 {
		t.Fatalf("gc: %+v, %v", r, err)
	}
	for _, sub := range legacyDirs {
		if _, err := os.Lstat(filepath.Join(dir, sub)); err == nil {
			t.Fatalf("gc left the legacy %s/", sub)
		}
	}
	if l, err := s.Load(7, "m"); l == nil || err != nil {
		t.Fatal("gc removed a live entry", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "512MiB": 512 << 20, "2GB": 2e9, "4096": 4096, "1.5k": 1536} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "0", "1XB", "GiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

// TestEntryChangedAfterOpen: Open keeps every pack's table of contents,
// but a load checks the record it reads against it; an entry rewritten
// since (here in place, keeping its length) is found out.
func TestEntryChangedAfterOpen(t *testing.T) {
	const fk = 0x77
	dir := t.TempDir()
	d, img := testDef(fk, 20)
	mustPut(t, open(t, dir, 0), d, img, "m/full@1")
	s := open(t, dir, 0) // read the table
	p, _ := packOf(t, s, fk)
	write(t, p, []byte(strings.ReplaceAll(string(read(t, p)), "m/full@1", "m/full@2")))
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(fk, "m/full@1")
	var rej *Rejected
	if got != nil || !errors.As(err, &rej) || !strings.Contains(rej.Reason, "record") {
		t.Fatalf("load of an entry rewritten for another model: %v, %v; want a rejection", got, err)
	}
	mustPut(t, s, d, img, "m/full@1")
	for range 2 {
		got, err := s.Load(fk, "m/full@1")
		if err != nil || got == nil || string(got.Image) != string(img) {
			t.Fatalf("after storing again: %v, %v", got, err)
		}
		s.Unpin(fk)
	}
}

// measure is the bytes of every file in the store directory.
func measure(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() && de.Name() != "lock" {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKnownFor: the entries of one orchestration identity that Open found,
// most recently used first, at most max.
func TestKnownFor(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	now := time.Now()
	for i := 0; i < 5; i++ {
		model := []string{"a", "b"}[i%2]
		d, img := testDef(uint64(100+i), i+1)
		mustPut(t, s, d, img, model)
		age(t, s, d.FullKey, now.Add(-time.Duration(i)*time.Hour)) // key 100 newest
	}
	s = open(t, dir, 0)
	for _, c := range []struct {
		model    string
		max, got int
	}{{"a", 10, 3}, {"b", 10, 2}, {"a", 2, 2}, {"c", 10, 0}} {
		es := s.KnownFor(c.model, c.max)
		if len(es) != c.got {
			t.Fatalf("KnownFor(%q, %d): %d entries, want %d", c.model, c.max, len(es), c.got)
		}
		for i, e := range es {
			if e.Model != c.model || (i > 0 && !e.LastUse.Before(es[i-1].LastUse)) {
				t.Fatalf("KnownFor(%q): entry %d is %+v, after %+v", c.model, i, e, es[max(i-1, 0)])
			}
		}
	}
	if es := s.KnownFor("a", 1); len(es) != 1 || es[0].FullKey != hex16(100) {
		t.Fatalf("KnownFor(a, 1) = %+v, want the newest, %s", es, hex16(100))
	}
}
