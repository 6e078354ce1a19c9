package config

import (
	"fmt"
	"sort"
)

// propagate makes a caller's structure depend on its params when they feed
// a callee param that the callee's structure depends on, to a fixed point
// (callees may be compiled after their callers).
func (l *loader) propagate() {
	for changed := true; changed; {
		changed = false
		for _, cs := range l.calls {
			if cs.caller.isProgram {
				continue
			}
			for p, e := range cs.c.params {
				if cs.c.callee.structural[p] == 0 {
					continue
				}
				for s := 0; s < 64; s++ {
					if e.deps&(1<<uint(s)) != 0 && (s < len(cs.caller.params) || s == cs.caller.variantSlot) && cs.caller.structural[s] == 0 {
						cs.caller.structural[s] = cs.c.line
						changed = true
					}
				}
			}
		}
	}
}

// GraphChecks runs the static Graph checks of every form (and marks the
// Graph specs that pass them complete, see GraphCall.KeyComplete): a Graph
// body whose structure depends on a param outside its key
// (*StructureError), a value computed from a boundary scalar
// (*BakedScalarError), a task that writes a boundary slot tagged in
// (*InputWrittenError), and two blocks whose keys can be the same text
// (*SharedKeyError). The errors are typed so that the runtime can treat
// them as errors or warnings.
func (m *Model) GraphChecks() []error {
	var out []error
	for _, f := range m.forms {
		if f.hidden {
			continue // a tool's probe (AddForm), no form of the model's
		}
		out = append(out, m.formChecks(f)...)
	}
	return out
}

// FormChecks is GraphChecks for one form.
func (m *Model) FormChecks(form string) []error {
	if f := m.formIdx[form]; f != nil {
		return m.formChecks(f)
	}
	return nil
}

func (m *Model) formChecks(f *form) []error {
	var out []error
	for _, g := range f.graphs {
		if g == nil {
			continue
		}
		b := g.block
		var slots []int
		for s, line := range b.structural {
			if line > 0 && g.inKey&(1<<uint(s)) == 0 {
				slots = append(slots, s)
			}
		}
		sort.Ints(slots)
		nested := m.nestedKeys(f, g)
		g.complete = len(slots) == 0 && len(nested) == 0 && len(b.baked) == 0 && len(b.inputWrites) == 0
		for _, s := range slots {
			out = append(out, &StructureError{File: m.file, Line: b.structural[s], Form: f.name, Block: b.name, Param: b.slotName(s)})
		}
		out = append(out, nested...)
		for _, u := range b.baked {
			out = append(out, &BakedScalarError{File: m.file, Line: u.line, Form: f.name, Block: b.name, Scalar: u.scalar, Key: u.key, Expr: u.expr})
		}
		for _, w := range b.inputWrites {
			out = append(out, &InputWrittenError{File: m.file, Line: w.line, Form: f.name, Block: b.name, Slot: w.slot, Arg: w.arg})
		}
	}
	return append(out, m.sharedKeys(f)...)
}

// sharedKeys finds the pairs of form f's Graph blocks whose keys can be the
// same text. full_key hashes the key text and the construction values, not
// the block: two such blocks, called with equal values, would replay one
// Definition for both bodies. The runtime's check cannot be relied on to
// see it: it records a call's own body again only when the call is not
// KeyComplete and its boundary differs from the first call's. A param
// interpolated into the key does not tell them apart either: its value is
// hashed, but the other block's may be equal. Each pair is an error,
// reported at the later entry, and neither block's calls are KeyComplete,
// so that under --defects warn the runtime's check gets what chance it has.
func (m *Model) sharedKeys(f *form) []error {
	var gs []*graphSpec
	for _, g := range f.graphs {
		if g != nil {
			gs = append(gs, g)
		}
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].line < gs[j].line })
	nfas := make([]*keyNFA, len(gs))
	for i, g := range gs {
		nfas[i] = g.nfa()
	}
	var out []error
	for j, g := range gs {
		for i, o := range gs[:j] {
			text, ok := keyOverlap(nfas[i], nfas[j])
			if !ok {
				continue
			}
			g.complete, o.complete = false, false
			out = append(out, &SharedKeyError{File: m.file, Line: g.line, Form: f.name, Block: g.block.name, Key: g.key,
				Other: o.block.name, OtherKey: o.key, OtherLine: o.line, Text: text})
		}
	}
	return out
}

func (b *block) slotName(s int) string {
	if s < len(b.params) {
		return b.params[s]
	}
	if s == b.variantSlot {
		return "variant"
	}
	return fmt.Sprintf("slot %d", s)
}

// nestedKeys checks the key of every Graph that Graph block g's body calls
// (a child Definition, stages.Recorder.Graph) against g's own: the child's
// full_key is in the parent's Definition, so a param of g that feeds a
// value of the child's key (its config, or a {param} of its key text) is
// structure of g and must be in g's key, as any other is.
func (m *Model) nestedKeys(f *form, g *graphSpec) []error {
	var out []error
	b := g.block
	for _, c := range b.calls {
		cg := f.graphs[c.callee.idx]
		if cg == nil {
			continue
		}
		var deps uint64
		for p, e := range c.params {
			if cg.inKey&(1<<uint(p)) != 0 && e != nil {
				deps |= e.deps
			}
		}
		for s := 0; s < 64; s++ {
			if deps&(1<<uint(s)) == 0 || g.inKey&(1<<uint(s)) != 0 || !(s < len(b.params) || s == b.variantSlot) {
				continue
			}
			out = append(out, &StructureError{File: m.file, Line: c.line, Form: f.name, Block: b.name, Param: b.slotName(s)})
		}
	}
	return out
}

// idleGraphs says which of form f's Graph entries no call made a Graph in a
// run that c counted: none ran (a call inside another Graph's body is a
// Graph too, a child Definition). Such an entry has no effect; it is a
// warning, not an error, since the form runs.
func (m *Model) idleGraphs(f *form, c *counter) []string {
	var out []string
	for _, g := range f.graphs {
		if g == nil || c.asGraph[g.block.idx] {
			continue
		}
		why := "no call of it runs in this form"
		out = append(out, fmt.Sprintf("%s:%d: form %s: graphs.%s has no effect: %s", m.file, g.line, f.name, g.block.name, why))
	}
	return out
}

// layoutWarnings says which boundary slots of form f's Graph blocks have a
// layout (shape, strides and dtype: what a call's boundary must match in
// the recorded Definition, the offset aside) that depends on a param
// outside the key. Calls with another value of it mismatch the Definition
// and run on the ordinary path: correct, so a warning, not an error, but
// slow, and the runtime's own warning names no file or line. A block with
// boundary: auto has its calls' slots, each reading the params its call
// passes.
func (m *Model) layoutWarnings(f *form) []string {
	var out []string
	for _, g := range f.graphs {
		if g == nil {
			continue
		}
		b := g.block
		warn := func(s *boundSlot, owner string, deps uint64, via string) {
			for p := range b.params {
				if deps&(1<<uint(p)) == 0 || g.inKey&(1<<uint(p)) != 0 {
					continue
				}
				out = append(out, fmt.Sprintf("%s:%d: form %s: boundary slot %s of %s%s: its layout depends on %s, not in the key of %s: calls with another %s mismatch the Definition and run on the ordinary path (add %s to the form's config for %s)",
					m.file, s.view.line, f.name, s.name, owner, via, b.params[p], b.name, b.params[p], b.params[p], b.name))
			}
		}
		if !b.auto {
			for _, s := range b.boundary {
				warn(s, b.name, s.view.layoutDeps(), "")
			}
			continue
		}
		for _, c := range b.calls {
			for _, s := range c.callee.boundary {
				var deps uint64
				for q := range c.callee.params {
					if s.view.layoutDeps()&(1<<uint(q)) != 0 && c.params[q] != nil {
						deps |= c.params[q].deps
					}
				}
				if s.view.kind == baseTArg {
					if a := c.tensorArgs[s.view.base]; a != nil {
						deps |= a.layoutDeps()
					}
				}
				warn(s, c.callee.name, deps, fmt.Sprintf(" (called by %s at line %d)", b.name, c.line))
			}
		}
	}
	return out
}
