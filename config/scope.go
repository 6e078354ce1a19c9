package config

import "go.yaml.in/yaml/v3"

// scope compiles one block's (or the program's) ops.
type scope struct {
	l        *loader
	b        *block
	boundary bool
	vals     map[string]int
	labelDef map[string]bool
	allIDs   map[string]bool // every op id of the block, defined or not yet
	inLoop   []*op
	// readVars are the names read ops bind (env slots), level the names
	// each enclosing op list bound, to drop at its end.
	readVars map[string]int
	level    [][]string
	// hostDeps are the env slots each local's value reads (every
	// assignment's), and slotDeps the same by the local's env slot: a use
	// of the local reads them too (exprParser.slotDeps).
	hostDeps map[string]uint64
	slotDeps map[int]uint64
}

func (sc *scope) intRes(name string) (int64, int, int, bool) {
	if sc.boundary {
		return sc.l.boundaryRes(sc.b)(name)
	}
	if s, ok := sc.vals[name]; ok {
		bs := -1
		if s >= sc.b.scalarBase && s < sc.b.scalarBase+len(sc.b.scalars) {
			bs = s - sc.b.scalarBase
		}
		return 0, s, bs, true
	}
	v, ok := sc.l.m.consts[name]
	return v, -1, -1, ok
}

// tensor resolves a tensor name.
func (sc *scope) tensor(name string) (baseKind, int, bool) {
	if sc.boundary {
		for i, t := range sc.b.tensors {
			if t == name {
				return baseTArg, i, true
			}
		}
		for i, e := range sc.l.m.entry {
			if e.name == name {
				return baseEntry, i, true
			}
		}
		return 0, 0, false
	}
	// Newest definition wins: search from the end.
	for i := len(sc.b.slotNames) - 1; i >= 0; i-- {
		if sc.b.slotNames[i] == name {
			return baseSlot, i, true
		}
	}
	return 0, 0, false
}

// tensorList resolves a tensor list name (the newest definition).
func (sc *scope) tensorList(name string) *tensorList {
	if sc.boundary {
		return nil
	}
	for i := len(sc.b.lists) - 1; i >= 0; i-- {
		if sc.b.lists[i].name == name {
			return &sc.b.lists[i]
		}
	}
	return nil
}

// slotLocal reports whether a tensor slot holds a tensor the block
// allocates itself (an alloc, or a let viewing one).
func (sc *scope) slotLocal(slot int) bool {
	return slot >= sc.b.fixedSlots && !sc.b.nonLocal[slot]
}

func (sc *scope) tensorNames() string {
	if sc.boundary {
		return "a tensor param or an entry tensor"
	}
	if sc.b.isProgram {
		return "an entry tensor or an earlier alloc"
	}
	return "a boundary slot or an earlier alloc of " + sc.b.name
}

// use records what a line of the body depends on (deps: env slots): a param
// or the variant makes the body's structure depend on it (structure); a
// boundary scalar bakes its value into the Definition, since a replay
// patches a boundary scalar only where a task passes it as a scalar as it is
// (taskop's scalars, which call structure for those). key and src say
// where, for the error.
func (sc *scope) use(deps uint64, line int, key, src string) {
	sc.structure(deps, line)
	if sc.boundary {
		return
	}
	lo, hi := sc.b.scalarBase, sc.b.scalarBase+len(sc.b.scalars)
	for s := lo; s < hi && s < 64; s++ {
		if deps&(1<<uint(s)) != 0 {
			sc.b.baked = append(sc.b.baked, bakedUse{line: line, scalar: sc.b.scalars[s-lo].name, key: key, expr: src})
			return
		}
	}
}

// structure records that the body's structure depends on the params and
// the variant among deps, from line on.
func (sc *scope) structure(deps uint64, line int) {
	if sc.boundary {
		return
	}
	for s := 0; s < 64; s++ {
		if deps&(1<<uint(s)) == 0 {
			continue
		}
		if s < len(sc.b.params) || s == sc.b.variantSlot {
			if sc.b.structural[s] == 0 {
				sc.b.structural[s] = line
			}
		}
	}
}

func (sc *scope) expr(s string) (*expr, error) {
	p, err := sc.newParser(s)
	if err != nil {
		return nil, err
	}
	e, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errf(t, "unexpected %q after the expression", t.s)
	}
	e.src = s
	setSrc(e, s)
	return e, nil
}

// newParser is a parser over the scope's names: its tables, and the
// sources of its locals' values.
func (sc *scope) newParser(src string) (*exprParser, error) {
	p, err := newParser(src, sc.intRes)
	if err != nil {
		return nil, err
	}
	p.tables = sc.l.entryTables
	if len(sc.slotDeps) > 0 {
		p.slotDeps = sc.slotDeps
	}
	return p, nil
}

// parser starts parsing src, the value of key at nd, over the scope's
// names; a token error is reported there.
func (sc *scope) parser(nd *yaml.Node, key, src string) (*exprParser, error) {
	p, err := sc.newParser(src)
	if err != nil {
		return nil, sc.l.errf(nd, key, src, "%v", err)
	}
	return p, nil
}
