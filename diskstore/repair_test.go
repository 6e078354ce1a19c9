package diskstore

import (
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// TestDuplicatesHarmless: two processes that store the same Definition
// (neither saw the other's pack) leave it in two packs (FINDINGS.md F26: a
// duplicated entry stayed a verify failure gc did not clear). It loads,
// verifies clean, counts as shadowed; gc removes the duplicate pack, and a
// key whose pack is moved aside loads from its duplicate.
func TestDuplicatesHarmless(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, 0), open(t, dir, 0)
	d, img := testDef(0x51, 12)
	e, eimg := testDef(0x52, 12)
	mustPut(t, a, d, img, "m")
	// b writes before it has looked at packs/ since a wrote: a stale
	// index, as a process that raced a has.
	if _, err := b.writePack([]Item{{Def: d, Image: img, Model: "m"}, {Def: e, Image: eimg, Model: "m"}}, 1<<10); err != nil {
		t.Fatal(err)
	}
	c := open(t, dir, 0)
	if l, err := c.Load(0x51, "m"); l == nil || err != nil {
		t.Fatalf("load of a duplicated key: %v", err)
	}
	c.Unpin(0x51)
	r, err := c.Verify()
	if err != nil || len(r.Problems) != 0 || r.Packs != 2 || r.Shadowed != 1 {
		t.Fatalf("verify: %+v, %v; want 2 packs, 1 shadowed, no problem", r, err)
	}
	if l, err := c.List(); err != nil || len(l) != 2 {
		t.Fatalf("list: %v, %v; want each key once", l, err)
	}
	// The duplicate's pack moved aside: the key loads from the other.
	p, _ := packOf(t, a, 0x51)
	q := a.Quarantine(0x51, "test")
	if q == nil || len(q.Moved) != 1 {
		t.Fatalf("quarantine: %+v", q)
	}
	if _, err := os.Stat(p); err == nil {
		t.Fatal("the pack was not moved aside")
	}
	for _, s := range []*Store{a, c} {
		if l, err := s.Load(0x51, "m"); l == nil || err != nil {
			t.Fatalf("load after its first pack moved aside: %v", err)
		}
		s.Unpin(0x51)
	}
	// Both written again by another pair: gc keeps one pack.
	mustPut(t, a, d, img, "m")
	if _, err := open(t, dir, 0).writePack([]Item{{Def: d, Image: img, Model: "m"}}, 1<<10); err != nil {
		t.Fatal(err)
	}
	g, err := c.GC(0)
	if err != nil || g.Shadowed != 1 || g.Quarantined != 1 {
		t.Fatalf("gc: %+v, %v; want the shadowed pack and the quarantined one removed", g, err)
	}
	if r, err := c.Verify(); err != nil || len(r.Problems) != 0 || r.Shadowed != 0 || r.Packs != 1 {
		t.Fatalf("verify after gc: %+v, %v", r, err)
	}
	for _, k := range []uint64{0x51, 0x52} {
		if l, err := c.Load(k, "m"); l == nil || err != nil {
			t.Fatalf("load %x after gc: %v", k, err)
		}
	}
}

// TestConcurrentUse: two stores on one directory (two processes' worth)
// put, load, list, verify and evict at once; every load that hits returns
// the Definition asked for, and the store ends verifying clean. Run with
// -race, it checks the index's locking.
func TestConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	_, one := testDef(1, 20)
	stores := []*Store{open(t, dir, 30*int64(len(one))), open(t, dir, 30*int64(len(one)))}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		s := stores[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				k := uint64((i*7+w*13)%40 + 1)
				switch i % 4 {
				case 0, 1:
					d, img := testDef(k, 20)
					if err := s.Put(d, img, "m"); err != nil {
						t.Error(err)
					}
				case 2:
					l, err := s.Load(k, "m")
					if err != nil {
						t.Error(err)
					} else if l != nil {
						if l.Def.FullKey != k {
							t.Errorf("loaded %x for %x", l.Def.FullKey, k)
						}
						s.Unpin(k)
					}
				default:
					_ = s.KnownFor("m", 5)
					if _, err := s.List(); err != nil {
						t.Error(err)
					}
					if w == 0 && i%12 == 3 {
						if _, err := s.GC(0); err != nil {
							t.Error(err)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if r, err := stores[0].Verify(); err != nil || len(r.Problems) != 0 || r.Temp != 0 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
}

// TestBuilderReadsBack: the entries a pack's writer keeps in its index are
// the ones its table of contents gives a reader.
func TestBuilderReadsBack(t *testing.T) {
	b := newPackBuilder(0)
	for k := uint64(1); k <= 5; k++ {
		d, img := testDef(k, int(k)+3)
		b.add(stages.DefinitionVersion, "m", d.Key, nil, img, d.FullKey, d.ContentHash)
	}
	data := b.finish()
	f, err := os.CreateTemp(t.TempDir(), "p")
	if err != nil {
		t.Fatal(err)
	}
	write(t, f.Name(), data)
	r, err := openFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	es, reason, err := readTOC(r, int64(len(data)), nil)
	if err != nil || reason != "" || !slices.Equal(es, b.entries) {
		t.Fatalf("read back %+v (%q, %v), built %+v", es, reason, err, b.entries)
	}
}
