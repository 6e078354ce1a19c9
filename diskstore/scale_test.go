package diskstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/internal/benchunit"
)

// BenchmarkScaleStore is the store at 10 to 10^5 Definitions (issue 28),
// per unit of work: open (Open's scan of the index, per Definition), load
// (one entry found, read, verified and decoded, per load), put (a batch of
// 64 new Definitions, per Definition) and put-full (the same into a store at
// its size limit, so that the puts evict as many: an eviction scans the
// whole index, which must not make a put's cost grow with the store). The
// store lives on tmpfs (/dev/shm) where there is one, because filling it on
// this machine's disk costs about a millisecond a file, minutes for 10^5;
// elsewhere in a temporary directory.
func BenchmarkScaleStore(b *testing.B) {
	base := "/dev/shm"
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = ""
	}
	dir, err := os.MkdirTemp(base, "hbg-bench-store-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	next := uint64(1) // the next new full_key
	fill := func(s *Store, n int) []Item {
		items := make([]Item, n)
		for i := range items {
			d, img := testDef(next, 5)
			items[i] = Item{Def: d, Image: img, Model: "m"}
			next++
		}
		return items
	}
	have := 0
	for _, n := range []int{10, 100, 1000, 10000, 100000} {
		s, err := Open(dir, DefaultMax)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.PutBatch(fill(s, n-have)); err != nil {
			b.Fatal(err)
		}
		have = n
		list, err := s.List()
		if err != nil || len(list) != n {
			b.Fatalf("the store lists %d, want %d (%v)", len(list), n, err)
		}
		keys := make([]uint64, n)
		for i, e := range list {
			fmt.Sscanf(e.FullKey, "%x", &keys[i])
		}
		size := s.size
		s.Close()
		b.Run(fmt.Sprint("open/defs=", n), func(b *testing.B) {
			u := benchunit.Start(b)
			for b.Loop() {
				s, err := Open(dir, DefaultMax)
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			u.Report(n, "def")
		})
		b.Run(fmt.Sprint("load/defs=", n), func(b *testing.B) {
			s := open(b, dir, DefaultMax)
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			u := benchunit.Start(b)
			for b.Loop() {
				k := keys[rng.IntN(len(keys))]
				if l, err := s.Load(k, "m"); l == nil || err != nil {
					b.Fatalf("load %x: %v", k, err)
				}
				s.Unpin(k)
			}
			u.Report(1, "load")
		})
		for _, full := range []bool{false, true} {
			name := "put"
			if full {
				name = "put-full"
			}
			b.Run(fmt.Sprint(name, "/defs=", n), func(b *testing.B) {
				limit := int64(DefaultMax)
				if full {
					limit = size // at its limit
				}
				s := open(b, dir, limit)
				// At the limit, one batch in every n/8 Definitions evicts
				// (lowWater): a batch of n/4 (64 at least) puts one such
				// eviction or more in every iteration, so that a few
				// iterations measure the amortized cost.
				batch := 64
				if full {
					batch = max(64, n/4)
				}
				u := benchunit.Start(b)
				for b.Loop() {
					b.StopTimer()
					items := fill(s, batch)
					b.StartTimer()
					if stored, err := s.PutBatch(items); err != nil || stored != batch {
						b.Fatalf("stored %d of %d: %v", stored, batch, err)
					}
				}
				u.Report(batch, "def")
			})
		}
		// The puts added Definitions (and put-full evicted as many): the
		// store goes on from what it holds.
		s, err = Open(dir, DefaultMax)
		if err != nil {
			b.Fatal(err)
		}
		list, _ = s.List()
		have = len(list)
		s.Close()
	}
}

// TestEvictionAmortized: a store at its limit does not scan its index for
// every put. 300 Definitions put one at a time into a store that holds
// about 40 evict (each eviction a scan of the whole index) at most once
// per few puts; evicted to exactly the limit, every put past it scanned.
func TestEvictionAmortized(t *testing.T) {
	dir := t.TempDir()
	_, one := testDef(1, 20)
	s := open(t, dir, 40*(int64(len(one))+200))
	const puts = 300
	for k := uint64(1); k <= puts; k++ {
		d, img := testDef(k, 20)
		mustPut(t, s, d, img, "m")
	}
	if sz := measure(t, dir); sz > s.Max() {
		t.Fatalf("the store holds %d bytes, limit %d", sz, s.Max())
	}
	if n := s.evictions.Load(); n > puts/4 {
		t.Fatalf("%d puts past the limit evicted %d times (a scan of the index each)", puts, n)
	}
}

// TestMissesDoNotList: 10^4 misses, spread over some 50 ms, on a store
// nobody writes list packs/ at most the few times a racy listing (packs/
// was made within racyWindow of it) takes, not once a miss; and a pack
// another process (store) writes meanwhile is found once refreshEvery has
// passed, without reopening.
func TestMissesDoNotList(t *testing.T) {
	dir := t.TempDir()
	s, other := open(t, dir, 0), open(t, dir, 0)
	before := s.scans.Load()
	for k := uint64(1); k <= 10000; k++ {
		if f, err := s.Find(k); f != nil || err != nil {
			t.Fatalf("find %d in an empty store: %v, %v", k, f, err)
		}
		if k%200 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if n := s.scans.Load() - before; n > 4 {
		t.Fatalf("10^4 misses listed packs/ %d times", n)
	}
	d, img := testDef(77, 10)
	mustPut(t, other, d, img, "m")
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := s.Load(77, "m")
		if err != nil {
			t.Fatal(err)
		}
		if l != nil {
			s.Unpin(77)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("another store's pack is not found without reopening")
		}
		time.Sleep(refreshEvery / 2)
	}
	if n := s.scans.Load() - before; n > 8 {
		t.Fatalf("finding one new pack listed packs/ %d times", n)
	}
}

// TestLimitBelowOneDefinition: a store whose limit is smaller than one
// Definition stores (no error), keeps nothing unpinned, stays under its
// limit and verifies clean.
func TestLimitBelowOneDefinition(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 64)
	for k := uint64(1); k <= 5; k++ {
		d, img := testDef(k, 10)
		mustPut(t, s, d, img, "m")
	}
	if sz := measure(t, dir); sz > s.Max() {
		t.Fatalf("the store holds %d bytes, limit %d", sz, s.Max())
	}
	if r, err := s.Verify(); err != nil || len(r.Problems) != 0 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
}
