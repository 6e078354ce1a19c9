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

// TestCorruption: each way the disk can lie is detected on load, moved
// aside (not deleted), reported as a rejection; then the Definition is
// stored again and loads. Nothing panics.
func TestCorruption(t *testing.T) {
	const fk, model = 0x1234, "m/full@1"
	cases := []struct {
		name   string
		damage func(t *testing.T, s *Store, obj, idx string)
		// miss: no rejection, the entry is simply not there.
		miss   bool
		reason string
	}{
		{"flipped byte", func(t *testing.T, s *Store, obj, idx string) {
			b := read(t, obj)
			b[len(b)/2] ^= 0x10
			write(t, obj, b)
		}, false, "content hash"},
		{"truncated", func(t *testing.T, s *Store, obj, idx string) {
			b := read(t, obj)
			write(t, obj, b[:len(b)-7])
		}, false, "bytes, its entry says"},
		{"another format version", func(t *testing.T, s *Store, obj, idx string) {
			b := read(t, obj)
			binary.LittleEndian.PutUint16(b[4:], stages.DefinitionVersion+1)
			rehash(b)
			write(t, obj, b)
		}, false, "version"},
		{"another model's image under the right name", func(t *testing.T, s *Store, obj, idx string) {
			_, other := testDef(0x9999, 20) // same size, another full_key
			write(t, obj, other)
		}, false, "content hash"},
		{"index entry of another model", func(t *testing.T, s *Store, obj, idx string) {
			b := strings.Replace(string(read(t, idx)), model, "other/full@2", 1)
			write(t, idx, []byte(b))
		}, false, "model"},
		{"garbled index entry", func(t *testing.T, s *Store, obj, idx string) {
			write(t, idx, []byte("{\"format\":1,"))
		}, false, "JSON"},
		{"missing index entry", func(t *testing.T, s *Store, obj, idx string) {
			if err := os.Remove(idx); err != nil {
				t.Fatal(err)
			}
		}, true, ""},
		{"index pointing to a missing image", func(t *testing.T, s *Store, obj, idx string) {
			if err := os.Remove(obj); err != nil {
				t.Fatal(err)
			}
		}, false, "missing image"},
		// The outside tester's: each was rejected at every load and never
		// moved aside, so every run recorded it again.
		{"index entry that is a directory", func(t *testing.T, s *Store, obj, idx string) {
			if err := os.Remove(idx); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(idx, 0o755); err != nil {
				t.Fatal(err)
			}
			if r, _ := s.Verify(); len(r.Problems) == 0 {
				t.Fatalf("verify: %+v, want the directory named as a problem", r)
			}
		}, false, "not a regular file"},
		{"image that is a directory", func(t *testing.T, s *Store, obj, idx string) {
			if err := os.Remove(obj); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(obj, 0o755); err != nil {
				t.Fatal(err)
			}
		}, false, "not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			d, img := testDef(fk, 20)
			s := open(t, dir, 0)
			mustPut(t, s, d, img, model)
			obj, idx := s.objectPath(hex16(d.ContentHash)), s.indexPath(fk)
			c.damage(t, s, obj, idx)

			s2 := open(t, dir, 0)
			got, err := s2.Load(fk, model)
			if got != nil {
				t.Fatal("a damaged entry loaded")
			}
			if c.miss {
				if err != nil {
					t.Fatalf("missing entry: %v, want a miss", err)
				}
				// The image is an orphan now: verify names it, and the
				// next Put reuses it.
				r, _ := s2.Verify()
				if r.Orphans != 1 || len(r.Problems) != 0 {
					t.Fatalf("verify: %+v, want 1 orphan and no problem", r)
				}
			} else {
				var rej *Rejected
				if !errors.As(err, &rej) || !strings.Contains(rej.Reason, c.reason) {
					t.Fatalf("load error %v, want a rejection mentioning %q", err, c.reason)
				}
				if len(rej.Moved) == 0 {
					t.Fatal("nothing moved aside")
				}
				for _, m := range rej.Moved {
					if _, err := os.Stat(filepath.Join(dir, m)); err != nil {
						t.Fatalf("moved aside to %s: %v", m, err)
					}
				}
				if got, err := s2.Load(fk, model); got != nil || err != nil {
					t.Fatalf("after the rejection: %v, %v; want a miss", got, err)
				}
			}
			// Recorded again: stored, and it loads.
			mustPut(t, s2, d, img, model)
			if got, err := s2.Load(fk, model); err != nil || got == nil || string(got.Image) != string(img) {
				t.Fatalf("after storing again: %v, %v", got, err)
			}
			if r, _ := s2.Verify(); len(r.Problems) != 0 {
				t.Fatalf("verify after repair: %+v", r.Problems)
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

// age sets an entry's last use.
func age(t *testing.T, s *Store, fk uint64, at time.Time) {
	t.Helper()
	if err := os.Chtimes(s.indexPath(fk), at, at); err != nil {
		t.Fatal(err)
	}
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
		sz, _ := s.measure()
		if sz > s.Max() {
			t.Fatalf("after put %d the store holds %d bytes, limit %d", k, sz, s.Max())
		}
	}
	if _, err := os.Stat(s.indexPath(1)); err != nil {
		t.Fatalf("the pinned entry was evicted: %v", err)
	}
	if _, err := os.Stat(s.indexPath(2)); err == nil {
		t.Fatal("entry 2 (least recently used, not pinned) survived")
	}
	if _, err := os.Stat(s.indexPath(8)); err != nil {
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
	if _, err := os.Stat(s.indexPath(1)); err != nil {
		t.Fatal("another process's gc evicted a pinned entry")
	}
	s.Unpin(1)
	if r, _ := other.GC(1); len(r.Evicted) != 1 || r.After != 0 {
		t.Fatalf("gc after unpin: %+v; want the last entry evicted", r)
	}
}

// TestConcurrentPuts: stores in one directory (as separate processes
// would have: separate locks) write the same Definitions at once; each
// ends on disk once and valid.
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
	if err != nil || len(r.Problems) != 0 || r.Entries != defs || r.Images != defs || r.Orphans != 0 || r.Temp != 0 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
}

func TestGCRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	d, img := testDef(7, 10)
	mustPut(t, s, d, img, "m")
	_, orphan := testDef(8, 10)
	write(t, filepath.Join(dir, "objects", hex16(stages.DefinitionHash(orphan))+".hbgd"), orphan)
	write(t, filepath.Join(dir, "tmp", "x.json.123"), []byte("half"))
	r, err := s.GC(0)
	if err != nil || r.Orphans != 1 || r.Temp != 1 || len(r.Evicted) != 0 {
		t.Fatalf("gc: %+v, %v", r, err)
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

// TestEntryChangedAfterOpen: Open keeps the entries its scan read, but a
// load uses one only while its file is in the state it was read in; an
// entry rewritten since (here in place, keeping its length) is read again,
// and its damage found.
func TestEntryChangedAfterOpen(t *testing.T) {
	const fk = 0x77
	dir := t.TempDir()
	d, img := testDef(fk, 20)
	mustPut(t, open(t, dir, 0), d, img, "m/full@1")
	s := open(t, dir, 0) // its scan read the entry
	idx := s.indexPath(fk)
	b := strings.Replace(string(read(t, idx)), "m/full@1", "m/full@2", 1)
	write(t, idx, []byte(b))
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(idx, later, later); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(fk, "m/full@1")
	var rej *Rejected
	if got != nil || !errors.As(err, &rej) || !strings.Contains(rej.Reason, "model") {
		t.Fatalf("load of an entry rewritten for another model: %v, %v; want a rejection", got, err)
	}
	mustPut(t, s, d, img, "m/full@1")
	for range 2 { // read, then known
		got, err := s.Load(fk, "m/full@1")
		if err != nil || got == nil || string(got.Image) != string(img) {
			t.Fatalf("after storing again: %v, %v", got, err)
		}
		s.Unpin(fk)
	}
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
