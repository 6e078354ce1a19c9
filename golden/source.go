package golden

import (
	"fmt"

	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// Source maps a pass's tasks to the model file line of the op that made
// each (stages.Task.Line): ordinary tasks by submission index, Graph body
// nodes by key and node. The device knows neither, so a race is named
// with it on the host. It is made once per orchestration, beside the
// golden reference, by running the form as a clean pass runs it: each
// key's first call recorded, every call one GRAPH task.
type Source struct {
	File  string
	Tasks []int32
	Nodes map[string][]int32
}

// SourceOf runs orch on the host to map its tasks to lines; nil when orch
// is not a model file or a body does not record (its calls then take the
// ordinary path, and the numbering is not the pass's). The runtime makes
// it the first time a pass races: a clean run never pays for it.
func SourceOf(orch *stages.Orchestration) *Source {
	if orch.File == "" {
		return nil
	}
	s := &sourceOrch{linedPath: newLinedPath(orch), name: orch.Name,
		defs: map[uint64]*stages.Definition{}, src: &Source{File: orch.File, Nodes: map[string][]int32{}}}
	if err := runGuarded(orch, s); err != nil || s.failed {
		return nil
	}
	s.src.Tasks = s.lines
	return s.src
}

type sourceOrch struct {
	*linedPath
	name   string
	rec    stages.Recorder
	defs   map[uint64]*stages.Definition
	src    *Source
	failed bool
}

func (s *sourceOrch) Graph(call *stages.GraphCall) stages.TaskID {
	fk := stages.FullKey(s.name, call.Key, call.Config)
	d := s.defs[fk]
	if d == nil {
		var lines []int32
		body := call.Body
		rec := func(o stages.Submitter, b *stages.Boundary) error { return body(newNodeLines(o, &lines), b) }
		var err error
		if d, err = s.rec.Record(call.Key, fk, call.Boundary, s.BoundaryRoots(call.Boundary), call.Scalars, call.ExtDeps, rec); err != nil {
			s.failed = true
			return s.OrdinaryPath.Graph(call)
		}
		s.defs[fk] = d
		if _, seen := s.src.Nodes[call.Key]; !seen {
			s.src.Nodes[call.Key] = lines
		}
	}
	return s.SubmitGraph(call, stages.GraphSubmission{FullKey: fk}, d.HeapBytes, d.WrittenSlots())
}

// linedPath is an ordinary path that notes the line of each task it
// submits, by task index: the golden reference's runs (the inline twin,
// the eager form) are ordinary paths, and this is what names their races.
// Only the reference and Source use it; a pass's own path notes nothing.
type linedPath struct {
	*stages.OrdinaryPath
	lines []int32
	err   error
}

var _ stages.RootCounter = (*linedPath)(nil)

func newLinedPath(orch *stages.Orchestration) *linedPath {
	return &linedPath{OrdinaryPath: stages.NewOrdinaryPath(orch.Entry)}
}

func (p *linedPath) Submit(t *stages.Task) stages.TaskID {
	id := p.OrdinaryPath.Submit(t)
	p.lines = setLine(p.lines, int(id), t.Line)
	return id
}

func (p *linedPath) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	id, r := p.OrdinaryPath.Alloc(specs)
	p.lines = setLine(p.lines, int(id), 0)
	return id, r
}

// Graph runs the body inline, as OrdinaryPath.Graph does, but on p: the
// ordinary path would hand the body itself, and the body's tasks would go
// unnoted.
func (p *linedPath) Graph(call *stages.GraphCall) stages.TaskID {
	if err := call.Body(p, call.NewBoundary()); err != nil && p.err == nil {
		p.err = fmt.Errorf("graph %q: %w", call.Key, err)
	}
	return stages.TaskID(p.NumTasks() - 1)
}

// nodeLines notes the line of each node a body records, in node order
// (a body's allocs and submits are its nodes).
type nodeLines struct {
	stages.Submitter
	roots stages.RootCounter // the recorder, which numbers the body's roots
	lines *[]int32
}

var _ stages.RootCounter = (*nodeLines)(nil)

// newNodeLines wraps the recorder's Submitter, which counts its roots
// (stages.Recorder does): an interpreter's body asks for them through it.
func newNodeLines(o stages.Submitter, lines *[]int32) *nodeLines {
	rc, ok := o.(stages.RootCounter)
	if !ok {
		panic(fmt.Sprintf("golden: a recorder's Submitter %T does not count its roots", o))
	}
	return &nodeLines{Submitter: o, roots: rc, lines: lines}
}

func (n *nodeLines) Submit(t *stages.Task) stages.TaskID {
	*n.lines = append(*n.lines, t.Line)
	return n.Submitter.Submit(t)
}

func (n *nodeLines) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	*n.lines = append(*n.lines, 0)
	return n.Submitter.Alloc(specs)
}

// NumRoots forwards to the recorder (the config interpreter asks).
func (n *nodeLines) NumRoots() int { return n.roots.NumRoots() }

func setLine(s []int32, i int, line int32) []int32 {
	for len(s) <= i {
		s = append(s, 0)
	}
	s[i] = line
	return s
}

// name fills t.Op when the map knows t's op.
func (s *Source) name(t *npu.TaskInfo) {
	line := int32(0)
	switch {
	case t.Task.Task < 0:
	case t.Task.Node >= 0:
		if ls := s.Nodes[t.Key]; int(t.Task.Node) < len(ls) {
			line = ls[t.Task.Node]
		}
	case int(t.Task.Task) < len(s.Tasks):
		line = s.Tasks[t.Task.Task]
	}
	if line > 0 {
		t.Op = fmt.Sprintf("%s:%d", s.File, line)
	}
}

// NameRaces names the ops of a pass's races. The caller gives only the
// races of a pass that ran as the map was made (no call took the ordinary
// path): another pass's task numbering is not the map's. A nil map names
// nothing.
func (s *Source) NameRaces(rs []npu.Race) {
	if s == nil {
		return
	}
	s.nameAll(rs)
}

func (s *Source) nameAll(rs []npu.Race) {
	for i := range rs {
		s.name(&rs[i].A.TaskInfo)
		s.name(&rs[i].B.TaskInfo)
	}
}
