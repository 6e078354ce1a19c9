package stages

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestPassScripts drives a rank's Host and Replay from the scripts in
// testdata/pass: Graph calls, the end of host_orch, outcomes from the
// pipeline and device replies in, actions out. Rewrite the expected output
// with -rewrite, and commit only diffs you understand.
//
// Commands:
//
//	host [no-retain] [strict] [warn] [skip-device]  a fresh rank
//	begin [round=N]                                 a pass starts host_orch
//	call key=K [row=N] [rows=N] [scalar=N]          one Graph call
//	end [err=TEXT]                                  host_orch ends: handoff
//	defined pass=N key=K [verify] [fail=unsupported|panic] [defect=TEXT]
//	        [nodes=N] [bytes=N] [upload-err=TEXT]   an outcome reaches the replay
//	device [err=TEXT] [refused=K]                   the device's next reply (refused: for K's Definition)
//	cancel pass=N                                   the caller gave up
//	rerun                                           the Host reruns the pass the replay gave back
//
// Any command takes at=T, the clock reading (ns) when it happens: a script
// that gives one drives each pass's PhaseClock too (begin and rerun start an
// orchestration, end ends it, a ship and a failure close graph_upload at
// the command's time, device took=N is the copy's arena_h2d) and prints its
// figures.
func TestPassScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/pass", func(t *testing.T, path string) {
		var env *passEnv
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "host" {
				env = newPassEnv(t, d)
				return ""
			}
			if env == nil {
				d.Fatalf(t, "host first")
			}
			return env.handle(t, d)
		})
	})
}

type passEnv struct {
	host   *Host
	replay *Replay
	names  map[uint64]string // store key -> graph key
	orch   Submitter
	rerun  *Pass
	out    strings.Builder
	// The phase clock, in a script that gives times (at=).
	timed  bool
	now    int64
	orchAt int64                  // when the running orchestration began
	clocks map[uint64]*PhaseClock // by pass id; a rerun's is its pass's
	keys   bool                   // print each pass's keys at its end
}

const scriptRows = 64

var scriptEntry = []Root{
	{Name: "x", Kind: RootEntry, DType: FP32, Shape: []int64{scriptRows, 16}, Elems: scriptRows * 16},
	{Name: "y", Kind: RootEntryOutput, DType: FP32, Shape: []int64{scriptRows, 16}, Elems: scriptRows * 16},
}

func newPassEnv(t *testing.T, d *datadriven.TestData) *passEnv {
	var cfg PassConfig
	cfg.NoRetain = d.HasArg("no-retain")
	cfg.StrictRecording = d.HasArg("strict")
	cfg.DefectsAsWarnings = d.HasArg("warn")
	cfg.SkipDevice = d.HasArg("skip-device")
	cfg.OrdinaryWhileRecording = d.HasArg("ordinary")
	cfg.KeepDefinitions = intArg(t, d, "keep-definitions", 0)
	cfg.KeepBytes = int64(intArg(t, d, "keep-bytes", 0))
	e := &passEnv{host: NewHost(0, cfg), replay: NewReplay(), names: map[uint64]string{}, clocks: map[uint64]*PhaseClock{}}
	// A script of the residency budget or of keys recorded beside the
	// passes is told what each pass did with its keys.
	e.keys = cfg.OrdinaryWhileRecording || cfg.KeepDefinitions > 0 || cfg.KeepBytes > 0
	e.orch = scriptSubmitter{e}
	return e
}

// scriptSubmitter is the Submitter a body falling back runs on: ordinary
// calls on the Host's OrdinaryPath, Graph calls back through the Host.
type scriptSubmitter struct{ e *passEnv }

func (o scriptSubmitter) Alloc(s []RootSpec) (TaskID, RootID) { return o.e.host.Ordinary().Alloc(s) }
func (o scriptSubmitter) Submit(t *Task) TaskID               { return o.e.host.Ordinary().Submit(t) }
func (o scriptSubmitter) ScopeBegin(m ScopeMode)              { o.e.host.Ordinary().ScopeBegin(m) }
func (o scriptSubmitter) ScopeEnd()                           { o.e.host.Ordinary().ScopeEnd() }
func (o scriptSubmitter) Graph(c *GraphCall) TaskID           { return o.e.host.Graph(c, o) }

// TestLentBoundary: a Graph call's boundary is lent from the same slots
// call after call, and goes into the run image narrow when it replays; one
// that falls back to the ordinary path (a boundary mismatch) runs its body
// on a copy, since a Graph call inside the body lends the same slots again.
func TestLentBoundary(t *testing.T) {
	h := NewHost(0, PassConfig{})
	o := hostOnly{h}
	h.Begin("lent", scriptEntry, 1, 0)
	var seen [][]Arg
	body := func(o Submitter, b *Boundary) error {
		// A nested call writes its own boundary into the lent slots: had
		// the body not had a copy, that would change its boundary.
		inner := h.GraphBoundary(2)
		inner[0] = Arg{Tag: TagInput, View: NewView(1, 0, FP32, 16)}
		inner[1] = Arg{Tag: TagOutputExisting, View: NewView(0, 48, FP32, 16)}
		o.Graph(&GraphCall{Key: "inner", Boundary: inner, Body: scriptBody})
		o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 1, Args: []Arg{b.Tensors[1], b.Tensors[0]}})
		seen = append(seen, slices.Clone(b.Tensors))
		return nil
	}
	call := func(rows int64) (*GraphCall, []Arg) {
		bnd := h.GraphBoundary(2)
		bnd[0] = Arg{Tag: TagInput, View: NewView(0, 16, FP32, rows, 16)}
		bnd[1] = Arg{Tag: TagInOut, View: NewView(1, 32, FP32, rows, 16)}
		return &GraphCall{Key: "k", Boundary: bnd, Scalars: []uint64{7}, Body: body}, slices.Clone(bnd)
	}
	c, want := call(4)
	id := h.Graph(c, o) // a new key: a shell, its boundary taken narrow
	img := h.Ordinary().Image()
	for i, w := range want {
		if got := img.BoundArg(int(img.Tasks[id].Args.Off) + i); got != (BoundArg{Offset: w.View.Offset, Root: w.View.Root, Tag: w.Tag}) {
			t.Fatalf("shell boundary slot %d: %+v, want %v", i, got, w)
		}
	}
	if again := h.GraphBoundary(2); &again[0] != &c.Boundary[0] {
		t.Fatalf("the second call's slots are not the first's")
	}
	c, want = call(2) // another layout: a mismatch, run on the ordinary path
	h.Graph(c, o)
	if p := h.End(nil); p.Counts.BoundaryMismatches != 1 || p.Counts.GraphSubmissions != 2 {
		t.Fatalf("counts %+v, want one mismatch and two Graph submissions (k and inner)", p.Counts)
	}
	if len(seen) != 1 || !slices.Equal(seen[0], want) {
		t.Fatalf("the body ran with boundary %v, want %v", seen, want)
	}
}

// hostOnly routes a body's calls to a Host's ordinary path and its Graph.
type hostOnly struct{ h *Host }

func (o hostOnly) Alloc(s []RootSpec) (TaskID, RootID) { return o.h.Ordinary().Alloc(s) }
func (o hostOnly) Submit(t *Task) TaskID               { return o.h.Ordinary().Submit(t) }
func (o hostOnly) ScopeBegin(m ScopeMode)              { o.h.Ordinary().ScopeBegin(m) }
func (o hostOnly) ScopeEnd()                           { o.h.Ordinary().ScopeEnd() }
func (o hostOnly) Graph(c *GraphCall) TaskID           { return o.h.Graph(c, o) }
func scriptBody(o Submitter, b *Boundary) error        { o.Submit(scriptTask(b)); return nil }
func scriptTask(b *Boundary) *Task {
	return &Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 1,
		Args: []Arg{b.Tensors[0], b.Tensors[1]}, Scalars: []Scalar{b.Scalars[0]}}
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	if !d.HasArg(key) {
		return def
	}
	var v int
	d.ScanArgs(t, key, &v)
	return v
}

func strArg(t *testing.T, d *datadriven.TestData, key string) string {
	if !d.HasArg(key) {
		return ""
	}
	var v string
	d.ScanArgs(t, key, &v)
	return v
}

func (e *passEnv) printf(format string, a ...any) { fmt.Fprintf(&e.out, format, a...) }

func (e *passEnv) handle(t *testing.T, d *datadriven.TestData) string {
	e.out.Reset()
	if d.HasArg("at") {
		e.timed, e.now = true, int64(intArg(t, d, "at", 0))
	}
	switch d.Cmd {
	case "begin":
		p := e.host.Begin("script", scriptEntry, 1, intArg(t, d, "round", 0))
		e.clocks[p.ID], e.orchAt = &PhaseClock{}, e.now
		e.printf("pass %d: host_orch\n", p.ID)
	case "call":
		e.call(t, d)
	case "end":
		var err error
		if s := strArg(t, d, "err"); s != "" {
			err = errors.New(s)
		}
		p := e.host.End(err)
		c := p.Counts
		e.printf("pass %d: handoff: %d tasks (%d Graph), waiting for %s\n", p.ID, c.HostSubmissions, c.GraphSubmissions, e.keyList(p.Waiting()))
		if e.keys {
			e.printf("  keys met %d, recorded again %d; evicted %s; kept %d (%d bytes)\n", c.KeysMet, c.Rerecorded, e.keyList(p.Evicted), c.Kept, c.KeptBytes)
			for _, w := range p.Warnings {
				e.printf("  warning: %s\n", w)
			}
		}
		if e.timed {
			clock := e.clocks[p.ID]
			open := clock.Orchestrated(e.orchAt, e.now)
			e.printf("clock: host_orch %d", clock.HostOrch)
			if open {
				clock.UploadOpened(e.now)
				e.printf(", graph_upload opens at %d", e.now)
			}
			e.printf("\n")
		}
		e.replay.Handoff(p)
	case "defined":
		e.replay.Defined(e.outcome(t, d))
	case "device":
		var err error
		if s := strArg(t, d, "err"); s != "" {
			err = errors.New(s)
		}
		if k := strArg(t, d, "refused"); k != "" {
			for sk, n := range e.names {
				if n == k {
					e.replay.Refused(sk ^ 0xdef) // the script's Definitions' hash
				}
			}
		}
		p, launched, over := e.replay.DeviceReplied(err)
		switch {
		case over:
			e.printf("device reply absorbed (its pass is over)\n")
		case launched:
			e.printf("pass %d: launched\n", p.ID)
		default:
			e.printf("pass %d: copied\n", p.ID)
			if e.timed {
				clock := e.clocks[p.ID]
				clock.Copied(int64(intArg(t, d, "took", 0)))
				e.printf("clock: arena_h2d %d, on the device at %d\n", clock.ArenaH2D, clock.Ready())
			}
		}
	case "cancel":
		e.replay.Cancel(uint64(intArg(t, d, "pass", 0)), errors.New("context canceled"))
	case "rerun":
		if e.rerun == nil {
			d.Fatalf(t, "no pass to rerun")
		}
		p := e.host.Rerun(e.rerun)
		e.clocks[p.ID], e.orchAt = e.clocks[e.rerun.ID], e.now
		e.rerun = nil
		e.printf("pass %d: host_orch (rerun)\n", p.ID)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	e.actions()
	return e.out.String()
}

func (e *passEnv) call(t *testing.T, d *datadriven.TestData) {
	key := strArg(t, d, "key")
	row := int64(intArg(t, d, "row", 0))
	rows := int64(intArg(t, d, "rows", 4))
	// The boundary is written into the run image's lent slots, as the
	// model interpreter writes it (BoundaryWriter).
	bnd := e.host.GraphBoundary(2)
	bnd[0] = Arg{Tag: TagInput, View: NewView(0, row*16, FP32, rows, 16)}
	bnd[1] = Arg{Tag: TagInOut, View: NewView(1, row*16, FP32, rows, 16)}
	call := &GraphCall{
		Key:      key,
		Boundary: bnd,
		Scalars:  []uint64{uint64(intArg(t, d, "scalar", 0))},
		Body:     scriptBody,
	}
	p := e.host.p
	before := p.Counts
	shells, warnings := len(p.shells), len(p.Warnings)
	id := e.host.Graph(call, e.orch)
	c := p.Counts
	what := "replay"
	switch {
	case c.BoundaryMismatches > before.BoundaryMismatches:
		what = "mismatch, ordinary path"
	case c.FallbackCalls > before.FallbackCalls:
		what = "failed key, ordinary path"
	case len(p.shells) > shells:
		what = "shell"
	case c.OrdinaryWhileRecording > before.OrdinaryWhileRecording:
		what = "ordinary path while the key records"
	}
	e.printf("t%d: %s\n", id, what)
	for _, j := range e.host.TakeJobs() {
		e.names[j.StoreKey] = j.Key
		verb := "record"
		if j.Verify {
			verb = "verify"
		}
		e.printf("  %s %s (row %d, scalar %d)\n", verb, j.Key, j.Boundary[0].View.Offset/16, j.Scalars[0])
	}
	for _, w := range p.Warnings[warnings:] {
		e.printf("  warning: %s\n", w)
	}
}

func (e *passEnv) outcome(t *testing.T, d *datadriven.TestData) Outcome {
	key := strArg(t, d, "key")
	var sk uint64
	for k, n := range e.names {
		if n == key {
			sk = k
		}
	}
	if sk == 0 {
		d.Fatalf(t, "no record request for key %q", key)
	}
	o := Outcome{Pass: uint64(intArg(t, d, "pass", 0)), StoreKey: sk, Verify: d.HasArg("verify"), Detached: d.HasArg("detached")}
	switch strArg(t, d, "fail") {
	case "":
		nodes := intArg(t, d, "nodes", 3)
		def := &Definition{Key: key, FullKey: sk, Nodes: make([]NodeDesc, nodes), HeapBytes: 1024}
		o.Def = &Published{Def: def, Hash: sk ^ 0xdef, Image: make([]byte, 100)}
		if !o.Verify {
			o.Recorded = true
			o.RecordedNodes = nodes
			o.UploadedBytes = int64(intArg(t, d, "bytes", 100))
		}
	case "unsupported":
		o.Err = fmt.Errorf("graph %q: %w: nested Graph", key, ErrUnsupported)
	case "panic":
		o.Err, o.Panicked = fmt.Errorf("graph %q: body panicked while recording: boom", key), true
	default:
		d.Fatalf(t, "fail=unsupported or fail=panic")
	}
	if s := strArg(t, d, "defect"); s != "" {
		o.Defects = []Defect{{Key: key, Kind: DefectBakedScalar, Slot: -1, Node: 0, Msg: s}}
	}
	if s := strArg(t, d, "upload-err"); s != "" {
		o.UploadErr = errors.New(s)
	}
	return o
}

func (e *passEnv) keyList(sks []uint64) string {
	if len(sks) == 0 {
		return "nothing"
	}
	names := make([]string, len(sks))
	for i, k := range sks {
		names[i] = e.names[k]
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// actions prints the Replay's actions and does what the actors do with the
// ones that concern the Host.
func (e *passEnv) actions() {
	for _, a := range e.replay.Actions() {
		p := a.Pass
		switch a.Kind {
		case ActLearn, ActRerun:
			if p == nil {
				e.printf("%s (no pass waits):", a.Kind)
			} else {
				e.printf("%s pass %d:", a.Kind, p.ID)
			}
			for _, l := range a.Learned {
				switch {
				case l.Forget:
					e.printf(" %s=forget", e.names[l.StoreKey])
				case l.Failed != nil:
					e.printf(" %s=failed", e.names[l.StoreKey])
				default:
					e.printf(" %s=defined", e.names[l.StoreKey])
				}
			}
			e.printf("\n")
			e.host.Learn(a.Learned)
			if a.Kind == ActRerun {
				e.rerun = p
			}
		case ActShip:
			if e.timed {
				clock := e.clocks[p.ID]
				clock.Shipped(e.now)
				e.printf("clock: graph_upload %d, shipped at %d\n", clock.GraphUpload, clock.Ship)
			}
			img := p.Image
			var heap []string
			for _, g := range img.Graphs {
				heap = append(heap, fmt.Sprintf("%d", g.HeapBase))
			}
			e.printf("ship pass %d: %d tasks, %d Graph (heap bases %s, top %d), %d Definitions, %d device tasks expected\n",
				p.ID, len(img.Tasks), len(img.Graphs), strings.Join(heap, " "), img.HeapBytes, p.Counts.Definitions, p.Counts.ExpectedDeviceTasks)
		case ActReply:
			c := p.Counts
			if p.Err != nil {
				e.printf("reply pass %d: error: %v\n", p.ID, p.Err)
			} else {
				e.printf("reply pass %d: ok\n", p.ID)
			}
			e.printf("  calls %d, graph %d, mismatches %d, fallback %d, verified %d, demoted %d; built %d, nodes %d, uploaded %d bytes\n",
				c.GraphCalls, c.GraphSubmissions, c.BoundaryMismatches, c.FallbackCalls, c.Verified, c.Demoted, p.BuiltDefinitions, p.RecordedNodes, p.UploadedBytes)
			if c.OrdinaryWhileRecording > 0 {
				e.printf("  ordinary while recording %d (%d barriers)\n", c.OrdinaryWhileRecording, c.Barriers)
			}
			for _, w := range p.Warnings {
				e.printf("  warning: %s\n", w)
			}
			if clock := e.clocks[p.ID]; e.timed {
				if clock.Uploading() {
					clock.UploadClosed(e.now) // failed before it shipped
				}
				e.printf("  clock: host_orch %d + graph_upload %d + arena_h2d %d = control plane %d, within %d since begin\n",
					clock.HostOrch, clock.GraphUpload, clock.ArenaH2D, clock.HostOrch+clock.GraphUpload+clock.ArenaH2D, e.now-clock.Begin)
			}
			e.host.Recycle(p.Image)
		}
	}
}
