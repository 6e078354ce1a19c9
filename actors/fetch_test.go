package actors

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// mapSource is a DefinitionSource over a map, answering from another
// goroutine as a cluster does; spoil, if set, changes each image it sends.
type mapSource struct {
	mu       sync.Mutex
	images   map[uint64][]byte
	hashes   map[uint64]uint64
	spoil    func([]byte) []byte
	warning  string
	asked    int
	recorded map[uint64][]byte
}

func newMapSource() *mapSource {
	return &mapSource{images: map[uint64][]byte{}, hashes: map[uint64]uint64{}, recorded: map[uint64][]byte{}}
}

func (m *mapSource) Fetch(req FetchRequest, done func(FetchResult)) {
	m.mu.Lock()
	m.asked++
	img, ok := m.images[req.FullKey]
	hash := m.hashes[req.FullKey]
	m.mu.Unlock()
	r := FetchResult{Peer: "test", Outcome: "record", Warning: m.warning}
	if ok {
		if m.spoil != nil {
			img = m.spoil(img)
		}
		r = FetchResult{Image: img, Hash: hash, Peer: "test", Outcome: "image"}
	}
	go done(r)
}

func (m *mapSource) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked
}

func (m *mapSource) Recorded(req FetchRequest, image []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recorded[req.FullKey] = image
}

// TestFetchBeforeRecording: a store with a DefinitionSource asks it on every
// miss; what it is told to record it records and reports back; a fresh
// runtime then fetches every Definition instead of recording it, replays
// them to eager's digest and asks nothing in a warm pass; a spoiled image is
// rejected, counted, warned about and recorded instead.
func TestFetchBeforeRecording(t *testing.T) {
	const keys = 6
	orch := keysModel{keys: keys, calls: 2}.orchestration("fetch")
	digest, _ := eagerDigest(t, orch)

	src := newMapSource()
	res := runPass(t, newRuntime(t, Config{Peers: src}, nil), orch, 0)
	p := res.Pass
	if p.BuiltDefinitions != keys || p.FetchedDefinitions != 0 || p.Ops[trace.OpPeerFetch].Count != keys || src.count() != keys {
		t.Fatalf("first runtime: built %d, fetched %d, asked %d (source %d); want %d, 0, %d", p.BuiltDefinitions, p.FetchedDefinitions, p.Ops[trace.OpPeerFetch].Count, src.count(), keys, keys)
	}
	if len(src.recorded) != keys {
		t.Fatalf("%d recordings reported to the source, want %d", len(src.recorded), keys)
	}
	var bytes int64
	for fk, img := range src.recorded {
		src.images[fk] = img
		src.hashes[fk] = stages.DefinitionHash(img)
		bytes += int64(len(img))
	}

	src.asked = 0
	second := newRuntime(t, Config{Peers: src}, nil)
	res = runPass(t, second, orch, 0)
	p = res.Pass
	if p.BuiltDefinitions != 0 || p.RecordedNodes != 0 || p.FetchedDefinitions != keys || p.FetchedBytes != bytes || p.FetchRejected != 0 {
		t.Fatalf("second runtime: built %d (%d nodes), fetched %d (%d bytes), rejected %d; want 0, 0, %d (%d bytes), 0",
			p.BuiltDefinitions, p.RecordedNodes, p.FetchedDefinitions, p.FetchedBytes, p.FetchRejected, keys, bytes)
	}
	if res.Device.Digest != digest {
		t.Fatalf("digest %016x, eager %016x", res.Device.Digest, digest)
	}
	if second.Stats.Fetched.Load() != keys {
		t.Fatalf("stats: %d fetched", second.Stats.Fetched.Load())
	}
	if w := runPass(t, second, orch, 1).Pass; w.FetchedDefinitions != 0 || w.BuiltDefinitions != 0 || w.Ops[trace.OpPeerFetch].Count != 0 {
		t.Fatalf("a warm pass fetched %d, built %d, asked %d", w.FetchedDefinitions, w.BuiltDefinitions, w.Ops[trace.OpPeerFetch].Count)
	}

	src.spoil = func(b []byte) []byte {
		c := slices.Clone(b)
		c[len(c)-1] ^= 1
		return c
	}
	res = runPass(t, newRuntime(t, Config{Peers: src}, nil), orch, 0)
	p = res.Pass
	if p.BuiltDefinitions != keys || p.FetchedDefinitions != 0 || p.FetchRejected != keys {
		t.Fatalf("spoiled: built %d, fetched %d, rejected %d; want %d, 0, %d", p.BuiltDefinitions, p.FetchedDefinitions, p.FetchRejected, keys, keys)
	}
	n := 0
	for _, w := range res.Warnings {
		if strings.Contains(w, "rejected") {
			n++
		}
	}
	if n != keys || res.Device.Digest != digest {
		t.Fatalf("spoiled: %d warnings of a rejection (want %d), digest %016x (eager %016x): %q", n, keys, res.Device.Digest, digest, res.Warnings)
	}
}

// TestFetchWarningReported: what a source says about its answer (it could
// not reach a peer, say) reaches the pass's warnings, once per key.
func TestFetchWarningReported(t *testing.T) {
	src := newMapSource()
	src.warning = "node x unreachable: recorded here"
	res := runPass(t, newRuntime(t, Config{Peers: src}, nil), keysModel{keys: 3, calls: 1}.orchestration("warn"), 0)
	n := 0
	for _, w := range res.Warnings {
		if strings.Contains(w, src.warning) {
			n++
		}
	}
	if n != 3 || res.Pass.BuiltDefinitions != 3 {
		t.Fatalf("%d warnings from the source (want 3), built %d: %q", n, res.Pass.BuiltDefinitions, res.Warnings)
	}
}

// TestNoRetainAsksNothing: without retention, store keys are salted per
// pass and no other process can hold them: the source is not asked.
func TestNoRetainAsksNothing(t *testing.T) {
	src := newMapSource()
	res := runPass(t, newRuntime(t, Config{Peers: src, NoRetain: true}, nil), keysModel{keys: 3, calls: 1}.orchestration("noretain"), 0)
	if src.count() != 0 || res.Pass.Ops[trace.OpPeerFetch].Count != 0 || res.Pass.BuiltDefinitions != 3 {
		t.Fatalf("asked %d (op count %d), built %d; want 0, 0, 3", src.count(), res.Pass.Ops[trace.OpPeerFetch].Count, res.Pass.BuiltDefinitions)
	}
}
