// Package refwriter writes an orchestration's submission sequence in the
// reference trace format that package reftrace reads (JSON lines; see the
// reference README): one event per task with its arguments, scalars,
// explicit deps and fanin, scope and Graph events, and a summary. Fanin
// comes from stages' own TensorMap. It is reftrace's sibling rather than
// part of it because it depends on stages, whose own tests read traces
// with reftrace.
package refwriter

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"

	"github.com/hbg-dev/hbg/internal/reftrace"
	"github.com/hbg-dev/hbg/stages"
)

// Writer is a Submitter that submits to a stages.OrdinaryPath (the ordinary path)
// and writes every event. Graph calls run their body inline, and the body's
// tasks carry the graph field and the boundary slot of each argument.
type Writer struct {
	o       *stages.OrdinaryPath
	kernels []stages.Kernel
	w       *bufio.Writer
	err     error

	depth, manual int
	scopes        []stages.ScopeMode

	graph    *graphState
	inst     map[string]int
	nGraph   int
	ordinary int
	tasks    int
	edges    int
}

type graphState struct {
	def, key string
	inst     int
	boundary []stages.Arg
	ntasks   int
}

// New starts a trace of one run over the model's entry roots.
func New(w io.Writer, entry []stages.Root, kernels []stages.Kernel) *Writer {
	t := &Writer{o: stages.NewOrdinaryPath(entry), kernels: kernels, inst: map[string]int{}}
	if w != nil {
		t.w = bufio.NewWriterSize(w, 1<<16)
	}
	return t
}

// Ordinary is the ordinary path underneath.
func (t *Writer) Ordinary() *stages.OrdinaryPath { return t.o }

var _ stages.RootCounter = (*Writer)(nil)

// NumRoots reports the roots so far, so that an interpreter can name the
// outputs Submit allocates.
func (t *Writer) NumRoots() int { return t.o.NumRoots() }

// Event is one trace line. Fields follow the reference format.
type Event struct {
	Ev       string     `json:"ev"`
	ID       *int       `json:"id,omitempty"`
	Kind     string     `json:"kind,omitempty"`
	K        []int      `json:"k,omitempty"`
	Name     string     `json:"name,omitempty"`
	Depth    *int       `json:"depth,omitempty"`
	Manual   *int       `json:"manual,omitempty"`
	Graph    *GraphRef  `json:"graph,omitempty"`
	Args     []ArgEvent `json:"args,omitempty"`
	Scalars  []uint64   `json:"scalars,omitempty"`
	BlockNum *int       `json:"block_num,omitempty"`
	Early    *int       `json:"early,omitempty"`
	Sync     *int       `json:"sync_start,omitempty"`
	Deps     []int      `json:"deps,omitempty"`
	Fanin    []int      `json:"fanin,omitempty"`
	Pred     *PredEvent `json:"pred,omitempty"`
	Mode     *int       `json:"mode,omitempty"`
	Def      string     `json:"def,omitempty"`
	Key      string     `json:"key,omitempty"`
	Inst     *int       `json:"inst,omitempty"`
	Boundary []ArgEvent `json:"boundary,omitempty"`
	NTasks   *int       `json:"ntasks,omitempty"`
	Root     string     `json:"root,omitempty"`
	Idx      []int64    `json:"idx,omitempty"`
	Value    *int64     `json:"value,omitempty"`
}

// taskJSON is a task line: unlike other events, its lists are always
// present (the reference writes "scalars": [] and "deps": []).
type taskJSON struct {
	Ev       string     `json:"ev"`
	ID       int        `json:"id"`
	Kind     string     `json:"kind"`
	K        []int      `json:"k"`
	Name     string     `json:"name"`
	Depth    int        `json:"depth"`
	Manual   int        `json:"manual"`
	Graph    *GraphRef  `json:"graph,omitempty"`
	Args     []ArgEvent `json:"args"`
	Scalars  []uint64   `json:"scalars"`
	BlockNum int        `json:"block_num"`
	Early    int        `json:"early"`
	Sync     int        `json:"sync_start"`
	Deps     []int      `json:"deps"`
	Fanin    []int      `json:"fanin"`
	Pred     *PredEvent `json:"pred,omitempty"`
}

// graphBeginJSON is a graph_begin line: its scalars are always present, as
// the reference writes them ("scalars": [] for a call with none).
type graphBeginJSON struct {
	Ev       string     `json:"ev"`
	Def      string     `json:"def"`
	Key      string     `json:"key"`
	Inst     int        `json:"inst"`
	Boundary []ArgEvent `json:"boundary"`
	Scalars  []uint64   `json:"scalars"`
}

// GraphRef is the reference format's type (internal/reftrace).
type GraphRef = reftrace.GraphRef

// ArgEvent is the reference format's type (internal/reftrace).
type ArgEvent = reftrace.Arg

// PredEvent is the reference format's type (internal/reftrace).
type PredEvent = reftrace.Pred

// SummaryEv is the last line.
type SummaryEv struct {
	Ev       string `json:"ev"`
	Tasks    int    `json:"tasks"`
	Ordinary int    `json:"host_submits_ordinary"`
	Graphs   int    `json:"graph_submits"`
	Edges    int    `json:"edges"`
}

func ip(v int) *int { return &v }

func (t *Writer) emit(e *Event) {
	if t.w == nil || t.err != nil {
		return
	}
	var v any = e
	switch e.Ev {
	case "task":
		v = &taskJSON{Ev: e.Ev, ID: *e.ID, Kind: e.Kind, K: e.K, Name: e.Name, Depth: *e.Depth, Manual: *e.Manual, Graph: e.Graph,
			Args: e.Args, Scalars: e.Scalars, BlockNum: *e.BlockNum, Early: *e.Early, Sync: *e.Sync, Deps: e.Deps, Fanin: e.Fanin, Pred: e.Pred}
	case "graph_begin":
		v = &graphBeginJSON{Ev: e.Ev, Def: e.Def, Key: e.Key, Inst: *e.Inst, Boundary: e.Boundary, Scalars: e.Scalars}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.err = err
		return
	}
	t.w.Write(b)
	t.err = t.w.WriteByte('\n')
}

// Close writes the summary and flushes.
func (t *Writer) Close() error {
	s := t.Summary()
	if t.w != nil && t.err == nil {
		b, _ := json.Marshal(s)
		t.w.Write(b)
		t.w.WriteByte('\n')
		t.err = t.w.Flush()
	}
	return t.err
}

// Summary is the run's totals so far.
func (t *Writer) Summary() SummaryEv {
	return SummaryEv{Ev: "summary", Tasks: t.tasks, Ordinary: t.ordinary, Graphs: t.nGraph, Edges: t.edges}
}

func (t *Writer) rootInfo(id stages.RootID) (name, kind string, mdep int) {
	r := t.o.Root(id)
	name = r.Name
	switch r.Kind {
	case stages.RootEntry, stages.RootEntryOutput:
		// The reference names every entry tensor ext; its "out" is a root a
		// kernel allocates (tag o).
		kind = "ext"
	default:
		kind = "alloc"
		if r.Creator >= 0 && int(r.Creator) < t.o.NumTasks() && t.o.Image().Tasks[r.Creator].Kind != stages.KindAlloc {
			kind = "out"
		}
	}
	if r.ManualDep {
		mdep = 1
	}
	return
}

func (t *Writer) arg(a *stages.Arg) ArgEvent {
	v := &a.View
	name, kind, mdep := t.rootInfo(v.Root)
	if v.ManualDep {
		mdep = 1
	}
	ev := ArgEvent{Tag: a.Tag.String(), Root: name, RKind: kind, RID: int(v.Root), Off: v.Offset,
		Shape: append([]int64(nil), v.ShapeSlice()...), DType: v.DType.String(), Bytes: v.Bytes(), BSlot: t.bslot(v), MDep: mdep}
	if !v.Contiguous() {
		ev.Strides = append([]int64(nil), v.Strides[:v.NDims]...)
	}
	return ev
}

// bslot finds the boundary slot an argument derives from: the first slot of
// the same root whose region contains the argument's.
func (t *Writer) bslot(v *stages.View) int {
	if t.graph == nil {
		return -1
	}
	for i := range t.graph.boundary {
		b := &t.graph.boundary[i].View
		if b.Root == v.Root && v.Offset >= b.Offset && v.End() <= b.End() {
			return i
		}
	}
	return -1
}

func (t *Writer) taskEvent(id stages.TaskID, kind stages.Kind, k [3]stages.KernelID, bn int32, launch stages.Launch, args []stages.Arg, sc []stages.Scalar, deps []stages.TaskID, pred *stages.Predicate) {
	fan := t.o.Fanin(id)
	t.tasks++
	e := Event{Ev: "task", ID: ip(t.tid(id)), Kind: kind.String(), K: []int{int(k[0]), int(k[1]), int(k[2])},
		Depth: ip(t.depth), Manual: ip(b2i(t.manual > 0)), BlockNum: ip(int(bn)),
		Early: ip(b2i(launch&stages.LaunchEarly != 0)), Sync: ip(b2i(launch&stages.LaunchSyncStart != 0)),
		Args: []ArgEvent{}, Scalars: []uint64{}, Deps: []int{}, Fanin: []int{}}
	switch kind {
	case stages.KindAlloc:
		e.Name = "alloc"
	case stages.KindDummy:
		e.Name = "dummy"
	case stages.KindAIV:
		if k[1] < 0 {
			k[1] = k[2] // AIV1 alone (MixedKernels)
		}
		e.Name = t.kernels[k[1]].Name
	default:
		// A MIX task is named by its first kernel: its AIC one, or its
		// AIV0 one when it has no AIC (upstream's AIV0 + AIV1 MIX).
		for _, x := range k {
			if x >= 0 {
				e.Name = t.kernels[x].Name
				break
			}
		}
	}
	for i := range args {
		e.Args = append(e.Args, t.arg(&args[i]))
	}
	for _, s := range sc {
		e.Scalars = append(e.Scalars, s.Value)
	}
	for _, d := range deps {
		e.Deps = append(e.Deps, t.tid(d))
	}
	for _, f := range fan {
		// A host wait is the host's, not a task's: upstream's trace has
		// the order it makes, not an edge.
		if !t.o.IsHostWait(f) {
			e.Fanin = append(e.Fanin, t.tid(f))
		}
	}
	t.edges += len(e.Fanin)
	if pred != nil && pred.Valid {
		name, _, _ := t.rootInfo(pred.View.Root)
		e.Pred = &PredEvent{Root: name, Idx: t.rootIndex(&pred.View, pred.Index), Op: int(pred.Op), Target: pred.Target}
	}
	if g := t.graph; g != nil {
		e.Graph = &GraphRef{Def: g.def, Key: g.key, Inst: g.inst, First: b2i(g.inst == 0)}
		g.ntasks++
	} else {
		t.ordinary++
	}
	t.emit(&e)
}

// rootIndex is the element a predicate reads, as an index into its root:
// the trace format's idx names an element of the root, while a Predicate's
// Index counts from its view's offset (gate_view[1] over gate @ 4 is [5]).
func (t *Writer) rootIndex(v *stages.View, index int64) []int64 {
	shape := t.o.Root(v.Root).Shape
	idx := make([]int64, len(shape))
	rem := v.Offset + index
	for i := len(shape) - 1; i >= 0; i-- {
		idx[i] = rem % shape[i]
		rem /= shape[i]
	}
	return idx
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Alloc implements stages.Submitter.
func (t *Writer) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	id, first := t.o.Alloc(specs)
	args := make([]stages.Arg, len(specs))
	for i, s := range specs {
		args[i] = stages.Arg{Tag: stages.TagOutput, View: stages.NewView(first+stages.RootID(i), 0, s.DType, s.Shape...)}
	}
	t.taskEvent(id, stages.KindAlloc, [3]stages.KernelID{-1, -1, -1}, -1, 0, args, nil, nil, nil)
	return id, first
}

// Submit implements stages.Submitter.
func (t *Writer) Submit(task *stages.Task) stages.TaskID {
	first := stages.RootID(t.o.NumRoots())
	id := t.o.Submit(task)
	args := task.Args
	for i := range args {
		if args[i].Tag == stages.TagOutput {
			args = append([]stages.Arg(nil), task.Args...)
			break
		}
	}
	n := stages.RootID(0)
	for i := range args {
		if args[i].Tag == stages.TagOutput {
			args[i].View.Root = first + n
			args[i].View.Offset = 0
			n++
		}
	}
	t.taskEvent(id, task.Kind, task.Kernel, task.BlockNum, task.Launch, args, task.Scalars, task.Deps, &task.Pred)
	return id
}

// ScopeBegin implements stages.Submitter.
func (t *Writer) ScopeBegin(mode stages.ScopeMode) {
	t.emit(&Event{Ev: "scope_begin", Mode: ip(int(mode)), Depth: ip(t.depth)})
	t.o.ScopeBegin(mode)
	t.depth++
	t.scopes = append(t.scopes, mode)
	if mode == stages.ScopeManual {
		t.manual++
	}
}

// ScopeEnd implements stages.Submitter.
func (t *Writer) ScopeEnd() {
	t.o.ScopeEnd()
	t.depth--
	if t.scopes[len(t.scopes)-1] == stages.ScopeManual {
		t.manual--
	}
	t.scopes = t.scopes[:len(t.scopes)-1]
	t.emit(&Event{Ev: "scope_end", Depth: ip(t.depth)})
}

// ReadTensor records the host's read of device data: element idx of root
// (nil: the tensor's one value).
func (t *Writer) ReadTensor(root stages.RootID, idx []int64, value int64) {
	name, _, _ := t.rootInfo(root)
	t.emit(&Event{Ev: "get_tensor_data", Root: name, Idx: idx, Value: &value})
}

// WriteTensor records the host's write of device data (set_tensor_data):
// element idx of root set to value.
func (t *Writer) WriteTensor(root stages.RootID, idx []int64, value int64) {
	name, _, _ := t.rootInfo(root)
	t.emit(&Event{Ev: "set_tensor_data", Root: name, Idx: idx, Value: &value})
}

var _ stages.HostWaiter = (*Writer)(nil)

// HostWait implements stages.HostWaiter: the wait is the ordinary path's,
// and no task of the trace (tid numbers the tasks around it).
func (t *Writer) HostWait(v stages.View, consumers bool) stages.TaskID {
	return t.o.HostWait(v, consumers)
}

// tid is task id's number in the trace: its submission index among the
// orchestration's tasks, the host waits before it left out.
func (t *Writer) tid(id stages.TaskID) int {
	n := int(id)
	for _, w := range t.o.HostWaits() {
		if w < id {
			n--
		}
	}
	return n
}

// Graph implements stages.Submitter: the body runs inline and its tasks
// are marked with the call's key and instance.
func (t *Writer) Graph(call *stages.GraphCall) stages.TaskID {
	inst := t.inst[call.Key]
	t.inst[call.Key] = inst + 1
	t.nGraph++
	be := make([]ArgEvent, len(call.Boundary))
	for i := range call.Boundary {
		be[i] = t.arg(&call.Boundary[i])
		be[i].BSlot = i
	}
	def := defName(call.Key)
	t.emit(&Event{Ev: "graph_begin", Def: def, Key: call.Key, Inst: ip(inst), Boundary: be, Scalars: append([]uint64{}, call.Scalars...)})
	g := &graphState{def: def, key: call.Key, inst: inst, boundary: call.Boundary}
	t.graph = g
	call.Body(t, call.NewBoundary())
	t.graph = nil
	t.emit(&Event{Ev: "graph_end", Def: def, Key: call.Key, Inst: ip(inst), NTasks: ip(g.ntasks)})
	return stages.TaskID(t.o.NumTasks() - 1)
}

// defName is the trace's def of a key: the body's name, without the
// construction values a key may end with (csa_moe_block:1 -> csa_moe_block).
func defName(key string) string {
	if i := strings.IndexByte(key, ':'); i >= 0 {
		return key[:i]
	}
	return key
}
