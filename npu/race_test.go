package npu

import (
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

func races(t *testing.T, d *Die, img []byte) []Race {
	t.Helper()
	r := launch(t, d, img)
	if r.RaceCount != len(r.Races) {
		t.Fatalf("RaceCount %d, %d listed", r.RaceCount, len(r.Races))
	}
	return r.Races
}

// TestRaceFreeImages: the hand-built images every other test runs have
// every edge they need.
func TestRaceFreeImages(t *testing.T) {
	if rs := races(t, newDevice(t), synth(synthOpts{}).bytes()); len(rs) != 0 {
		t.Errorf("synth: %v", rs)
	}
	def := blockDef()
	gb, eb := graphForm(def)
	d := newDevice(t)
	if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*builder{"graph": gb, "eager": eb} {
		if rs := races(t, d, b.bytes()); len(rs) != 0 {
			t.Errorf("%s: %v", name, rs)
		}
	}
	bl, ks := dsv4Like()
	dd := New(DefaultConfig())
	dd.RegisterEntry(bl.entry)
	dd.RegisterKernels(ks)
	if rs := races(t, dd, bl.bytes()); len(rs) != 0 {
		t.Errorf("dsv4Like: %d races, first %v", len(rs), rs[0].String())
	}
}

// wantRace checks that rs is exactly one race of kind k between a and b
// (image task, node) on root over [lo, hi).
func wantRace(t *testing.T, rs []Race, k RaceKind, a, b TaskRef, root stages.RootID, lo, hi int64) {
	t.Helper()
	if len(rs) != 1 {
		t.Fatalf("%d races, want 1: %v", len(rs), rs)
	}
	r := rs[0]
	if r.Kind != k || r.A.Task != a || r.B.Task != b || r.Root != root || r.Lo != lo || r.Hi != hi {
		t.Fatalf("got %s; want %s between %v and %v on root %d [%d, %d)", r.String(), k, a, b, root, lo, hi)
	}
}

func ord(t stages.TaskID) TaskRef { return TaskRef{Task: t, Node: -1} }

// TestPlantedRaces: each kind of race, planted in a small image, is found
// with the right pair and interval; the same image with the missing edge
// is race-free.
func TestPlantedRaces(t *testing.T) {
	bf := stages.BF16
	t.Run("write-write", func(t *testing.T) {
		for _, edge := range []bool{false, true} {
			b := newBuilder(synthEntry())
			w1 := b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eOut, 0, bf, 128))}, nil, nil, noPred)
			var f []stages.TaskID
			if edge {
				f = []stages.TaskID{w1}
			}
			// Overlaps the first write on [64, 128).
			w2 := b.kernel(stages.KindAIV, kAIV(kNorm), 1, []stages.Arg{in(view(eX, 0, bf, 256)), io(view(eOut, 64, bf, 192))}, nil, f, noPred)
			rs := races(t, newDevice(t), b.bytes())
			if edge {
				if len(rs) != 0 {
					t.Fatalf("with the edge: %v", rs)
				}
				continue
			}
			wantRace(t, rs, RaceWriteWrite, ord(w1), ord(w2), eOut, 64, 128)
			if rs[0].A.Arg != 1 || rs[0].B.Arg != 1 || rs[0].B.Tag != stages.TagInOut {
				t.Errorf("accesses %+v %+v", rs[0].A, rs[0].B)
			}
		}
	})
	t.Run("read-write", func(t *testing.T) {
		// A reader of kv, then a writer of it that does not wait for the
		// reader (write after read).
		for _, edge := range []bool{false, true} {
			b := newBuilder(synthEntry())
			r := b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{in(view(eKV, 256, bf, 256)), oe(view(eOut, 0, bf, 256))}, nil, nil, noPred)
			var f []stages.TaskID
			if edge {
				f = []stages.TaskID{r}
			}
			w := b.kernel(stages.KindAIC, kAIC(kMM), 2, []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eKV, 0, bf, 2, 256))}, nil, f, noPred)
			rs := races(t, newDevice(t), b.bytes())
			if edge {
				if len(rs) != 0 {
					t.Fatalf("with the edge: %v", rs)
				}
				continue
			}
			wantRace(t, rs, RaceReadWrite, ord(r), ord(w), eKV, 256, 512)
		}
	})
	t.Run("write-read through a manual scope", func(t *testing.T) {
		// On the ordinary path: inside a manual scope the TensorMap adds
		// no edge, so a reader that names no dependency races its writer.
		for _, dep := range []bool{false, true} {
			o := stages.NewOrdinaryPath(synthEntry())
			o.ScopeBegin(stages.ScopeManual)
			w := o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: kAIV(kAct), BlockNum: 1, Args: []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eOut, 0, bf, 256))}})
			var deps []stages.TaskID
			if dep {
				deps = []stages.TaskID{w}
			}
			r := o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: kAIV(kNorm), BlockNum: 1, Deps: deps, Args: []stages.Arg{in(view(eOut, 128, bf, 16)), oe(view(eOut2, 0, bf, 256))}})
			o.ScopeEnd()
			rs := races(t, newDevice(t), stages.EncodeRunImage(o.Image()))
			if dep {
				if len(rs) != 0 {
					t.Fatalf("with the dependency: %v", rs)
				}
				continue
			}
			wantRace(t, rs, RaceReadWrite, ord(w), ord(r), eOut, 128, 144)
			if !rs[0].A.Tag.Writes() || rs[0].B.Tag != stages.TagInput {
				t.Errorf("writer first, reader second: %+v %+v", rs[0].A, rs[0].B)
			}
		}
	})
	t.Run("a body node and an ordinary task", func(t *testing.T) {
		// The block's nodes 4 and 5 write out; an ordinary task reads it
		// without waiting for the GRAPH task.
		def := blockDef()
		for _, edge := range []bool{false, true} {
			b := newBuilder(synthEntry())
			c := calls()[0]
			g := b.graph(def, []stages.Arg{in(c.x), in(c.w), io(c.kv), oe(c.out)}, []uint64{c.layer}, nil)
			var f []stages.TaskID
			if edge {
				f = []stages.TaskID{g}
			}
			r := b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{in(view(eOut, 0, bf, 256)), oe(view(eOut2, 0, bf, 256))}, nil, f, noPred)
			d := newDevice(t)
			if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
				t.Fatal(err)
			}
			rs := races(t, d, b.bytes())
			if edge {
				if len(rs) != 0 {
					t.Fatalf("with the edge: %v", rs)
				}
				continue
			}
			// Node 5 is out's last writer (inout, after node 4).
			wantRace(t, rs, RaceReadWrite, TaskRef{Task: g, Node: 5}, ord(r), eOut, 0, 256)
			if rs[0].A.Key != "block" {
				t.Errorf("node's key %q", rs[0].A.Key)
			}
		}
	})
	t.Run("a predicate", func(t *testing.T) {
		// The predicate's element is read when its task becomes ready.
		b := newBuilder(synthEntry())
		w := b.kernel(stages.KindAIV, kAIV(kRoute), 1, []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eCnt, 0, stages.INT32, 16))}, nil, nil, noPred)
		pred := stages.Predicate{Valid: true, Op: stages.PredGT, View: view(eCnt, 0, stages.INT32, 16), Index: 3}
		r := b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eOut, 0, bf, 256))}, nil, nil, pred)
		rs := races(t, newDevice(t), b.bytes())
		wantRace(t, rs, RaceReadWrite, ord(w), ord(r), eCnt, 3, 4)
		if rs[0].B.Arg != -1 {
			t.Errorf("reader access %+v, want the predicate", rs[0].B)
		}
	})
}

func TestRaceDroppedEdge(t *testing.T) {
	// synth's dropDep leaves layer 2's norm reading h16 unordered with its
	// slow writer.
	rs := races(t, newDevice(t), synth(synthOpts{dropDep: true}).bytes())
	wantRace(t, rs, RaceReadWrite, ord(2), ord(3), rs[0].Root, 0, 256)
}

func TestNoRace(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NoRace = true
	d := New(cfg)
	d.RegisterEntry(synthEntry())
	d.RegisterKernels(testKernels())
	if r := launch(t, d, synth(synthOpts{dropDep: true}).bytes()); r.RaceCount != 0 || r.Races != nil {
		t.Fatalf("detector off, yet %d races", r.RaceCount)
	}
}

// TestRaceFarPair: a writer and a reader more than the bitsets' window
// apart are ordered through a long chain, or not.
func TestRaceFarPair(t *testing.T) {
	bf := stages.BF16
	for _, linked := range []bool{false, true} {
		b := newBuilder(synthEntry())
		w := b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eOut, 0, bf, 256))}, nil, nil, noPred)
		prev := b.dummy()
		if linked {
			b.img.Fanin = append(b.img.Fanin, w)
			b.img.Tasks[prev].Fanin = stages.Span{Off: uint32(len(b.img.Fanin) - 1), N: 1}
		}
		for i := 0; i < 3*raceWindow; i++ {
			// Side branches make the walk work: each dummy waits on the
			// previous one and on one more.
			prev = b.dummy(prev, stages.TaskID(len(b.img.Tasks)-1))
		}
		r := b.kernel(stages.KindAIV, kAIV(kNorm), 1, []stages.Arg{in(view(eOut, 0, bf, 256)), oe(view(eOut2, 0, bf, 256))}, nil, []stages.TaskID{prev}, noPred)
		rs := races(t, newDevice(t), b.bytes())
		if linked {
			if len(rs) != 0 {
				t.Fatalf("linked: %v", rs)
			}
			continue
		}
		wantRace(t, rs, RaceReadWrite, ord(w), ord(r), eOut, 0, 256)
	}
}

// TestRaceText: a race names each side's task, its kernel by the name the
// device was given (its core type when the table has none), and its op
// when the host filled one in, then the argument or the predicate; so the
// golden check's "first:" race reads like a report's race line.
func TestRaceText(t *testing.T) {
	bf := stages.BF16
	twoWriters := func(t *testing.T, d *Die) Race {
		b := newBuilder(synthEntry())
		b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eOut, 0, bf, 128))}, nil, nil, noPred)
		b.kernel(stages.KindAIV, kAIV(kNorm), 1, []stages.Arg{in(view(eX, 0, bf, 256)), io(view(eOut, 64, bf, 192))}, nil, nil, noPred)
		return races(t, d, b.bytes())[0]
	}
	unnamed := func() *Die {
		d := New(DefaultConfig())
		d.RegisterEntry(synthEntry())
		return d
	}
	for _, c := range []struct {
		name string
		race func(t *testing.T) Race
		want string
	}{
		{"ordinary tasks", func(t *testing.T) Race { return twoWriters(t, newDevice(t)) },
			"write-write race on root 3 [64, 128): task 0 act arg 1 (oe) and task 1 norm arg 1 (x)"},
		{"kernels the device was not given", func(t *testing.T) Race { return twoWriters(t, unnamed()) },
			"write-write race on root 3 [64, 128): task 0 aiv arg 1 (oe) and task 1 aiv arg 1 (x)"},
		{"a body node", func(t *testing.T) Race {
			def := blockDef()
			b := newBuilder(synthEntry())
			c := calls()[0]
			b.graph(def, []stages.Arg{in(c.x), in(c.w), io(c.kv), oe(c.out)}, []uint64{c.layer}, nil)
			b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{in(view(eOut, 0, bf, 256)), oe(view(eOut2, 0, bf, 256))}, nil, nil, noPred)
			d := newDevice(t)
			if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
				t.Fatal(err)
			}
			return races(t, d, b.bytes())[0]
		}, `read-write race on root 3 [0, 256): task 0 (graph "block" node 5) norm arg 0 (x) and task 1 act arg 0 (i)`},
		{"a predicate", func(t *testing.T) Race {
			b := newBuilder(synthEntry())
			b.kernel(stages.KindAIV, kAIV(kRoute), 1, []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eCnt, 0, stages.INT32, 16))}, nil, nil, noPred)
			pred := stages.Predicate{Valid: true, Op: stages.PredGT, View: view(eCnt, 0, stages.INT32, 16), Index: 3}
			b.kernel(stages.KindAIV, kAIV(kAct), 1, []stages.Arg{in(view(eX, 0, bf, 256)), oe(view(eOut, 0, bf, 256))}, nil, nil, pred)
			return races(t, newDevice(t), b.bytes())[0]
		}, "read-write race on root 4 [3, 4): task 0 route arg 1 (oe) and task 1 act predicate"},
		{"ops the host named, on an internal root", func(t *testing.T) Race {
			r := twoWriters(t, newDevice(t))
			r.A.Op, r.B.Op = "model.yaml:12", "model.yaml:40"
			r.Root, r.Graph, r.Internal = -1, 7, 2
			return r
		}, "write-write race on internal root 2 of GRAPH task 7 [64, 128): task 0 [model.yaml:12] act arg 1 (oe) and task 1 [model.yaml:40] norm arg 1 (x)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.race(t)
			if got := r.String(); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if got, want := r.Kind.String()+" "+r.Detail(), strings.Replace(c.want, " race ", " ", 1); got != want {
				t.Errorf("kind and detail %q, want %q", got, want)
			}
		})
	}
}
