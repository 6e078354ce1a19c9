package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// AddForm compiles a form a tool made (package analyze's proposal, or one
// of its probes) and adds it to the model under name, as if the file's
// forms: section had it: text is the YAML of one entry's value
// ({params: ..., graphs: ...}). A hidden form is not listed by Forms (a
// probe is no form a user picks), but runs by name. The form's text is
// hashed into its orchestration identity, so a Definition kept on disk for
// one proposal is never replayed for another of the same name. AddForm
// changes the model: it must not run beside a Run or Orchestration of it
// (a command adds its forms before any runtime starts).
func (m *Model) AddForm(name string, text []byte, hidden bool) error {
	file := m.file + " (form " + name + ")"
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(text)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return &Error{File: file, Line: yamlErrLine(err), Msg: "malformed YAML: " + err.Error(), Err: err}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return &Error{File: file, Line: 1, Msg: "empty form (want a mapping with params and graphs)"}
	}
	if err := plainTree(file, doc.Content[0], "forms"); err != nil {
		return err
	}
	entry := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: name, Line: 1}, doc.Content[0]}}
	l := &loader{file: file, m: m, constLine: map[string]int{}}
	n := len(m.forms)
	if err := l.formsSection(entry); err != nil {
		return err
	}
	f := m.forms[n]
	sum := sha256.Sum256(text)
	f.generated, f.hidden = "+"+hex.EncodeToString(sum[:8]), hidden
	m.formChecks(f) // marks its Graph specs that pass as complete
	return nil
}

// CallObserver is a Submitter that is told of every block call as the
// interpreter makes it, at any depth (package analyze maps a step's block
// occurrences with it): BlockCall before the callee's body runs, on the
// ordinary path or as a Graph, BlockEnd after.
type CallObserver interface {
	BlockCall(c CallSite)
	BlockEnd()
}

// CallSite is one block call as the interpreter makes it. Params is the
// callee's param values, valid during the call only.
type CallSite struct {
	Block   string
	Line    int
	Variant string // "" when the block has none
	Params  []int64
	// Graph: the call is a Graph call of the form; InGraph: it runs
	// inside another call's Graph body (inline).
	Graph, InGraph bool
}

func (r *runner) observe(o *sub, caller, cf *frame, c *callOp, asGraph bool) bool {
	co := o.observer
	if co == nil {
		return false
	}
	cb := c.callee
	cs := CallSite{Block: cb.name, Line: c.line, Params: cf.env[:len(cb.params)], Graph: asGraph, InGraph: caller.inGraph}
	if cb.variantSlot >= 0 {
		cs.Variant = cb.variants[cf.env[cb.variantSlot]]
	}
	co.BlockCall(cs)
	return true
}

// BlockInfo is what a tool that analyses a model reads of one block.
type BlockInfo struct {
	Name     string
	Line     int
	Params   []string
	Variants []string
	// Auto: the block's boundary is its calls' (boundary: auto).
	Auto bool
	// Slots is the declared boundary, in slot order (none when Auto).
	Slots []SlotInfo
	// Scalars is the boundary scalars' names.
	Scalars []string
	// Structural is the params (and "variant") the body's structure
	// depends on, as the static checks see it: a Graph of the block must
	// have each in its key. StructuralLines is the first line where each
	// does (a host-side if, a loop bound, a kernel or variant choice).
	Structural      []string
	StructuralLines []int
}

// SlotInfo is one declared boundary slot: its name, tag, and the params
// (or "variant") its view reads, which a replay patches.
type SlotInfo struct {
	Name string
	Tag  stages.Tag
	Uses []string
	Line int
}

// BlockInfos describes every block, in file order.
func (m *Model) BlockInfos() []BlockInfo {
	out := make([]BlockInfo, 0, len(m.blocks))
	for _, b := range m.blocks {
		bi := BlockInfo{Name: b.name, Line: b.line, Params: b.params, Variants: b.variants, Auto: b.auto}
		for _, s := range b.boundary {
			si := SlotInfo{Name: s.name, Tag: s.tag, Line: s.line}
			if s.view != nil {
				si.Uses = b.envNames(s.view.deps)
			}
			bi.Slots = append(bi.Slots, si)
		}
		for _, s := range b.scalars {
			bi.Scalars = append(bi.Scalars, s.name)
		}
		for s, line := range b.structural {
			if line > 0 && (s < len(b.params) || s == b.variantSlot) {
				bi.Structural = append(bi.Structural, b.slotName(s))
				bi.StructuralLines = append(bi.StructuralLines, line)
			}
		}
		out = append(out, bi)
	}
	return out
}

// envNames names the params (and the variant) among env slots deps.
func (b *block) envNames(deps uint64) []string {
	var out []string
	for s := 0; s < 64; s++ {
		if deps&(1<<uint(s)) != 0 && (s < len(b.params) || s == b.variantSlot) {
			out = append(out, b.slotName(s))
		}
	}
	return out
}

// ProgramParams is the program's params, in file order.
func (m *Model) ProgramParams() []string { return m.progParam }

// FormParams is the program param values a form sets (its params over the
// program's defaults), in ProgramParams order.
func (m *Model) FormParams(form string) ([]int64, error) {
	f := m.formIdx[form]
	if f == nil {
		return nil, fmt.Errorf("config: model %s has %w %q", m.Name, ErrNoForm, form)
	}
	return append([]int64(nil), f.params...), nil
}

// FormGraphs is the blocks a form makes Graphs, in block order.
func (m *Model) FormGraphs(form string) []string {
	f := m.formIdx[form]
	if f == nil {
		return nil
	}
	var out []string
	for _, g := range f.graphs {
		if g != nil {
			out = append(out, g.block.name)
		}
	}
	return out
}
