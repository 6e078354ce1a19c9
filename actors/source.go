package actors

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

// sourceOf runs orch on the host to map its tasks to lines; nil when orch
// is not a model file or a body does not record (its calls then take the
// ordinary path, and the numbering is not the pass's).
func sourceOf(orch *Orchestration) *Source {
	if orch.File == "" {
		return nil
	}
	s := &sourceOrch{OrdinaryPath: stages.NewOrdinaryPath(orch.Entry), name: orch.Name, defs: map[uint64]*stages.Definition{},
		src: &Source{File: orch.File, Nodes: map[string][]int32{}}}
	if err := runGuarded(orch, s); err != nil || s.failed {
		return nil
	}
	return s.src
}

type sourceOrch struct {
	*stages.OrdinaryPath
	name   string
	rec    stages.Recorder
	defs   map[uint64]*stages.Definition
	src    *Source
	failed bool
}

func (s *sourceOrch) Submit(t *stages.Task) stages.TaskID {
	id := s.OrdinaryPath.Submit(t)
	s.src.Tasks = setLine(s.src.Tasks, int(id), t.Line)
	return id
}

func (s *sourceOrch) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	id, r := s.OrdinaryPath.Alloc(specs)
	s.src.Tasks = setLine(s.src.Tasks, int(id), 0)
	return id, r
}

func (s *sourceOrch) Graph(call *stages.GraphCall) stages.TaskID {
	fk := stages.FullKey(s.name, call.Key, call.Config)
	d := s.defs[fk]
	if d == nil {
		var lines []int32
		body := call.Body
		rec := func(o stages.Submitter, b *stages.Boundary) error { return body(&nodeLines{o, &lines}, b) }
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

// nodeLines notes the line of each node a body records, in node order
// (a body's allocs and submits are its nodes).
type nodeLines struct {
	stages.Submitter
	lines *[]int32
}

func (n *nodeLines) Submit(t *stages.Task) stages.TaskID {
	*n.lines = append(*n.lines, t.Line)
	return n.Submitter.Submit(t)
}

func (n *nodeLines) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	*n.lines = append(*n.lines, 0)
	return n.Submitter.Alloc(specs)
}

// NumRoots forwards to the recorder, which tells (the config interpreter
// asks).
func (n *nodeLines) NumRoots() int {
	if rc, ok := n.Submitter.(interface{ NumRoots() int }); ok {
		return rc.NumRoots()
	}
	return 0
}

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

// nameRaces names the ops of a pass's races, when the pass ran as the map
// was made (no call took the ordinary path).
func (s *Source) nameRaces(res *PassResult) {
	if s == nil || res.Device == nil || res.Counts.BoundaryMismatches > 0 || res.Counts.FallbackCalls > 0 {
		return
	}
	for i := range res.Device.Races {
		r := &res.Device.Races[i]
		s.name(&r.A.TaskInfo)
		s.name(&r.B.TaskInfo)
	}
}
