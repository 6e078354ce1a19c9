package analyze

import (
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// Setting is one assignment of the program's params: the model's forms set
// them (DSv4's full: layer 1 runs layer 0's kernels, layer 42 replays the
// loop's), and each is a program the model says computes the same step.
type Setting struct {
	Values []int64
	// Forms is the model's forms that use it, in file order.
	Forms []string
}

// Text is the setting as "p=v, ..." ("none" without program params).
func (s Setting) Text(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, s.Values[i])
	}
	return strings.Join(parts, ", ")
}

// Call is one block call of the step (an occurrence).
type Call struct {
	Index   int
	Block   string
	Variant string
	Line    int
	Params  []int64
	// Parent is the enclosing call's Index, or -1 at the program's level.
	Parent int
	Depth  int
	// Tasks [First, End) are the device tasks the call submits, on the
	// ordinary path; Allocs of them are alloc tasks.
	First, End int
	Allocs     int
	// Def is the call's body as a Graph of it records it; nil when the
	// recording failed (RecordErr says why).
	Def        *stages.Definition
	RecordErr  string
	Defects    []string
	Boundary   []stages.Arg
	Scalars    []uint64
	ImageBytes int
}

// Tasks is the device tasks the call submits.
func (c *Call) Tasks() int { return c.End - c.First }

// Step is a model's step expanded under one setting.
type Step struct {
	Model   *config.Model
	Setting Setting
	Params  []string // the program's param names
	Blocks  []config.BlockInfo
	Kernels []stages.Kernel
	// RootNames names every root of the expansion by RootID.
	RootNames []string
	// Code hashes the step's kernel tasks in order, each by its kernels'
	// code identity: two settings are the same step when it is equal.
	Code   uint64
	Tasks  int // device tasks of the step
	Allocs int // of which alloc tasks
	Calls  []*Call
}

// Settings lists the program-param settings of the model's forms, the
// first form's first (an eager form, in the shipped models).
func Settings(m *config.Model) ([]Setting, error) {
	var out []Setting
	for _, f := range m.Forms() {
		v, err := m.FormParams(f)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(out, func(s Setting) bool { return slices.Equal(s.Values, v) })
		if i < 0 {
			out = append(out, Setting{Values: v})
			i = len(out) - 1
		}
		out[i].Forms = append(out[i].Forms, f)
	}
	return out, nil
}

// paramsYAML is a form's params: mapping for a setting.
func paramsYAML(names []string, s Setting) string {
	if len(names) == 0 {
		return "{}"
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ": " + strconv.FormatInt(s.Values[i], 10)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// probeName names a hidden form Expand adds, unused so far, so that two expansions of
// one model never ask for the same name.
func probeName(m *config.Model, what string) string {
	for i := 0; ; i++ {
		n := fmt.Sprintf("analyze.%s.%d", what, i)
		if _, err := m.FormParams(n); err != nil {
			return n
		}
	}
}

// Expand expands the model's step under setting s: the call tree on the
// ordinary path, then each block's occurrences recorded as its Graph would
// record them (a hidden probe form per block makes only that block's calls
// Graphs).
func Expand(m *config.Model, s Setting) (*Step, error) {
	st := &Step{Model: m, Setting: s, Params: m.ProgramParams(), Blocks: m.BlockInfos(), Kernels: m.Kernels()}
	eager := probeName(m, "eager")
	if err := m.AddForm(eager, []byte("params: "+paramsYAML(st.Params, s)+"\n"), true); err != nil {
		return nil, err
	}
	t := &tree{o: stages.NewOrdinaryPath(m.EntryRoots()), kernels: st.Kernels, code: fnv.New64a()}
	if err := m.Run(t, eager); err != nil {
		return nil, err
	}
	st.Calls, st.Tasks, st.Allocs, st.Code = t.calls, t.o.NumTasks(), t.allocs, t.code.Sum64()
	for i := 0; i < t.o.NumRoots(); i++ {
		st.RootNames = append(st.RootNames, t.o.Root(stages.RootID(i)).Name)
	}
	for _, b := range st.Blocks {
		var of []*Call
		for _, c := range st.Calls {
			if c.Block == b.Name {
				of = append(of, c)
			}
		}
		if len(of) == 0 {
			continue
		}
		name := probeName(m, "probe")
		text := "params: " + paramsYAML(st.Params, s) + "\ngraphs:\n  " + b.Name + ": {key: analyze_probe}\n"
		if err := m.AddForm(name, []byte(text), true); err != nil {
			return nil, err
		}
		p := &probe{o: stages.NewOrdinaryPath(m.EntryRoots()), calls: of}
		if err := m.Run(p, name); err != nil {
			return nil, fmt.Errorf("analyze: block %s recorded as a Graph: %w", b.Name, err)
		}
		if p.n != len(of) {
			return nil, fmt.Errorf("analyze: block %s: %d calls on the ordinary path, %d as Graphs", b.Name, len(of), p.n)
		}
	}
	return st, nil
}

// tree is a Submitter on the ordinary path that keeps the block calls.
type tree struct {
	o       *stages.OrdinaryPath
	kernels []stages.Kernel
	code    hash.Hash64
	calls   []*Call
	open    []int
	allocs  int
}

func (t *tree) NumRoots() int { return t.o.NumRoots() }

func (t *tree) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	t.allocs++
	for _, i := range t.open {
		t.calls[i].Allocs++
	}
	return t.o.Alloc(specs)
}
func (t *tree) Submit(tk *stages.Task) stages.TaskID {
	if tk.Kind != stages.KindDummy {
		for _, k := range tk.Kernel {
			if k >= 0 {
				io.WriteString(t.code, t.kernels[k].Code)
			}
			t.code.Write([]byte{0})
		}
	}
	return t.o.Submit(tk)
}
func (t *tree) ScopeBegin(mode stages.ScopeMode)        { t.o.ScopeBegin(mode) }
func (t *tree) ScopeEnd()                               { t.o.ScopeEnd() }
func (t *tree) Graph(c *stages.GraphCall) stages.TaskID { return t.o.Graph(c) }

func (t *tree) BlockCall(cs config.CallSite) {
	c := &Call{Index: len(t.calls), Block: cs.Block, Variant: cs.Variant, Line: cs.Line,
		Params: slices.Clone(cs.Params), Parent: -1, Depth: len(t.open), First: t.o.NumTasks()}
	if len(t.open) > 0 {
		c.Parent = t.open[len(t.open)-1]
	}
	t.calls = append(t.calls, c)
	t.open = append(t.open, c.Index)
}

func (t *tree) BlockEnd() {
	i := t.open[len(t.open)-1]
	t.open = t.open[:len(t.open)-1]
	t.calls[i].End = t.o.NumTasks()
}

// probe is a Submitter on the ordinary path whose Graph calls (one block's)
// are recorded, each into a Definition of its own, then run inline.
type probe struct {
	o     *stages.OrdinaryPath
	calls []*Call
	n     int
}

func (p *probe) NumRoots() int { return p.o.NumRoots() }
func (p *probe) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	return p.o.Alloc(specs)
}
func (p *probe) Submit(tk *stages.Task) stages.TaskID { return p.o.Submit(tk) }
func (p *probe) ScopeBegin(mode stages.ScopeMode)     { p.o.ScopeBegin(mode) }
func (p *probe) ScopeEnd()                            { p.o.ScopeEnd() }

func (p *probe) Graph(gc *stages.GraphCall) stages.TaskID {
	if p.n < len(p.calls) {
		c := p.calls[p.n]
		c.Boundary = slices.Clone(gc.Boundary)
		c.Scalars = slices.Clone(gc.Scalars)
		var r stages.Recorder
		def, err := r.Record(gc.Key, 0, gc.Boundary, p.o.BoundaryRoots(gc.Boundary), gc.Scalars, gc.ExtDeps, gc.Body)
		if err != nil {
			c.RecordErr = err.Error()
		} else {
			c.Def = def
			c.ImageBytes = len(stages.EncodeDefinition(def))
		}
		for _, d := range r.Defects {
			c.Defects = append(c.Defects, d.Error())
		}
	}
	p.n++
	return p.o.Graph(gc)
}
