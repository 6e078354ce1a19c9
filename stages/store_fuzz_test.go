package stages

import (
	"errors"
	"fmt"
	"testing"
)

// FuzzStore drives the Definition store's state machine with random event
// sequences, as its actor would deliver them (only answers to what the
// store asked for, in any order), and checks what the store promises: no
// request answered twice, a non-verify recording of a key never dispatched
// while another is live, a load never asked twice for one key, every
// preload reported once, and, once every outstanding load, fetch and
// recording has been answered, every request answered and the queue empty.
func FuzzStore(f *testing.F) {
	f.Add([]byte{0x07, 0, 0, 0, 1, 2, 3})
	f.Add([]byte{0x03, 0, 1, 0, 9, 3, 0, 4, 1, 5, 2, 2, 0, 6, 0})
	f.Add([]byte{0x05, 0, 4, 0, 4, 7, 0, 3, 8, 1, 2, 0, 0, 9, 1, 1})
	f.Add([]byte{0x06, 0, 1, 0, 2, 1, 6, 0, 5, 3, 1, 0, 4, 2, 7, 0, 3, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		m := newStoreModel(t, in)
		for m.more() {
			m.step()
		}
		m.drain()
	})
}

type fuzzJob struct {
	RecordRequest
	id int
}

func (j *fuzzJob) Request() *RecordRequest { return &j.RecordRequest }

type pendingLoad struct {
	key     uint64
	graph   string
	preload int
}

type storeModel struct {
	t    *testing.T
	in   []byte
	cfg  StoreConfig
	st   *Store[*fuzzJob]
	jobs []*fuzzJob
	// answered counts each job's answers; live is each store key's
	// non-verify recordings dispatched and not yet built.
	answered map[int]int
	live     map[uint64]int
	busy     map[string]*fuzzJob // recorder -> job dispatched to it
	recs     []string            // recorders in the pool, idle or busy
	nrec     int
	loads    []pendingLoad
	loading  map[uint64]bool
	fetches  []*fuzzJob
	preloads map[int]int // preload id -> StorePreloaded actions seen
	defs     map[string]*Published
}

const fuzzStoreKeys = 3

func newStoreModel(t *testing.T, in []byte) *storeModel {
	m := &storeModel{t: t, in: in, answered: map[int]int{}, live: map[uint64]int{}, busy: map[string]*fuzzJob{},
		loading: map[uint64]bool{}, preloads: map[int]int{}, defs: map[string]*Published{}}
	c := m.byte()
	m.cfg = StoreConfig{Disk: c&1 != 0, Peers: c&2 != 0}
	m.st = NewStore[*fuzzJob](m.cfg)
	n := int(c>>2)%3 + 1
	for i := 0; i < n; i++ {
		m.addRecorder()
	}
	return m
}

func (m *storeModel) more() bool { return len(m.in) > 0 }

func (m *storeModel) byte() byte {
	if len(m.in) == 0 {
		return 0
	}
	b := m.in[0]
	m.in = m.in[1:]
	return b
}

func (m *storeModel) addRecorder() {
	m.nrec++
	id := fmt.Sprintf("r%d", m.nrec)
	m.recs = append(m.recs, id)
	m.st.Recorders(id)
	m.apply()
}

func graphKey(i int) string { return fmt.Sprintf("k%d", i) }

// image is one Definition per tag (a key and a variant): two recordings
// of a key with different variants differ, as a baked-in scalar would.
func (m *storeModel) image(key string, variant byte) *Published {
	tag := fmt.Sprintf("%s#%d", key, variant%2)
	if d := m.defs[tag]; d != nil {
		return d
	}
	d := &Published{Def: &Definition{Key: key, FullKey: FullKey("fuzz", key, nil)}, Image: []byte("image " + tag), Hash: FullKey("image", tag, nil)}
	m.defs[tag] = d
	return d
}

// apply checks and takes the store's actions.
func (m *storeModel) apply() {
	t := m.t
	for _, a := range m.st.Actions() {
		switch a.Kind {
		case StoreDispatch:
			r := a.Job.Request()
			if _, ok := m.busy[a.Recorder]; ok {
				t.Fatalf("job %d dispatched to %s, which is busy", a.Job.id, a.Recorder)
			}
			if !r.Verify {
				if m.live[r.StoreKey] > 0 {
					t.Fatalf("job %d (key %s) dispatched while the key has a live recording", a.Job.id, r.Key)
				}
				m.live[r.StoreKey]++
			}
			m.busy[a.Recorder] = a.Job
		case StoreLoadKey:
			if m.loading[a.Key] {
				t.Fatalf("load of %s asked while one is in flight", a.GraphKey)
			}
			m.loading[a.Key] = true
			m.loads = append(m.loads, pendingLoad{key: a.Key, graph: a.GraphKey, preload: a.Preload})
		case StoreFetch:
			m.fetches = append(m.fetches, a.Job)
		case StoreAnswer:
			j := a.Job
			m.answered[j.id]++
			if m.answered[j.id] > 1 {
				t.Fatalf("job %d (key %s) answered %d times", j.id, j.Key, m.answered[j.id])
			}
			o := a.Outcome
			if o.StoreKey != j.StoreKey || o.Pass != j.Pass || o.Verify != j.Verify {
				t.Fatalf("job %d answered with another's outcome: %+v", j.id, o)
			}
			if !j.Verify && o.Err == nil && o.Def == nil {
				t.Fatalf("job %d (key %s) answered with neither a Definition nor an error", j.id, j.Key)
			}
			if o.Def != nil && o.Def.Def.Key != j.Key {
				t.Fatalf("job %d (key %s) answered with key %s's Definition", j.id, j.Key, o.Def.Def.Key)
			}
		case StorePreloaded:
			if m.preloads[a.Preload]++; m.preloads[a.Preload] > 1 {
				t.Fatalf("preload %d reported twice", a.Preload)
			}
		case StoreWrite, StoreRecorded, StoreUnpin, StoreQuarantine:
		default:
			t.Fatalf("unknown action %v", a.Kind)
		}
	}
}

func pick[T any](m *storeModel, s []T) (int, bool) {
	if len(s) == 0 {
		return 0, false
	}
	return int(m.byte()) % len(s), true
}

func (m *storeModel) request(b byte) {
	key := graphKey(int(b>>1) % fuzzStoreKeys)
	fk := FullKey("fuzz", key, nil)
	sk := fk
	if b&0x40 != 0 {
		sk = FullKey("salt", key, nil)
	}
	j := &fuzzJob{id: len(m.jobs), RecordRequest: RecordRequest{Pass: uint64(len(m.jobs)), StoreKey: sk, FullKey: fk, Key: key, Verify: b&1 != 0}}
	m.jobs = append(m.jobs, j)
	m.st.Request(j)
}

func (m *storeModel) built(i int, ok bool, variant byte) {
	rec := m.busyRecorders()[i]
	j := m.busy[rec]
	delete(m.busy, rec)
	if !j.Verify {
		m.live[j.StoreKey]--
	}
	b := Recording{Nodes: 3}
	if ok {
		b.Def = m.image(j.Key, variant)
	} else {
		b.Err, b.Nodes = errors.New("body failed"), 0
	}
	m.st.Built(rec, j, b)
}

// busyRecorders is the busy recorders in pool order (deterministic).
func (m *storeModel) busyRecorders() []string {
	var s []string
	for _, r := range m.recs {
		if _, ok := m.busy[r]; ok {
			s = append(s, r)
		}
	}
	return s
}

func (m *storeModel) loadDone(i int, how byte) {
	l := m.loads[i]
	m.loads = append(m.loads[:i], m.loads[i+1:]...)
	delete(m.loading, l.key)
	switch how % 3 {
	case 0:
		d := m.image(l.graph, how>>2)
		m.st.LoadDone(l.key, d, StoreLoad{Loaded: 1, Bytes: int64(len(d.Image))}, nil)
	case 1:
		m.st.LoadDone(l.key, nil, StoreLoad{}, nil)
	default:
		m.st.LoadDone(l.key, nil, StoreLoad{}, fmt.Errorf("graph %q: entry does not read", l.graph))
	}
}

func (m *storeModel) fetchDone(i int, how byte) {
	j := m.fetches[i]
	m.fetches = append(m.fetches[:i], m.fetches[i+1:]...)
	f := PeerFetch{Asked: 1}
	switch how % 4 {
	case 0:
		d := m.image(j.Key, how>>2)
		f.Loaded, f.Bytes = 1, int64(len(d.Image))
		m.st.FetchDone(j, d, f)
	case 1:
		m.st.FetchDone(j, nil, f)
	case 2:
		f.Rejected = []error{fmt.Errorf("graph %q: image from peer rejected", j.Key)}
		m.st.FetchDone(j, nil, f)
	default:
		m.st.FetchCheck(j, m.image(j.Key, how>>2), f, "p")
	}
}

func (m *storeModel) step() {
	op := m.byte()
	switch op % 10 {
	case 0, 1:
		m.request(m.byte())
	case 2, 3:
		if i, ok := pick(m, m.busyRecorders()); ok {
			m.built(i, op&0x10 == 0, m.byte())
		}
	case 4:
		if i, ok := pick(m, m.loads); ok {
			m.loadDone(i, m.byte())
		}
	case 5:
		if i, ok := pick(m, m.fetches); ok {
			m.fetchDone(i, m.byte())
		}
	case 6:
		if i, ok := pick(m, m.recs); ok {
			rec := m.recs[i]
			m.recs = append(m.recs[:i], m.recs[i+1:]...)
			// Lost for good: its job, if any, goes back to the queue, and
			// the recorder never answers.
			if j, busy := m.busy[rec]; busy {
				delete(m.busy, rec)
				if !j.Verify {
					m.live[j.StoreKey]--
				}
			}
			m.st.RecorderLost(rec)
		}
	case 7:
		if len(m.recs) < 4 {
			m.addRecorder()
		}
	case 8:
		b := m.byte()
		if m.cfg.Disk {
			var es []PreloadEntry
			for k := 0; k < fuzzStoreKeys; k++ {
				if b&(1<<k) != 0 {
					es = append(es, PreloadEntry{FullKey: FullKey("fuzz", graphKey(k), nil), Key: graphKey(k)})
				}
			}
			m.preloads[m.st.Preload(es)] += 0
		}
	case 9:
		b := m.byte()
		key := graphKey(int(b>>2) % fuzzStoreKeys)
		if b&1 != 0 {
			// Store keys salted per pass are the ones a pass forgets.
			m.st.Forget([]uint64{FullKey("salt", key, nil)})
		} else {
			sk := FullKey("fuzz", key, nil)
			if b&2 != 0 {
				sk = FullKey("salt", key, nil)
			}
			m.st.Refused(sk, m.image(key, b>>4).Hash, errors.New("launch refused"))
		}
	}
	m.apply()
}

// drain answers everything outstanding (recordings succeed, loads and
// fetches miss) until the store asks for nothing more, then checks that
// every request has its answer.
func (m *storeModel) drain() {
	t := m.t
	if len(m.recs) == 0 {
		m.addRecorder()
	}
	for guard := 0; ; guard++ {
		if guard > 10000 {
			t.Fatal("the store did not settle")
		}
		switch {
		case len(m.busyRecorders()) > 0:
			m.built(0, true, 0)
		case len(m.loads) > 0:
			m.loadDone(0, 1)
		case len(m.fetches) > 0:
			m.fetchDone(0, 1)
		default:
			if q := m.st.Queued(); q != 0 {
				t.Fatalf("%d jobs queued with %d recorders idle and nothing outstanding", q, len(m.recs))
			}
			for _, j := range m.jobs {
				if m.answered[j.id] != 1 {
					t.Fatalf("job %d (key %s, verify %v) never answered", j.id, j.Key, j.Verify)
				}
			}
			for id, n := range m.preloads {
				if n != 1 {
					t.Fatalf("preload %d reported %d times", id, n)
				}
			}
			return
		}
		m.apply()
	}
}
