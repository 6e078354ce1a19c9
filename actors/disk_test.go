package actors

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStoreOnDiskAcrossRuntimes: a fresh runtime on a store an earlier one
// filled loads every Definition instead of recording it, replays them to
// eager's digest, and releases each pin once the Definition is uploaded.
func TestStoreOnDiskAcrossRuntimes(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 6, calls: 2}.orchestration("disk")
	digest, _ := eagerDigest(t, orch)

	first := newRuntime(t, Config{StoreDir: dir}, nil)
	res := runPass(t, first, orch, 0)
	if res.Pass.BuiltDefinitions != 6 || res.Pass.LoadedDefinitions != 0 {
		t.Fatalf("first runtime: built %d, loaded %d; want 6 and 0", res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions)
	}
	if errs := first.FlushStore(); len(errs) != 0 || first.Stats.StoreWritten.Load() != 6 {
		t.Fatalf("writes: %d written, errors %v", first.Stats.StoreWritten.Load(), errs)
	}

	second := newRuntime(t, Config{StoreDir: dir}, nil)
	res = runPass(t, second, orch, 0)
	if res.Pass.BuiltDefinitions != 0 || res.Pass.RecordedNodes != 0 || res.Pass.LoadedDefinitions != 6 || res.Pass.LoadedBytes == 0 || res.Pass.StoreRejected != 0 {
		t.Fatalf("second runtime: built %d, recorded %d nodes, loaded %d (%d bytes), rejected %d; want 0, 0, 6, some, 0",
			res.Pass.BuiltDefinitions, res.Pass.RecordedNodes, res.Pass.LoadedDefinitions, res.Pass.LoadedBytes, res.Pass.StoreRejected)
	}
	if res.Device.Digest != digest {
		t.Fatalf("digest %016x, eager %016x", res.Device.Digest, digest)
	}
	list, err := second.Disk().List()
	if err != nil || len(list) != 6 {
		t.Fatalf("%d entries, %v", len(list), err)
	}
	for _, e := range list {
		fk, _ := strconv.ParseUint(e.FullKey, 16, 64)
		if second.Disk().Pinned(fk) {
			t.Fatalf("entry %s still pinned after its upload", e.Key)
		}
	}
	if warm := runPass(t, second, orch, 1); warm.Pass.LoadedDefinitions != 0 || warm.Pass.BuiltDefinitions != 0 {
		t.Fatalf("a warm pass loaded %d, built %d", warm.Pass.LoadedDefinitions, warm.Pass.BuiltDefinitions)
	}
}

// TestStoreOnDiskRejects: an image damaged on disk is rejected (counted,
// warned about, moved aside), recorded again, and the digest is right.
func TestStoreOnDiskRejects(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 3, calls: 1}.orchestration("disk")
	digest, _ := eagerDigest(t, orch)
	first := newRuntime(t, Config{StoreDir: dir}, nil)
	runPass(t, first, orch, 0)
	first.FlushStore()
	objs, _ := filepath.Glob(filepath.Join(dir, "objects", "*.hbgd"))
	if len(objs) != 3 {
		t.Fatalf("%d images on disk, want 3", len(objs))
	}
	b, _ := os.ReadFile(objs[0])
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(objs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	second := newRuntime(t, Config{StoreDir: dir}, nil)
	res := runPass(t, second, orch, 0)
	if res.Pass.StoreRejected != 1 || res.Pass.BuiltDefinitions != 1 || res.Pass.LoadedDefinitions != 2 || second.Stats.StoreRejected.Load() != 1 {
		t.Fatalf("rejected %d, built %d, loaded %d; want 1, 1, 2", res.Pass.StoreRejected, res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "rejected") {
		t.Fatalf("warnings %q, want one about the rejection", res.Warnings)
	}
	if res.Device.Digest != digest {
		t.Fatalf("digest %016x, eager %016x", res.Device.Digest, digest)
	}
}

// TestStoreOnDiskBounded: a runtime keeps its store under --store-max,
// evicting the least recently used.
func TestStoreOnDiskBounded(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 8, calls: 1}.orchestration("disk")
	probe := newRuntime(t, Config{StoreDir: t.TempDir()}, nil)
	runPass(t, probe, orch, 0)
	probe.FlushStore()
	list, _ := probe.Disk().List()
	var one int64
	for _, e := range list {
		one = max(one, e.Bytes+400) // an image and its entry
	}
	limit := 3 * one
	rt := newRuntime(t, Config{StoreDir: dir, StoreMax: limit}, nil)
	runPass(t, rt, orch, 0)
	if errs := rt.FlushStore(); len(errs) != 0 {
		t.Fatal(errs)
	}
	r, err := rt.Disk().Verify()
	if err != nil || len(r.Problems) != 0 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
	if r.Bytes > limit || r.Entries == 0 || r.Entries >= 8 {
		t.Fatalf("store holds %d bytes in %d entries; limit %d (a few of the 8 entries)", r.Bytes, r.Entries, limit)
	}
}
