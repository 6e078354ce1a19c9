package config

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// programDoc is the program section; formDoc a form and graphDoc one of
// its Graphs.
type programDoc struct {
	Params *yaml.Node `yaml:"params"`
	Body   *yaml.Node `yaml:"body"`
}

type formDoc struct {
	Params *yaml.Node `yaml:"params"`
	Graphs *yaml.Node `yaml:"graphs"`
	Step   *yaml.Node `yaml:"step"`
}

type graphDoc struct {
	Key    *yaml.Node `yaml:"key"`
	Config *yaml.Node `yaml:"config"`
}

// programHeader compiles the program's params and slots (its entry
// tensors); its body is compiled with the blocks' (blockBody).
func (l *loader) programHeader(n *yaml.Node) (*yaml.Node, error) {
	var d programDoc
	if err := l.decode(n, "program", &d); err != nil {
		return nil, err
	}
	if d.Body == nil {
		return nil, l.errf(n, "program.body", "", "missing")
	}
	p := &block{idx: -1, name: "program", line: n.Line, variantSlot: -1, isProgram: true}
	if pn := d.Params; pn != nil {
		params, err := l.entries(pn, "program.params", "want a mapping of name to default value")
		if err != nil {
			return nil, err
		}
		seen := map[string]int{}
		for _, kv := range params {
			k := kv.key
			if !isIdent(k.Value) {
				return nil, l.errf(k, "program.params", k.Value, "not an identifier: %s", identRule)
			}
			if line, dup := seen[k.Value]; dup {
				return nil, l.errf(k, "program.params", k.Value, "duplicate param (also at line %d)", line)
			}
			seen[k.Value] = k.Line
			v, err := l.constInt(kv.value, "program.params."+k.Value)
			if err != nil {
				return nil, err
			}
			p.params = append(p.params, k.Value)
			l.m.progDef = append(l.m.progDef, v)
		}
	}
	l.m.progParam = p.params
	p.envSize = len(p.params)
	p.scalarBase = p.envSize
	for _, e := range l.m.entry {
		p.slotNames = append(p.slotNames, e.name)
	}
	p.fixedSlots = len(p.slotNames)
	l.m.program = p
	return d.Body, nil
}

// formsSection compiles the forms: each overrides program params and makes
// some blocks' calls Graphs.
func (l *loader) formsSection(n *yaml.Node) error {
	forms, err := l.entries(n, "forms", "want a mapping of form name to form")
	if err != nil {
		return err
	}
	for _, kv := range forms {
		k, v := kv.key, kv.value
		if o, dup := l.m.formIdx[k.Value]; dup {
			return l.errf(k, "forms", k.Value, "duplicate form name (also at line %d)", o.line)
		}
		fm := &form{name: k.Value, line: k.Line, params: append([]int64(nil), l.m.progDef...), graphs: make([]*graphSpec, len(l.m.blocks))}
		var ff formDoc
		if err := l.decode(v, "form "+fm.name, &ff); err != nil {
			return err
		}
		if pn := ff.Params; pn != nil {
			params, err := l.entries(pn, "params", "want a mapping of program param to value")
			if err != nil {
				return err
			}
			for _, pkv := range params {
				pk := pkv.key
				idx := -1
				for x, p := range l.m.progParam {
					if p == pk.Value {
						idx = x
					}
				}
				if idx < 0 {
					return l.errf(pk, "forms."+fm.name+".params", pk.Value, "undefined parameter (want one of the program params: %s)", strings.Join(l.m.progParam, ", "))
				}
				if fm.params[idx], err = l.constInt(pkv.value, pk.Value); err != nil {
					return err
				}
			}
		}
		if gn := ff.Graphs; gn != nil {
			graphs, err := l.entries(gn, "graphs", "want a mapping of block name to {key, config}")
			if err != nil {
				return err
			}
			for _, gkv := range graphs {
				bk := gkv.key
				b := l.m.blockIdx[bk.Value]
				if b == nil {
					return l.errf(bk, "forms."+fm.name+".graphs", bk.Value, "unknown block (want one of %s)", strings.Join(l.m.Blocks(), ", "))
				}
				if o := fm.graphs[b.idx]; o != nil {
					return l.errf(bk, "forms."+fm.name+".graphs", bk.Value, "duplicate block (also at line %d)", o.line)
				}
				g, err := l.graphSpec(b, gkv.value)
				if err != nil {
					return err
				}
				fm.graphs[b.idx] = g
			}
		}
		if sn := ff.Step; sn != nil {
			if fm.step, err = l.stepSpec(fm, sn); err != nil {
				return err
			}
		}
		l.m.forms = append(l.m.forms, fm)
		l.m.formIdx[fm.name] = fm
	}
	if len(l.m.forms) == 0 {
		return l.errf(n, "forms", "", "want at least one form")
	}
	return nil
}

// A key template is bounded: whether two blocks' keys can make one text
// (sharedKeys) is decided on the product of their automata, whose size is
// the product of the templates' and grows with each {param}'s digit loop;
// unbounded, a few-kilobyte key of {param}s took minutes and gigabytes. A
// real key is a short name with a {param} or two. maxKeyStates bounds the
// automaton itself, which a {variant} makes as large as the block's variant
// names together: about the key's length with each {variant} spelled out as
// every name.
const (
	maxKeyLen    = 256
	maxKeyParams = 8
	maxKeyStates = 512
)

// graphSpec compiles a form's Graph of block b: its key text, with
// {param}s, and the params hashed into full_key.
func (l *loader) graphSpec(b *block, n *yaml.Node) (*graphSpec, error) {
	var f graphDoc
	if err := l.decode(n, "graph", &f); err != nil {
		return nil, err
	}
	g := &graphSpec{block: b, key: b.name, line: n.Line}
	slotOf := func(nd *yaml.Node, name string) (int, error) {
		for i, p := range b.params {
			if p == name {
				return i, nil
			}
		}
		if name == "variant" && b.variantSlot >= 0 {
			return b.variantSlot, nil
		}
		want := append([]string(nil), b.params...)
		if b.variantSlot >= 0 {
			want = append(want, "variant")
		}
		return 0, l.errf(nd, "key of "+b.name, name, "undefined parameter (want one of %s)", strings.Join(want, ", "))
	}
	if k := f.Key; k != nil {
		if k.Value == "" {
			return nil, l.errf(k, "key of "+b.name, k.Value, "empty key (want a text such as %q, or leave key out for the block's name)", b.name+"{param}")
		}
		if len(k.Value) > maxKeyLen {
			return nil, l.errf(k, "key of "+b.name, shorten(k.Value), "key is %d bytes long (at most %d)", len(k.Value), maxKeyLen)
		}
		g.key = k.Value
		s, nParams := k.Value, 0
		for s != "" {
			i := strings.IndexByte(s, '{')
			if i < 0 {
				g.parts = append(g.parts, keyPart{lit: s, slot: -1})
				break
			}
			if i > 0 {
				g.parts = append(g.parts, keyPart{lit: s[:i], slot: -1})
			}
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return nil, l.errf(k, "key", k.Value, "unclosed '{' (want {param})")
			}
			slot, err := slotOf(k, s[i+1:i+j])
			if err != nil {
				return nil, err
			}
			if nParams++; nParams > maxKeyParams {
				return nil, l.errf(k, "key of "+b.name, shorten(k.Value), "more than %d {param}s in a key", maxKeyParams)
			}
			g.parts = append(g.parts, keyPart{slot: slot})
			g.inKey |= 1 << uint(slot)
			s = s[i+j+1:]
		}
		if n := len(g.nfa().edges); n > maxKeyStates {
			return nil, l.errf(k, "key of "+b.name, shorten(k.Value), "key too large to compare with other keys: its automaton has %d states (at most %d: a character is one, a {param} four, a {variant} about as many as its %d variant names have characters): use fewer {variant}s or shorter variant names",
				n, maxKeyStates, len(b.variants))
		}
	} else {
		g.parts = []keyPart{{lit: b.name, slot: -1}}
	}
	if c := f.Config; c != nil {
		names, err := l.strList(c, "config")
		if err != nil {
			return nil, err
		}
		for i, nm := range names {
			slot, err := slotOf(c.Content[i], nm)
			if err != nil {
				return nil, err
			}
			g.config = append(g.config, slot)
			g.inKey |= 1 << uint(slot)
		}
	}
	// The key text alone does not tell the values it interpolates apart
	// ("L{a}{b}" is L111 for a=1, b=11 and for a=11, b=1), yet the static
	// checks count an interpolated param as in the key: its value is hashed
	// too, after config's, unless config already hashes it.
	for _, p := range g.parts {
		if p.slot >= 0 && !slices.Contains(g.config, p.slot) {
			g.config = append(g.config, p.slot)
		}
	}
	return g, nil
}
