package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/hbg-dev/hbg/authn/pki"
	"github.com/hbg-dev/hbg/internal/storetest"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// TestMain keeps every hbgrun these tests start out of the user's cache
// and configuration: the store is off unless a test names one (--store,
// in a t.TempDir()), and the nodes and drivers on loopback share one
// local PKI in a temporary directory, made by whichever starts first.
func TestMain(m *testing.M) {
	os.Setenv("HBG_STORE", "off")
	dir, err := os.MkdirTemp("", "hbg-pki")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(pki.DirEnv, filepath.Join(dir, "pki"))
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// runStored runs DSv4 full for two rounds with the given store and returns
// its report.
func runStored(t *testing.T, store string, flags ...string) *trace.Report {
	t.Helper()
	out, stderr, code := runCLI(t, append([]string{"run", dsv4, "--form", "full", "--rounds", "2", "--store", store, "--json"}, flags...)...)
	if code != 0 {
		t.Fatalf("run --store %s: exit %d: %s", store, code, stderr)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Golden == nil || !rep.Golden.Match {
		t.Fatalf("run --store %s: golden %+v, want eager's digest", store, rep.Golden)
	}
	return &rep
}

// cold checks the first pass: recorded and loaded Definitions, rejections.
func cold(t *testing.T, rep *trace.Report, built, loaded, rejected int) {
	t.Helper()
	p := rep.Passes[0]
	if p.BuiltDefinitions != built || p.LoadedDefinitions != loaded || p.StoreRejected != rejected {
		t.Fatalf("first pass: built %d, loaded %d, rejected %d; want %d, %d, %d (warnings %q)",
			p.BuiltDefinitions, p.LoadedDefinitions, p.StoreRejected, built, loaded, rejected, rep.Warnings)
	}
	if built == 0 && p.RecordedNodes != 0 {
		t.Fatalf("first pass recorded %d nodes, want 0", p.RecordedNodes)
	}
	if loaded > 0 && p.LoadedBytes <= 0 {
		t.Fatalf("loaded %d Definitions of %d bytes", loaded, p.LoadedBytes)
	}
	for _, w := range rep.Passes[1:] {
		if w.BuiltDefinitions+w.LoadedDefinitions+w.StoreRejected != 0 {
			t.Fatalf("a warm pass built %d, loaded %d, rejected %d", w.BuiltDefinitions, w.LoadedDefinitions, w.StoreRejected)
		}
	}
}

// TestStoreFreshProcess: a second process with the store the first one
// filled records nothing: it loads DSv4 full's 8 Definitions, and ends with
// eager's digest. With the store off it records all 8 again.
func TestStoreFreshProcess(t *testing.T) {
	dir := t.TempDir()
	first := runStored(t, dir)
	cold(t, first, 8, 0, 0)
	preloaded(t, first, 0)
	second := runStored(t, dir)
	cold(t, second, 0, 8, 0)
	preloaded(t, second, 8)
	if second.Preload.Bytes != second.Passes[0].LoadedBytes {
		t.Fatalf("preloaded %d bytes, the first pass loaded %d", second.Preload.Bytes, second.Passes[0].LoadedBytes)
	}
	asked := runStored(t, dir, "--preload=false")
	cold(t, asked, 0, 8, 0)
	if asked.Preload != nil || asked.Ops[trace.OpStoreLoad].Count != 8 {
		t.Fatalf("--preload=false: preload %+v, %d store_load ops in host_orch; want none and 8", asked.Preload, asked.Ops[trace.OpStoreLoad].Count)
	}
	off := runStored(t, "off")
	cold(t, off, 8, 0, 0)
	if off.Preload != nil {
		t.Fatalf("--store off: preload %+v, want none", off.Preload)
	}

	out, stderr, code := runCLI(t, "store", "ls", "--store", dir)
	if code != 0 || strings.Count(out, "dsv4_flash_decode/full@") != 8 {
		t.Fatalf("store ls: exit %d, %s%s", code, out, stderr)
	}
	verifyClean(t, dir)
}

// preloaded checks what the run preloaded before its first pass: n
// Definitions, none rejected, and none loaded again in host_orch.
func preloaded(t *testing.T, rep *trace.Report, n int) {
	t.Helper()
	if p := rep.Preload; p == nil || p.Definitions != n || p.Rejected != 0 || p.WallNs <= 0 || rep.Ops[trace.OpStoreLoad].Count != 0 {
		t.Fatalf("preload %+v, %d store_load ops in host_orch; want %d Definitions, none rejected, no load in a pass", p, rep.Ops[trace.OpStoreLoad].Count, n)
	}
}

func verifyClean(t *testing.T, dir string) string {
	t.Helper()
	out, stderr, code := runCLI(t, "store", "verify", "--store", dir)
	if code != 0 || !strings.Contains(out, ": 0 bad;") {
		t.Fatalf("store verify: exit %d: %s%s", code, out, stderr)
	}
	return out
}

// storeImages lists the images of the store in dir (storetest.Images),
// at least one.
func storeImages(t *testing.T, dir string) []storetest.Image {
	t.Helper()
	out := storetest.Images(t, dir)
	if len(out) == 0 {
		t.Fatalf("no image in %s", dir)
	}
	return out
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from+"/.", to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// TestStoreCorruption: each way the disk can lie, on one of the 8 entries,
// is detected and the run's digest is eager's. A damaged record is rejected
// (counted, its pack moved aside); its pack's other entries load if their
// loads pinned the pack first, else are recorded again. A pack that is gone,
// or whose table of contents does not read, is a miss for each of its
// entries (nothing says they were ever there: not counted as rejections);
// a bad one stays, never read, until gc removes it. The next process loads
// all 8.
func TestStoreCorruption(t *testing.T) {
	filled := t.TempDir()
	cold(t, runStored(t, filled), 8, 0, 0)
	cases := []struct {
		name     string
		damage   func(t *testing.T, im storetest.Image)
		rejected int
		bad      bool // verify reports it until gc
	}{
		{"flipped byte", func(t *testing.T, im storetest.Image) {
			b := readFile(t, im.Pack)
			b[im.Off+im.N/3] ^= 0x01
			writeFile(t, im.Pack, b)
		}, 1, false},
		{"another format version", func(t *testing.T, im storetest.Image) {
			b := readFile(t, im.Pack)
			img := b[im.Off : im.Off+im.N]
			binary.LittleEndian.PutUint16(img[4:], stages.DefinitionVersion+1)
			binary.LittleEndian.PutUint64(img[16:], 0)
			binary.LittleEndian.PutUint64(img[16:], xxhash.Sum64(img))
			writeFile(t, im.Pack, b)
		}, 1, false},
		{"truncated pack", func(t *testing.T, im storetest.Image) {
			writeFile(t, im.Pack, readFile(t, im.Pack)[:im.Off+100])
		}, 0, true},
		{"missing pack", func(t *testing.T, im storetest.Image) {
			if err := os.Remove(im.Pack); err != nil {
				t.Fatal(err)
			}
		}, 0, false},
		{"pack that is a directory", func(t *testing.T, im storetest.Image) {
			if err := os.Remove(im.Pack); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(im.Pack, 0o755); err != nil {
				t.Fatal(err)
			}
		}, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, filled, dir)
			c.damage(t, storeImages(t, dir)[0])
			rep := runStored(t, dir)
			p := rep.Passes[0]
			if p.StoreRejected != c.rejected || p.BuiltDefinitions < 1 || p.BuiltDefinitions+p.LoadedDefinitions != 8 {
				t.Fatalf("first pass: built %d, loaded %d, rejected %d; want at least 1, 8 in all, %d (warnings %q)",
					p.BuiltDefinitions, p.LoadedDefinitions, p.StoreRejected, c.rejected, rep.Warnings)
			}
			if c.rejected > 0 {
				found := false
				for _, w := range rep.Warnings {
					found = found || strings.Contains(w, "rejected")
				}
				if !found {
					t.Fatalf("no warning of the rejection: %q", rep.Warnings)
				}
				if q, _ := os.ReadDir(filepath.Join(dir, "quarantine")); len(q) == 0 {
					t.Fatal("nothing moved aside into quarantine/")
				}
			}
			// Recorded again and stored: the next process loads all 8.
			cold(t, runStored(t, dir), 0, 8, 0)
			if out, _, code := runCLI(t, "store", "verify", "--store", dir); (code != 0) != c.bad {
				t.Fatalf("store verify: exit %d: %s; want a problem: %v", code, out, c.bad)
			}
			if out, stderr, code := runCLI(t, "store", "gc", "--store", dir); code != 0 {
				t.Fatalf("store gc: exit %d: %s%s", code, out, stderr)
			}
			verifyClean(t, dir)
		})
	}
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStoreConcurrentProcesses: 4 processes start at once on an empty
// store with the same model: every pass is right, and each Definition ends
// on disk once and valid.
func TestStoreConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	bin := hbgrun(t)
	var wg sync.WaitGroup
	errs := make([]string, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "run", dsv4, "--form", "full", "--rounds", "2", "--store", dir, "--json")
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = err.Error() + ": " + stderr.String()
				return
			}
			var rep trace.Report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				errs[i] = err.Error()
				return
			}
			if rep.Golden == nil || !rep.Golden.Match || rep.Counts.StoreRejected != 0 {
				errs[i] = "golden or store_rejected wrong: " + strings.Join(rep.Warnings, "; ")
			}
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Errorf("process %d: %s", i, e)
		}
	}
	// Each process writes what it has not seen another write: a
	// Definition may be in two packs, harmless, and gc removes a pack
	// every entry of which another holds.
	out := verifyClean(t, dir)
	if !strings.Contains(out, " 0 temporary files, 0 quarantined") {
		t.Fatalf("store verify: %s; want no temporary or quarantined file", out)
	}
	if out, stderr, code := runCLI(t, "store", "gc", "--store", dir); code != 0 {
		t.Fatalf("store gc: exit %d: %s%s", code, out, stderr)
	}
	if out := verifyClean(t, dir); !strings.Contains(out, " 0 duplicate packs, 0 temporary files, 0 quarantined") {
		t.Fatalf("store verify after gc: %s", out)
	}
	out, stderr, code := runCLI(t, "store", "ls", "--store", dir)
	if code != 0 || !strings.Contains(out, "\n8 Definitions,") {
		t.Fatalf("store ls: exit %d: %s%s; want 8 Definitions", code, out, stderr)
	}
	cold(t, runStored(t, dir), 0, 8, 0)
}

// TestStoreKilledRuns: hbgrun runs killed with SIGKILL at random points
// (seeded), most of them while the writer is storing Definitions, leave a
// store that verifies clean and serves the next run.
func TestStoreKilledRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills hbgrun 6 times")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 0))
	for i := 0; i < 6; i++ {
		cmd := exec.Command(hbgrun(t), "run", dsv4, "--form", "full", "--rounds", "1", "--skip-device", "--store", dir, "--json", "--verbose")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The 8 writes, fsynced, run from the first build to a while
		// after the pass ends (tens of ms each here): kill in there.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() && !strings.Contains(sc.Text(), "pass ended") {
		}
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	out := verifyClean(t, dir)
	t.Log(strings.TrimSpace(out))
	rep := runStored(t, dir)
	p := rep.Passes[0]
	if p.BuiltDefinitions+p.LoadedDefinitions != 8 || p.StoreRejected != 0 {
		t.Fatalf("after the kills: built %d, loaded %d, rejected %d; want 8 in all and none rejected", p.BuiltDefinitions, p.LoadedDefinitions, p.StoreRejected)
	}
}
