package diskstore

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMain lets this test binary be a writer process killed mid-write.
func TestMain(m *testing.M) {
	if dir := os.Getenv("HBG_DISKSTORE_WRITER"); dir != "" {
		writer(dir)
		return
	}
	os.Exit(m.Run())
}

// writer stores Definitions forever, from the key HBG_DISKSTORE_FROM on,
// in batches of HBG_DISKSTORE_BATCH (1: Put, one at a time): three in four
// new (a store skips what it holds, so a writer of known keys only would
// write nothing to be killed in), one in four of 97 keys every writer
// shares.
func writer(dir string) {
	s, err := Open(dir, 0)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	from, _ := strconv.ParseUint(os.Getenv("HBG_DISKSTORE_FROM"), 10, 64)
	batch, _ := strconv.Atoi(os.Getenv("HBG_DISKSTORE_BATCH"))
	fmt.Println("ready")
	for k := from; ; k += uint64(max(batch, 1)) {
		if batch <= 1 {
			d, img := testDef(crashKey(k), int(k%61)+5)
			if err := s.Put(d, img, "m"); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
			continue
		}
		items := make([]Item, batch)
		for i := range items {
			j := k + uint64(i)
			d, img := testDef(crashKey(j), int(j%61)+5)
			items[i] = Item{Def: d, Image: img, Model: "m"}
		}
		if _, err := s.PutBatch(items); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
}

// crashKey is the full_key a writer stores at its k-th item.
func crashKey(k uint64) uint64 {
	if k%4 == 0 {
		return k%97 + 1
	}
	return k + 1000
}

// TestKilledWriters: writers killed with SIGKILL at random points (seeded),
// half of them writing batches of seeded sizes (PutBatch), leave a store
// that verifies clean and serves every entry it lists.
func TestKilledWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 40 processes")
	}
	dir := t.TempDir()
	// HBG_CRASH_SEED picks other kill points (go test -count 1, with a
	// seed a run each, to run it many times).
	seed, _ := strconv.ParseUint(os.Getenv("HBG_CRASH_SEED"), 10, 64)
	if seed == 0 {
		seed = 13
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	const kills = 40
	for i := 0; i < kills; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		batch := 1
		if i%2 == 1 {
			batch = 2 + rng.IntN(40)
		}
		cmd.Env = append(os.Environ(), "HBG_DISKSTORE_WRITER="+dir, fmt.Sprintf("HBG_DISKSTORE_FROM=%d", i*1_000_000+rng.IntN(97)),
			fmt.Sprintf("HBG_DISKSTORE_BATCH=%d", batch))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("writer %d: %q", i, line)
		}
		// The kill point: somewhere among the writer's first puts.
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	}
	s := open(t, dir, 0)
	r, err := s.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 0 {
		t.Fatalf("after %d killed writers, verify finds %v", kills, r.Problems)
	}
	if r.Entries == 0 {
		t.Fatal("no writer stored anything before it was killed: the kill points are too early")
	}
	t.Logf("seed %d: %d packs, %d entries, %d shadowed packs, %d temp files left", seed, r.Packs, r.Entries, r.Shadowed, r.Temp)
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		fk, _ := strconv.ParseUint(e.FullKey, 16, 64)
		if l, err := s.Load(fk, "m"); l == nil || err != nil {
			t.Fatalf("entry %s does not serve: %v", e.FullKey, err)
		}
		s.Unpin(fk)
	}
	g, err := s.GC(0)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Verify(); v.Temp != 0 || v.Shadowed != 0 || len(v.Problems) != 0 {
		t.Fatalf("after gc (%+v): %+v", g, v)
	}
}
