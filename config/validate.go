package config

import (
	"errors"

	"github.com/hbg-dev/hbg/stages"
)

// Summary is what Validate learned about a model.
type Summary struct {
	Forms []FormSummary
	// Warnings are what runs but cannot be what was meant: a form's Graph
	// entry that no call made a Graph, a Graph's boundary slot whose layout
	// depends on a param outside its key.
	Warnings []string
}

// FormSummary counts one form's submissions.
type FormSummary struct {
	Name        string
	Tasks       int // device tasks (Graph bodies expanded)
	Edges       int // their dependency edges (Graph bodies expanded)
	HostSubmits int // ordinary tasks + Graph calls
	GraphCalls  int
}

// Validate interprets every form of the model on the ordinary path (which
// checks every view, shape, predicate and explicit dependency the program
// reaches) and runs the static Graph checks. It returns the first problem of
// each form and every Graph check error, joined.
func Validate(m *Model) (*Summary, error) {
	var errs []error
	seen := map[string]bool{}
	s := &Summary{}
	for _, f := range m.forms {
		if f.hidden {
			continue
		}
		c := newCounter(m)
		if err := m.Run(c, f.name); err != nil {
			// A mistake outside any Graph fails every form alike: say it once.
			if !seen[err.Error()] {
				errs = append(errs, err)
			}
			seen[err.Error()] = true
			continue
		}
		s.Forms = append(s.Forms, FormSummary{Name: f.name, Tasks: c.tasks, Edges: len(c.o.Image().Fanin), HostSubmits: c.ordinary + c.graphs, GraphCalls: c.graphs})
		s.Warnings = append(s.Warnings, m.idleGraphs(f, c)...)
		s.Warnings = append(s.Warnings, m.layoutWarnings(f)...)
	}
	errs = append(errs, m.GraphChecks()...)
	return s, errors.Join(errs...)
}

// ValidateForm interprets one form on the ordinary path, as Validate does
// every form: a mistake its program reaches (a view outside its root, a task
// list element past its end, a pass over max_tasks) is found before a run
// starts, not in its first pass, where it would be a failed run. It returns
// the form's warnings (Summary.Warnings) or its first problem.
func ValidateForm(m *Model, form string) ([]string, error) {
	c := newCounter(m)
	if err := m.Run(c, form); err != nil {
		return nil, err
	}
	f := m.formIdx[form]
	return append(m.idleGraphs(f, c), m.layoutWarnings(f)...), nil
}

// counter counts a run's submissions on top of the ordinary path.
type counter struct {
	o                       *stages.OrdinaryPath
	tasks, ordinary, graphs int
	inGraph                 bool
	// Per block, whether a call of it ran as a Graph, and whether one ran
	// inside a Graph's body although the form makes it a Graph (graphUser).
	asGraph, callInGraph []bool
}

func newCounter(m *Model) *counter {
	o := stages.NewOrdinaryPath(m.EntryRoots())
	o.SetMaxEdges(m.MaxEdges())
	return &counter{o: o, asGraph: make([]bool, len(m.blocks)), callInGraph: make([]bool, len(m.blocks))}
}

// graphCall implements graphUser.
func (c *counter) graphCall(block int, inGraph bool) {
	// A call inside a Graph body is a Graph too (a child Definition).
	c.asGraph[block] = true
	if inGraph {
		c.callInGraph[block] = true
	}
}

var _ stages.RootCounter = (*counter)(nil)

func (c *counter) NumRoots() int { return c.o.NumRoots() }

func (c *counter) count() {
	c.tasks++
	if !c.inGraph {
		c.ordinary++
	}
}

func (c *counter) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	c.count()
	return c.o.Alloc(specs)
}

func (c *counter) Submit(t *stages.Task) stages.TaskID {
	c.count()
	return c.o.Submit(t)
}

// HostWait implements stages.HostWaiter on the ordinary path.
func (c *counter) HostWait(v stages.View, consumers bool) stages.TaskID {
	return c.o.HostWait(v, consumers)
}

func (c *counter) ScopeBegin(mode stages.ScopeMode) { c.o.ScopeBegin(mode) }
func (c *counter) ScopeEnd()                        { c.o.ScopeEnd() }

func (c *counter) Graph(call *stages.GraphCall) stages.TaskID {
	// A Graph inside a Graph body is a child Definition, not a host
	// submission of its own.
	was := c.inGraph
	if !was {
		c.graphs++
	}
	c.inGraph = true
	call.Body(c, call.NewBoundary())
	c.inGraph = was
	return stages.TaskID(c.o.NumTasks() - 1)
}
