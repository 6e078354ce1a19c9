package actors

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/internal/storetest"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// TestDeviceRefusedStoredImage: a stored Definition that passes the host's
// load checks but that the device cannot read (a boundary scalar slot out of
// range: the host reads the node table and the boundary writes only) is
// refused at the launch; the store moves it aside and counts it, the pass
// is rerun and records the key again, and it, the next pass and a fresh
// runtime's pass end with eager's digest.
func TestDeviceRefusedStoredImage(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 3, calls: 1}.orchestration("refused")
	digest, _ := eagerDigest(t, orch)
	fillStore(t, dir, orch)
	plantUnreadable(t, dir, orch.Name)

	rt := newRuntime(t, Config{StoreDir: dir}, nil)
	res := runPass(t, rt, orch, 0)
	// Loaded 5: the 3 of the first try, and the 2 good ones again for the
	// rerun (a refusal makes every image from the store suspect).
	if res.Pass.BuiltDefinitions != 1 || res.Pass.LoadedDefinitions != 5 || res.Pass.StoreRejected != 1 || rt.Stats.DeviceRefused.Load() != 1 {
		t.Fatalf("the pass: built %d, loaded %d, rejected %d, device refused %d; want 1, 5, 1, 1 (warnings %q)",
			res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions, res.Pass.StoreRejected, rt.Stats.DeviceRefused.Load(), res.Warnings)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "device refused") || !strings.Contains(res.Warnings[0], "recorded again") {
		t.Fatalf("warnings %q, want one saying the device refused the Definition and it was recorded again", res.Warnings)
	}
	if res.Device.Digest != digest {
		t.Fatalf("digest %016x, eager %016x", res.Device.Digest, digest)
	}
	if cp, orchNs := res.ControlPlane(), res.Pass.Phases[trace.PhaseHostOrch]; cp <= 0 || orchNs <= 0 {
		t.Fatalf("control plane %v, host_orch %d ns", cp, orchNs)
	}
	if warm := runPass(t, rt, orch, 1); warm.Pass.BuiltDefinitions != 0 || warm.Pass.StoreRejected != 0 || warm.Device.Digest != digest {
		t.Fatalf("the next pass: built %d, rejected %d, digest %016x", warm.Pass.BuiltDefinitions, warm.Pass.StoreRejected, warm.Device.Digest)
	}
	if errs := rt.FlushStore(); len(errs) != 0 {
		t.Fatal(errs)
	}
	rep, err := rt.Disk().Verify()
	if err != nil || rep.Quarantined == 0 {
		t.Fatalf("store verify: %+v, %v; want the refused entry in quarantine", rep, err)
	}
	fresh := newRuntime(t, Config{StoreDir: dir}, nil)
	res = runPass(t, fresh, orch, 0)
	if res.Pass.BuiltDefinitions != 0 || res.Pass.LoadedDefinitions != 3 || res.Device.Digest != digest {
		t.Fatalf("a fresh runtime: built %d, loaded %d, digest %016x; want 0, 3, %016x", res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions, res.Device.Digest, digest)
	}
}

// plantUnreadable replaces one entry's image by one the host's load takes
// and the device refuses, in a pack of its own (the others' pack stays
// good when its pack is moved aside).
func plantUnreadable(t *testing.T, dir, model string) { plantUnreadableN(t, dir, model, 1, false) }

// plantUnreadableN spoils n entries' images so (together in one pack, or
// each in a pack of its own), the others in a pack of theirs.
func plantUnreadableN(t *testing.T, dir, model string, n int, apart bool) {
	t.Helper()
	s, err := diskstore.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) < n {
		t.Fatalf("%d entries, %v; want %d", len(list), err, n)
	}
	var items []diskstore.Item
	for _, e := range list {
		fk, _ := strconv.ParseUint(e.FullKey, 16, 64)
		ld, err := s.Load(fk, model)
		if ld == nil {
			t.Fatalf("load %s: %v", e.Key, err)
		}
		s.Unpin(fk)
		def, err := stages.DecodeDefinition(ld.Image)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, diskstore.Item{Def: def, Image: ld.Image, Model: model})
	}
	s.Close()
	for i := range items[:n] {
		def := items[i].Def
		bad := false
		for j := range def.Scalars {
			if def.Scalars[j].Boundary {
				def.Scalars[j].Slot = 999
				bad = true
				break
			}
		}
		if !bad {
			t.Fatal("no boundary scalar to spoil")
		}
		img := stages.EncodeDefinition(def)
		if _, _, err := stages.DecodeDefinitionHost(img); err != nil {
			t.Fatalf("the host refuses the planted image (%v): it would not reach the device", err)
		}
		if _, err := stages.DecodeDefinition(img); err == nil {
			t.Fatal("the planted image reads in full")
		}
		def.ContentHash = stages.DefinitionHash(img)
		items[i].Image = img
	}
	// A put never writes a key the store has: the packs go, and the
	// store is written again, the planted entries in packs of their own.
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.hbgp"))
	for _, p := range packs {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	s, err = diskstore.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(items) > n {
		if _, err := s.PutBatch(items[n:]); err != nil {
			t.Fatal(err)
		}
	}
	if !apart {
		if _, err := s.PutBatch(items[:n]); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, it := range items[:n] {
		if err := s.Put(it.Def, it.Image, model); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeviceRefusedClearedInOneRun: eight stored entries the device
// refuses (in one pack, or each in its own) are all out of the store after
// one run, which ends with eager's digest; on the code before, each run
// moved two aside and failed, so four runs cleared eight. And store gc,
// on its own, removes them (it checks every image as the device would):
// before, gc cleared none.
func TestDeviceRefusedClearedInOneRun(t *testing.T) {
	for _, apart := range []bool{false, true} {
		t.Run(map[bool]string{false: "one pack", true: "a pack each"}[apart], func(t *testing.T) {
			orch := keysModel{keys: 10, calls: 1}.orchestration("refused8")
			digest, _ := eagerDigest(t, orch)
			dir := t.TempDir()
			fillStore(t, dir, orch)
			plantUnreadableN(t, dir, orch.Name, 8, apart)
			rt := newRuntime(t, Config{StoreDir: dir}, nil)
			res := runPass(t, rt, orch, 0)
			if res.Device.Digest != digest {
				t.Fatalf("digest %016x, eager %016x", res.Device.Digest, digest)
			}
			if errs := rt.FlushStore(); len(errs) != 0 {
				t.Fatal(errs)
			}
			rep, err := rt.Disk().Verify()
			if err != nil || len(rep.Problems) != 0 {
				t.Fatalf("store verify after one run: %+v, %v; want every refused entry out of packs/", rep, err)
			}

			dir = t.TempDir()
			fillStore(t, dir, orch)
			plantUnreadableN(t, dir, orch.Name, 8, apart)
			s, err := diskstore.Open(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.GC(0); err != nil {
				t.Fatal(err)
			}
			if rep, err := s.Verify(); err != nil || len(rep.Problems) != 0 || rep.Entries != 2 {
				t.Fatalf("store verify after gc: %+v, %v; want the 2 good entries and no problem", rep, err)
			}
		})
	}
}

// TestRejectionIsTyped: an entry on disk found bad reaches the caller as an
// error that errors.Is matches (diskstore.ErrRejected) and errors.As opens
// (*diskstore.Rejected: the entry and what was moved aside), not a string.
func TestRejectionIsTyped(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 2, calls: 1}.orchestration("typed")
	fillStore(t, dir, orch)
	damage(t, storetest.Images(t, dir)[0])
	rt := newRuntime(t, Config{StoreDir: dir}, nil)
	l, err := rt.Preload(context.Background(), orch, trace.RunInfo{})
	if err != nil || len(l.Rejected) != 1 {
		t.Fatalf("preload %+v, %v; want one rejection", l, err)
	}
	var r *diskstore.Rejected
	if err := l.Rejected[0]; !errors.Is(err, diskstore.ErrRejected) || !errors.As(err, &r) || len(r.Moved) == 0 {
		t.Fatalf("rejection %v (%T): want errors.Is diskstore.ErrRejected and a *diskstore.Rejected that moved files", err, err)
	}
}
