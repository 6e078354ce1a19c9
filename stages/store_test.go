package stages

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestStoreScripts drives the Definition store's state machine from the
// scripts in testdata/store: requests, recordings, loads, fetches,
// recorders lost and device refusals in, actions out. Rewrite the expected
// output with -rewrite, and commit only diffs you understand.
//
// Commands:
//
//	store [disk] [peers] [recorders=N]          a fresh store, recorders r1..rN
//	recorders names=(r,...)                     recorders join the pool
//	request job=J key=K [pass=N] [verify] [salted]
//	built rec=R job=J [fail=TEXT] [nodes=N] [image=TAG]
//	loaded key=K [image=TAG] [reject=TEXT]     a load's answer (no image: a miss)
//	fetched job=J [image=TAG] [reject] [check]  the cluster's answer (no image: record here; check: FetchCheck)
//	lost rec=R                                  a recorder stopped for good
//	preload keys=(K,...)                        load ahead of any request
//	forget keys=(K,...)
//	refused key=K image=TAG                     the device refused that image
//	stats
func TestStoreScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/store", func(t *testing.T, path string) {
		var env *storeEnv
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "store" {
				env = newStoreEnv(t, d)
				return env.flush()
			}
			if env == nil {
				d.Fatalf(t, "store first")
			}
			return env.handle(t, d)
		})
	})
}

// scriptJob is a request as the script names it.
type scriptJob struct {
	RecordRequest
	name string
}

func (j *scriptJob) Request() *RecordRequest { return &j.RecordRequest }

type storeEnv struct {
	st    *Store[*scriptJob]
	jobs  map[string]*scriptJob
	names map[uint64]string     // store key -> graph key
	defs  map[string]*Published // image tag -> its Definition
	tags  map[*Published]string
	out   strings.Builder
}

func newStoreEnv(t *testing.T, d *datadriven.TestData) *storeEnv {
	e := &storeEnv{
		st:   NewStore[*scriptJob](StoreConfig{Disk: d.HasArg("disk"), Peers: d.HasArg("peers")}),
		jobs: map[string]*scriptJob{}, names: map[uint64]string{}, defs: map[string]*Published{}, tags: map[*Published]string{},
	}
	var recs []string
	for i := 1; i <= intArg(t, d, "recorders", 2); i++ {
		recs = append(recs, fmt.Sprintf("r%d", i))
	}
	e.st.Recorders(recs...)
	return e
}

func (e *storeEnv) printf(format string, a ...any) { fmt.Fprintf(&e.out, format, a...) }

func storeKeyOf(key string) uint64 { return FullKey("script", key, nil) }

// image is the Definition an image tag names (the same tag, the same
// Definition; a tag is "key" or "key#variant").
func (e *storeEnv) image(key, tag string) *Published {
	if tag == "" {
		tag = key
	}
	if d := e.defs[tag]; d != nil {
		return d
	}
	// Not a real image: the content hash stands for one (a verification
	// of two tags decodes them, and says so when they do not read).
	img := []byte("image " + tag)
	d := &Published{Def: &Definition{Key: key, FullKey: storeKeyOf(key)}, Image: img, Hash: FullKey("image", tag, nil)}
	e.defs[tag], e.tags[d] = d, tag
	return d
}

func (e *storeEnv) job(t *testing.T, d *datadriven.TestData) *scriptJob {
	j := e.jobs[strArg(t, d, "job")]
	if j == nil {
		d.Fatalf(t, "no job %q", strArg(t, d, "job"))
	}
	return j
}

func listArg(t *testing.T, d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return a.Vals
		}
	}
	d.Fatalf(t, "want %s=(...)", key)
	return nil
}

func (e *storeEnv) handle(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "recorders":
		e.st.Recorders(listArg(t, d, "names")...)
	case "request":
		key := strArg(t, d, "key")
		fk := storeKeyOf(key)
		sk := fk
		if d.HasArg("salted") {
			sk = FullKey("salt", key, nil)
		}
		j := &scriptJob{name: strArg(t, d, "job"), RecordRequest: RecordRequest{
			Pass: uint64(intArg(t, d, "pass", 1)), StoreKey: sk, FullKey: fk, Key: key, Verify: d.HasArg("verify")}}
		e.jobs[j.name], e.names[sk] = j, key
		e.st.Request(j)
	case "built":
		j := e.job(t, d)
		b := Recording{Nodes: intArg(t, d, "nodes", 3), RecordNs: 100, BuildNs: 10}
		if f := strArg(t, d, "fail"); f != "" {
			b.Err, b.Nodes = errors.New(f), 0
		} else {
			b.Def = e.image(j.Key, strArg(t, d, "image"))
		}
		e.st.Built(strArg(t, d, "rec"), j, b)
	case "loaded":
		key := strArg(t, d, "key")
		var def *Published
		var load StoreLoad
		var rej error
		if tag := strArg(t, d, "image"); tag != "" {
			def = e.image(key, tag)
			load = StoreLoad{Loaded: 1, Bytes: int64(len(def.Image)), Ns: 50}
		}
		if r := strArg(t, d, "reject"); r != "" {
			rej = fmt.Errorf("graph %q: %s", key, r)
		}
		e.st.LoadDone(storeKeyOf(key), def, load, rej)
	case "fetched":
		j := e.job(t, d)
		f := PeerFetch{Asked: 1, Ns: 70}
		var def *Published
		switch tag := strArg(t, d, "image"); {
		case d.HasArg("reject"):
			f.Rejected = []error{fmt.Errorf("graph %q: image from peer rejected", j.Key)}
			f.Warnings = []string{f.Rejected[0].Error() + "; recorded here"}
		case tag != "" && d.HasArg("check"):
			e.st.FetchCheck(j, e.image(j.Key, tag), f, "p")
			return e.flush()
		case tag != "":
			def = e.image(j.Key, tag)
			f.Loaded, f.Bytes = 1, int64(len(def.Image))
		}
		e.st.FetchDone(j, def, f)
	case "lost":
		e.st.RecorderLost(strArg(t, d, "rec"))
	case "preload":
		var es []PreloadEntry
		for _, k := range listArg(t, d, "keys") {
			es = append(es, PreloadEntry{FullKey: storeKeyOf(k), Key: k})
			e.names[storeKeyOf(k)] = k
		}
		id := e.st.Preload(es)
		e.printf("preload %d\n", id)
	case "forget":
		var ks []uint64
		for _, k := range listArg(t, d, "keys") {
			for sk, name := range e.names {
				if name == k {
					ks = append(ks, sk)
				}
			}
		}
		e.st.Forget(ks)
	case "refused":
		key := strArg(t, d, "key")
		def := e.image(key, strArg(t, d, "image"))
		if !e.st.Refused(storeKeyOf(key), def.Hash, errors.New("launch refused: image does not read")) {
			e.printf("refusal ignored (recorded here, or not the key's Definition)\n")
		}
	case "stats":
		s := e.st.Stats()
		e.printf("recorded %d (%d nodes), max queued %d, loaded %d, rejected %d, fetched %d (%d bytes), fetch rejected %d, refused %d; queued %d\n",
			s.Recorded, s.RecordedNodes, s.MaxQueued, s.Loaded, s.Rejected, s.Fetched, s.FetchedBytes, s.FetchRejected, s.Refused, e.st.Queued())
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return e.flush()
}

// flush prints the actions the store asks for, one a line.
func (e *storeEnv) flush() string {
	for _, a := range e.st.Actions() {
		switch a.Kind {
		case StoreDispatch:
			e.printf("dispatch %s to %s\n", a.Job.name, a.Recorder)
		case StoreLoadKey:
			if a.Job != nil {
				e.printf("load %s for %s\n", a.GraphKey, a.Job.name)
			} else {
				e.printf("load %s for preload %d\n", a.GraphKey, a.Preload)
			}
		case StoreFetch:
			e.printf("fetch %s for %s\n", a.Job.Key, a.Job.name)
		case StoreAnswer:
			e.printf("answer %s: %s\n", a.Job.name, e.outcome(a.Outcome))
		case StoreWrite:
			e.printf("write %s\n", e.tags[a.Def])
		case StoreRecorded:
			what := "failed"
			if a.Def != nil {
				what = "image " + e.tags[a.Def]
			}
			e.printf("recorded %s: %s\n", a.Job.name, what)
		case StoreUnpin:
			e.printf("unpin %s\n", e.names[a.Key])
		case StorePreloaded:
			e.printf("preloaded %d: loaded %d (%d bytes), rejected %d\n", a.Preload, a.Load.Loaded, a.Load.Bytes, len(a.Load.Rejected))
		case StoreQuarantine:
			e.printf("quarantine %s: %v\n", a.GraphKey, a.Err)
		}
	}
	s := e.out.String()
	e.out.Reset()
	return s
}

func (e *storeEnv) outcome(o Outcome) string {
	var b []string
	b = append(b, fmt.Sprintf("pass %d", o.Pass))
	if o.Verify {
		b = append(b, "verify")
	}
	switch {
	case o.Err != nil:
		b = append(b, "failed: "+o.Err.Error())
	case o.Def != nil:
		b = append(b, "def "+e.tags[o.Def])
	default:
		b = append(b, "no def")
	}
	if o.Recorded {
		b = append(b, fmt.Sprintf("recorded %d nodes", o.RecordedNodes))
	}
	if l := o.Store; l.Loaded > 0 || len(l.Rejected) > 0 {
		b = append(b, fmt.Sprintf("store loaded %d preloaded %d ns %d", l.Loaded, l.Preloaded, l.Ns))
		for _, r := range l.Rejected {
			b = append(b, "rejected: "+r.Error())
		}
	}
	if f := o.Fetch; f.Asked > 0 {
		b = append(b, fmt.Sprintf("fetch asked %d fetched %d rejected %d", f.Asked, f.Loaded, len(f.Rejected)))
	}
	for _, df := range o.Defects {
		b = append(b, "defect: "+df.Msg)
	}
	return strings.Join(slices.Clip(b), "; ")
}
