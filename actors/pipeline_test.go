package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
)

// keysModel is a Go orchestration with n distinct Graph keys submitted back
// to back, each called calls times on different slices of its own rows.
type keysModel struct {
	keys, calls int
	body        stages.BodyFunc
	inputTag    stages.Tag // tag of the written slot (TagInOut normally)
	config      func(k, c int) []uint64
	// first, if set, receives the id of the dummy task the orchestration
	// submits before its Graph calls.
	first *stages.TaskID
	// shift, if set, is added to every call's boundary scalar as the pass
	// runs: a step whose boundary values change from pass to pass.
	shift *uint64
}

const rowsPerCall = 4

func (m keysModel) orchestration(name string) *Orchestration {
	rows := int64(m.keys * m.calls * rowsPerCall)
	entry := []stages.Root{
		{Name: "x", Kind: stages.RootEntry, DType: stages.FP32, Shape: []int64{rows, 16}, Elems: rows * 16},
		{Name: "y", Kind: stages.RootEntryOutput, DType: stages.FP32, Shape: []int64{rows, 16}, Elems: rows * 16},
		// z is in no boundary: a body that reads it hides it from its caller.
		{Name: "z", Kind: stages.RootEntry, DType: stages.FP32, Shape: []int64{16}, Elems: 16},
	}
	body := m.body
	if body == nil {
		body = rowBody
	}
	wtag := m.inputTag
	if wtag == 0 {
		wtag = stages.TagInOut
	}
	return &Orchestration{
		Name:    name,
		Entry:   entry,
		Kernels: []stages.Kernel{{Name: "scale", Core: stages.KindAIV, Code: "scale"}, {Name: "mm", Core: stages.KindAIC, Code: "mm"}},
		Run: func(o stages.Submitter) error {
			// A task before every Graph call: a body that depends on it
			// depends across its boundary.
			id := o.Submit(&stages.Task{Kind: stages.KindDummy, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1})
			if m.first != nil {
				*m.first = id
			}
			for c := 0; c < m.calls; c++ {
				for k := 0; k < m.keys; k++ {
					row := int64((c*m.keys + k) * rowsPerCall)
					var shift uint64
					if m.shift != nil {
						shift = *m.shift
					}
					call := &stages.GraphCall{
						Key: fmt.Sprintf("key-%d", k),
						Boundary: []stages.Arg{
							{Tag: stages.TagInput, View: stages.NewView(0, row*16, stages.FP32, rowsPerCall, 16)},
							{Tag: wtag, View: stages.NewView(1, row*16, stages.FP32, rowsPerCall, 16)},
						},
						Scalars: []uint64{uint64(c*1000+k) + shift},
						Body:    body,
					}
					if m.config != nil {
						call.Config = m.config(k, c)
					}
					o.Graph(call)
				}
			}
			return nil
		},
	}
}

// rowBody: an internal buffer, a vector kernel scaled by the boundary scalar,
// a cube kernel into the output slot.
func rowBody(o stages.Submitter, b *stages.Boundary) error {
	_, tmp := o.Alloc([]stages.RootSpec{{Name: "tmp", DType: stages.FP32, Shape: []int64{rowsPerCall, 16}}})
	o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 0, -1}, BlockNum: 2,
		Args:    []stages.Arg{{Tag: stages.TagInput, View: b.Tensors[0].View}, {Tag: stages.TagOutputExisting, View: stages.NewView(tmp, 0, stages.FP32, rowsPerCall, 16)}},
		Scalars: []stages.Scalar{b.Scalars[0]}})
	o.Submit(&stages.Task{Kind: stages.KindAIC, Kernel: [3]stages.KernelID{1, -1, -1}, BlockNum: 1,
		Args: []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(tmp, 0, stages.FP32, rowsPerCall, 16)}, {Tag: stages.TagInOut, View: b.Tensors[1].View}}})
	return nil
}

func newRuntime(t *testing.T, cfg Config, hook func(*mailbox.RecordJob)) *Runtime {
	t.Helper()
	sys := NewActorSystem(nil)
	rt, err := start(sys, cfg, hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()); sys.Shutdown() })
	return rt
}

func runPass(t *testing.T, rt *Runtime, orch *Orchestration, round int) *PassResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := rt.Pass(ctx, orch, 0, round)
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	return res
}

func eagerDigest(t *testing.T, orch *Orchestration) (uint64, int) {
	t.Helper()
	rt := newRuntime(t, Config{Recorders: 1}, nil)
	res := runPass(t, rt, golden.Inline(orch), 0)
	return res.Device.Digest, res.Device.Tasks
}

// TestDistinctKeysNeverDemoted: 64 distinct keys back to back all record,
// whatever the pool size, and every call is served by its own key's
// Definition (the device result matches the eager twin's).
func TestDistinctKeysNeverDemoted(t *testing.T) {
	m := keysModel{keys: 64, calls: 2}
	orch := m.orchestration("keys")
	wantDigest, wantTasks := eagerDigest(t, orch)
	for _, pool := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("pool=%d", pool), func(t *testing.T) {
			rt := newRuntime(t, Config{Recorders: pool}, nil)
			res := runPass(t, rt, orch, 0)
			c := res.Counts
			if c.Demoted != 0 || c.GraphSubmissions != 128 || c.Definitions != 64 || res.Pass.BuiltDefinitions != 64 || c.OrdinaryTasks != 1 {
				t.Fatalf("counts %+v, built %d", c, res.Pass.BuiltDefinitions)
			}
			if res.Device.Digest != wantDigest || res.Device.Tasks != wantTasks {
				t.Fatalf("device digest %x tasks %d, eager twin %x tasks %d", res.Device.Digest, res.Device.Tasks, wantDigest, wantTasks)
			}
			// How deep the store's queue got depends on scheduling (how fast
			// recorders free up against the submission's pace), so it is
			// reported, not asserted; the counts above are the contract.
			t.Logf("pool %d: the store's job queue reached %d", pool, rt.Stats.MaxQueued.Load())
		})
	}
}

// TestDefinitionsKeptAcrossRuns: from round 2 on nothing records, builds or
// uploads; with NoRetain every round repeats round 1's counts.
func TestDefinitionsKeptAcrossRuns(t *testing.T) {
	orch := keysModel{keys: 3, calls: 2}.orchestration("kept")
	for _, noRetain := range []bool{false, true} {
		t.Run(fmt.Sprintf("noRetain=%v", noRetain), func(t *testing.T) {
			rt := newRuntime(t, Config{NoRetain: noRetain}, nil)
			first := runPass(t, rt, orch, 0)
			if first.Pass.RecordedNodes != 9 || first.Pass.BuiltDefinitions != 3 || first.Pass.UploadedDefinitionBytes == 0 {
				t.Fatalf("round 1: %+v", first.Pass)
			}
			for round := 1; round < 3; round++ {
				p := runPass(t, rt, orch, round)
				got := [3]int64{int64(p.Pass.RecordedNodes), int64(p.Pass.BuiltDefinitions), p.Pass.UploadedDefinitionBytes}
				want := [3]int64{}
				if noRetain {
					want = [3]int64{9, 3, first.Pass.UploadedDefinitionBytes}
				}
				if got != want {
					t.Fatalf("round %d: recorded nodes, built, uploaded bytes = %v, want %v", round+1, got, want)
				}
				if p.Device.Digest != first.Device.Digest {
					t.Fatalf("round %d digest differs", round+1)
				}
			}
		})
	}
}

// TestReplayTamperChangesDigest: the golden check has teeth. A replay
// patched with a wrong scalar, or a wrong view offset, ends with another
// digest.
func TestReplayTamperChangesDigest(t *testing.T) {
	orch := keysModel{keys: 2, calls: 3}.orchestration("tamper")
	rt := newRuntime(t, Config{}, nil)
	good := runPass(t, rt, orch, 0).Device.Digest
	if again := runPass(t, rt, orch, 1).Device.Digest; again != good {
		t.Fatalf("untampered replay digest %x, first %x", again, good)
	}
	tampers := map[string]func(img *stages.RunImage){
		"scalar": func(img *stages.RunImage) { img.Scalars[img.Graphs[3].Scalars.Off]++ },
		"offset": func(img *stages.RunImage) {
			i := int(img.Graphs[3].Boundary.Off)
			a := img.BoundArg(i)
			a.Offset += 16
			img.SetBoundArg(i, a)
		},
	}
	for name, f := range tampers {
		rt.imageHook = f
		if d := runPass(t, rt, orch, 2).Device.Digest; d == good {
			t.Errorf("%s tampered replay kept digest %x", name, d)
		}
	}
	rt.imageHook = nil
}

func TestRecordingFailures(t *testing.T) {
	panicky := func(o stages.Submitter, b *stages.Boundary) error {
		if b.Scalars[0].Value == 0 {
			panic("kernel table out of range")
		}
		rowBody(o, b)
		return nil
	}
	nested := func(o stages.Submitter, b *stages.Boundary) error {
		rowBody(o, b)
		if b.Scalars[0].Value == 1 {
			// A nested Graph over z, which the body neither received nor
			// allocated: no child Definition can bind it (unsupported).
			z := stages.Arg{Tag: stages.TagInput, View: stages.NewView(2, 0, stages.FP32, 16)}
			o.Graph(&stages.GraphCall{Key: "inner", Boundary: []stages.Arg{z, b.Tensors[1]}, Scalars: []uint64{7}, Body: rowBody})
		}
		return nil
	}
	t.Run("panic fails the pass and the recorder restarts", func(t *testing.T) {
		orch := keysModel{keys: 2, calls: 1, body: panicky}.orchestration("panic")
		rt := newRuntime(t, Config{Recorders: 1}, nil)
		_, err := rt.Pass(context.Background(), orch, 0, 0)
		if err == nil || !strings.Contains(err.Error(), `graph "key-0"`) || !strings.Contains(err.Error(), "kernel table out of range") {
			t.Fatalf("want the key and the cause, got %v", err)
		}
		// The restarted recorder takes the next job normally. (The pool has
		// one recorder, so the restart, which the supervisor runs before the
		// recorder's next message, has happened once this pass has recorded.)
		ok := keysModel{keys: 2, calls: 1}.orchestration("after-panic")
		if res := runPass(t, rt, ok, 0); res.Pass.BuiltDefinitions != 2 {
			t.Fatalf("after restart: built %d", res.Pass.BuiltDefinitions)
		}
		if rt.Stats.Restarts.Load() != 1 {
			t.Fatalf("restarts %d, want 1", rt.Stats.Restarts.Load())
		}
	})
	t.Run("unsupported falls back with a warning", func(t *testing.T) {
		orch := keysModel{keys: 2, calls: 2, body: nested}.orchestration("nested")
		want, _ := eagerDigest(t, orch)
		rt := newRuntime(t, Config{}, nil)
		res := runPass(t, rt, orch, 0)
		if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "nested Graph") || res.Counts.FallbackCalls != 2 {
			t.Fatalf("warnings %q counts %+v", res.Warnings, res.Counts)
		}
		// key-1 fell back; its calls' own Graph call (inner) recorded on
		// the rerun like any other key.
		if res.Pass.BuiltDefinitions != 2 {
			t.Fatalf("built %d, want key-0 and inner", res.Pass.BuiltDefinitions)
		}
		if res.Device.Digest != want {
			t.Fatalf("fallback digest %x, eager twin %x", res.Device.Digest, want)
		}
	})
	t.Run("an unclassifiable tensor or a dependency across the boundary falls back", func(t *testing.T) {
		var first stages.TaskID
		for name, body := range map[string]stages.BodyFunc{
			"unclassifiable": func(o stages.Submitter, b *stages.Boundary) error {
				rowBody(o, b)
				o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 0, -1}, BlockNum: 1,
					Args: []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(2, 0, stages.FP32, 16)}, {Tag: stages.TagInOut, View: b.Tensors[1].View}}})
				return nil
			},
			"cross-boundary dependency": func(o stages.Submitter, b *stages.Boundary) error {
				o.Submit(&stages.Task{Kind: stages.KindDummy, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1, Deps: []stages.TaskID{first}})
				rowBody(o, b)
				return nil
			},
		} {
			orch := keysModel{keys: 1, calls: 2, body: body, first: &first}.orchestration(name)
			want, _ := eagerDigest(t, orch)
			rt := newRuntime(t, Config{}, nil)
			res := runPass(t, rt, orch, 0)
			if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "unsupported") || res.Counts.FallbackCalls != 2 || res.Pass.BuiltDefinitions != 0 {
				t.Errorf("%s: warnings %q, counts %+v, built %d", name, res.Warnings, res.Counts, res.Pass.BuiltDefinitions)
			}
			if res.Device.Digest != want {
				t.Errorf("%s: fallback digest %x, eager twin %x", name, res.Device.Digest, want)
			}
		}
	})
	t.Run("unsupported is an error with StrictRecording", func(t *testing.T) {
		orch := keysModel{keys: 2, calls: 1, body: nested}.orchestration("nested-strict")
		rt := newRuntime(t, Config{StrictRecording: true}, nil)
		_, err := rt.Pass(context.Background(), orch, 0, 0)
		if !errors.Is(err, stages.ErrUnsupported) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestDefectsDetected: each defect fires on a small model written to have it.
func TestDefectsDetected(t *testing.T) {
	baked := func(o stages.Submitter, b *stages.Boundary) error {
		_, tmp := o.Alloc([]stages.RootSpec{{Name: "tmp", DType: stages.FP32, Shape: []int64{rowsPerCall, 16}}})
		epoch := stages.Static(b.Scalars[0].Value + 1) // derived: loses its provenance
		o.Submit(&stages.Task{Kind: stages.KindAIV, Kernel: [3]stages.KernelID{-1, 0, -1}, BlockNum: 1,
			Args:    []stages.Arg{{Tag: stages.TagInput, View: b.Tensors[0].View}, {Tag: stages.TagOutputExisting, View: stages.NewView(tmp, 0, stages.FP32, rowsPerCall, 16)}},
			Scalars: []stages.Scalar{epoch}})
		o.Submit(&stages.Task{Kind: stages.KindAIC, Kernel: [3]stages.KernelID{1, -1, -1}, BlockNum: 1,
			Args: []stages.Arg{{Tag: stages.TagInput, View: stages.NewView(tmp, 0, stages.FP32, rowsPerCall, 16)}, {Tag: stages.TagInOut, View: b.Tensors[1].View}}})
		return nil
	}
	structural := func(o stages.Submitter, b *stages.Boundary) error {
		rowBody(o, b)
		if b.Scalars[0].Value >= 1000 { // a host-side if on a value outside the key (#1939)
			rowBody(o, b)
		}
		return nil
	}
	cases := []struct {
		name string
		m    keysModel
		kind stages.DefectKind
	}{
		{"input written", keysModel{keys: 1, calls: 2, inputTag: stages.TagInput}, stages.DefectInputWritten},
		{"baked scalar", keysModel{keys: 1, calls: 2, body: baked}, stages.DefectBakedScalar},
		{"structure not in key", keysModel{keys: 1, calls: 2, body: structural}, stages.DefectStructure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orch := tc.m.orchestration(tc.name)
			rt := newRuntime(t, Config{}, nil)
			_, err := rt.Pass(context.Background(), orch, 0, 0)
			var d stages.Defect
			if !errors.As(err, &d) || d.Kind != tc.kind {
				t.Fatalf("want a %v defect, got %v", tc.kind, err)
			}
			rtw := newRuntime(t, Config{DefectsAsWarnings: true}, nil)
			res := runPass(t, rtw, orch, 0)
			if len(res.Defects) != 1 || res.Defects[0].Kind != tc.kind || len(res.Warnings) == 0 {
				t.Fatalf("as warnings: defects %v warnings %v", res.Defects, res.Warnings)
			}
		})
	}
	t.Run("structure value in the key is fine", func(t *testing.T) {
		m := keysModel{keys: 1, calls: 2, body: structural, config: func(k, c int) []uint64 { return []uint64{uint64(c)} }}
		rt := newRuntime(t, Config{}, nil)
		res := runPass(t, rt, m.orchestration("keyed"), 0)
		if len(res.Defects) != 0 || res.Counts.Definitions != 2 {
			t.Fatalf("defects %v counts %+v", res.Defects, res.Counts)
		}
	})
}
