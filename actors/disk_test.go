package actors

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/internal/storetest"
	"github.com/hbg-dev/hbg/trace"
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
// warned about, its pack moved aside), recorded again, and the digest is
// right. The pack's other entries load if their loads pinned the pack
// before the rejection moved it, else they are misses, recorded again.
func TestStoreOnDiskRejects(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 3, calls: 1}.orchestration("disk")
	digest, _ := eagerDigest(t, orch)
	first := newRuntime(t, Config{StoreDir: dir}, nil)
	runPass(t, first, orch, 0)
	first.FlushStore()
	imgs := storetest.Images(t, dir)
	if len(imgs) != 3 {
		t.Fatalf("%d images on disk, want 3", len(imgs))
	}
	damage(t, imgs[0])
	second := newRuntime(t, Config{StoreDir: dir}, nil)
	res := runPass(t, second, orch, 0)
	if res.Pass.StoreRejected != 1 || res.Pass.BuiltDefinitions < 1 || res.Pass.BuiltDefinitions+res.Pass.LoadedDefinitions != 3 || second.Stats.StoreRejected.Load() != 1 {
		t.Fatalf("rejected %d, built %d, loaded %d; want 1, at least 1, 3 in all", res.Pass.StoreRejected, res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions)
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

// fillStore runs orch once on a runtime of its own over the store in dir,
// and waits for its Definitions to be written.
func fillStore(t *testing.T, dir string, orch *Orchestration) {
	t.Helper()
	rt := newRuntime(t, Config{StoreDir: dir}, nil)
	runPass(t, rt, orch, 0)
	if errs := rt.FlushStore(); len(errs) != 0 {
		t.Fatal(errs)
	}
}

// TestPreload: a fresh runtime preloads an orchestration's Definitions from
// the store on disk (and only that orchestration's), pins none of them once
// they are in memory, and its first pass records, builds and reads
// nothing, reports them loaded, and ends with eager's digest. A damaged
// image is rejected by the preload, reported, and recorded by the pass.
func TestPreload(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 6, calls: 2}.orchestration("disk")
	other := keysModel{keys: 3, calls: 1}.orchestration("other")
	digest, _ := eagerDigest(t, orch)
	fillStore(t, dir, orch)
	fillStore(t, dir, other)

	rt := newRuntime(t, Config{StoreDir: dir}, nil)
	l, err := rt.Preload(context.Background(), orch, trace.RunInfo{})
	if err != nil || l.Loaded != 6 || l.Bytes == 0 || len(l.Rejected) != 0 {
		t.Fatalf("preload: %+v, %v; want 6 loaded, none rejected", l, err)
	}
	if again, err := rt.Preload(context.Background(), orch, trace.RunInfo{}); err != nil || again.Loaded != 0 {
		t.Fatalf("second preload: %+v, %v; want nothing loaded", again, err)
	}
	list, _ := rt.Disk().List()
	if n := rt.Stats.Loaded.Load(); n != 6 {
		t.Fatalf("%d Definitions loaded, want orch's 6 (not the other orchestration's)", n)
	}
	for _, e := range list {
		if fk, _ := strconv.ParseUint(e.FullKey, 16, 64); rt.Disk().Pinned(fk) {
			t.Fatalf("entry %s pinned after the preload (in memory: eviction may take its files)", e.Key)
		}
	}
	res := runPass(t, rt, orch, 0)
	if res.Pass.BuiltDefinitions != 0 || res.Pass.RecordedNodes != 0 || res.Pass.LoadedDefinitions != 6 || res.Pass.LoadedBytes != l.Bytes {
		t.Fatalf("first pass: built %d, recorded %d nodes, loaded %d (%d bytes); want 0, 0, 6 (%d bytes)",
			res.Pass.BuiltDefinitions, res.Pass.RecordedNodes, res.Pass.LoadedDefinitions, res.Pass.LoadedBytes, l.Bytes)
	}
	if res.Device.Digest != digest {
		t.Fatalf("digest %016x, eager %016x", res.Device.Digest, digest)
	}
	for _, e := range list {
		if fk, _ := strconv.ParseUint(e.FullKey, 16, 64); rt.Disk().Pinned(fk) {
			t.Fatalf("entry %s still pinned after its upload", e.Key)
		}
	}

	// One image damaged: the preload rejects it (its pack moved aside),
	// the pass records it and whatever else of the pack the preload did
	// not load before.
	damage(t, storetest.Images(t, dir)[0])
	rejected := 0
	for _, c := range []struct {
		o    *Orchestration
		keys int
	}{{orch, 6}, {other, 3}} {
		o := c.o
		rt := newRuntime(t, Config{StoreDir: dir}, nil)
		l, err := rt.Preload(context.Background(), o, trace.RunInfo{})
		if err != nil {
			t.Fatal(err)
		}
		res := runPass(t, rt, o, 0)
		// A key of the rejected pack that the preload found gone may be in
		// the pack its good records were stored again in: the pass loads it.
		if len(l.Rejected) != res.Pass.StoreRejected || res.Pass.BuiltDefinitions < res.Pass.StoreRejected ||
			res.Pass.LoadedDefinitions+res.Pass.BuiltDefinitions != c.keys || res.Pass.LoadedDefinitions < l.Loaded {
			t.Fatalf("%s: preload %+v; pass rejected %d, built %d, loaded %d", o.Name, l, res.Pass.StoreRejected, res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions)
		}
		if len(l.Rejected) == 1 && (len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "rejected")) {
			t.Fatalf("%s: warnings %q, want one about the rejection", o.Name, res.Warnings)
		}
		if o == orch && res.Device.Digest != digest {
			t.Fatalf("digest %016x, eager %016x", res.Device.Digest, digest)
		}
		rejected += len(l.Rejected)
	}
	if rejected != 1 {
		t.Fatalf("%d rejections over both preloads, want the 1 damaged image", rejected)
	}
}

// TestPreloadEnds: a preload honours its context and a stopped runtime, and
// one without a store on disk, or without retention, loads nothing.
func TestPreloadEnds(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 2, calls: 1}.orchestration("disk")
	fillStore(t, dir, orch)
	rt := newRuntime(t, Config{StoreDir: dir}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rt.Preload(ctx, orch, trace.RunInfo{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled preload: %v, want context.Canceled", err)
	}
	if _, err := rt.Preload(context.Background(), nil, trace.RunInfo{}); !errors.Is(err, ErrInvalidPass) {
		t.Fatalf("nil orchestration: %v, want ErrInvalidPass", err)
	}
	for _, cfg := range []Config{{}, {StoreDir: dir, NoRetain: true}} {
		if l, err := newRuntime(t, cfg, nil).Preload(context.Background(), orch, trace.RunInfo{}); err != nil || l.Loaded != 0 {
			t.Fatalf("%+v: preload %+v, %v; want nothing loaded", cfg, l, err)
		}
	}
	rt.Stop(context.Background())
	if _, err := rt.Preload(context.Background(), orch, trace.RunInfo{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("preload after Stop: %v, want ErrStopped", err)
	}
}

// TestPreloadWithPass: a pass that starts while its Definitions are still
// loading waits for those loads instead of recording: each key is loaded
// once, by the preload, whichever comes first.
func TestPreloadWithPass(t *testing.T) {
	dir := t.TempDir()
	orch := keysModel{keys: 8, calls: 2}.orchestration("disk")
	digest, _ := eagerDigest(t, orch)
	fillStore(t, dir, orch)
	for i := 0; i < 5; i++ {
		rt := newRuntime(t, Config{StoreDir: dir}, nil)
		loaded := make(chan int, 1)
		go func() {
			l, err := rt.Preload(context.Background(), orch, trace.RunInfo{})
			if err != nil {
				t.Error(err)
			}
			loaded <- l.Loaded
		}()
		res := runPass(t, rt, orch, 0)
		n := <-loaded
		if res.Pass.BuiltDefinitions != 0 || res.Pass.LoadedDefinitions != 8 || rt.Stats.Loaded.Load() != 8 {
			t.Fatalf("built %d, pass loaded %d, preload loaded %d, runtime loaded %d; want 0, 8, some, 8",
				res.Pass.BuiltDefinitions, res.Pass.LoadedDefinitions, n, rt.Stats.Loaded.Load())
		}
		if res.Device.Digest != digest {
			t.Fatalf("digest %016x, eager %016x", res.Device.Digest, digest)
		}
	}
}
