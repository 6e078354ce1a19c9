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
// (*BakedScalarError), and a task that writes a boundary slot tagged in
// (*InputWrittenError). The errors are typed so that the runtime can treat
// them as errors or warnings.
func (m *Model) GraphChecks() []error {
	var out []error
	for _, f := range m.forms {
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
		g.complete = len(slots) == 0 && len(b.baked) == 0 && len(b.inputWrites) == 0
		for _, s := range slots {
			out = append(out, &StructureError{File: m.file, Line: b.structural[s], Form: f.name, Block: b.name, Param: b.slotName(s)})
		}
		for _, u := range b.baked {
			out = append(out, &BakedScalarError{File: m.file, Line: u.line, Form: f.name, Block: b.name, Scalar: u.scalar, Key: u.key, Expr: u.expr})
		}
		for _, w := range b.inputWrites {
			out = append(out, &InputWrittenError{File: m.file, Line: w.line, Form: f.name, Block: b.name, Slot: w.slot, Arg: w.arg})
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

// idleGraphs says which of form f's Graph entries no call made a Graph in a
// run that c counted: every call of the block ran inside another Graph's
// body, where calls are inline (a Definition holds no nested Graph), or
// none ran. Such an entry has no effect; it is a warning, not an error,
// since the form runs, as its outer Graphs.
func (m *Model) idleGraphs(f *form, c *counter) []string {
	var out []string
	for _, g := range f.graphs {
		if g == nil || c.asGraph[g.block.idx] {
			continue
		}
		why := "no call of it runs in this form"
		if c.callInGraph[g.block.idx] {
			why = "every call of it runs inside another Graph's body, where calls are inline (a Definition holds no nested Graph)"
		}
		out = append(out, fmt.Sprintf("%s:%d: form %s: graphs.%s has no effect: %s", m.file, g.line, f.name, g.block.name, why))
	}
	return out
}
