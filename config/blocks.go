package config

import (
	"go.yaml.in/yaml/v3"
)

// blockDoc is a block of the blocks section.
type blockDoc struct {
	Params   *yaml.Node `yaml:"params"`
	Variants *yaml.Node `yaml:"variants"`
	Tensors  *yaml.Node `yaml:"tensors"`
	Tasks    *yaml.Node `yaml:"tasks"`
	Boundary *yaml.Node `yaml:"boundary"`
	Scalars  *yaml.Node `yaml:"scalars"`
	Body     *yaml.Node `yaml:"body"`
}

// blockHeader compiles what callers of block b see: its params, variants,
// tensor and task params and its boundary (blockBoundary). It returns the
// body, compiled once every header is (blockBody), so that a call may name
// a block defined later in the file.
func (l *loader) blockHeader(b *block, n *yaml.Node) (*yaml.Node, error) {
	var d blockDoc
	if err := l.decode(n, "block "+b.name, &d); err != nil {
		return nil, err
	}
	if d.Body == nil {
		return nil, l.errf(n, "blocks."+b.name+".body", "", "missing")
	}
	names := map[string]int{}
	dup := func(nd *yaml.Node, s string) error {
		if !isIdent(s) {
			return l.errf(nd, "blocks."+b.name, s, "a name must be an identifier: %s", identRule)
		}
		if line, ok := names[s]; ok {
			return l.errf(nd, "blocks."+b.name, s, "duplicate name (also defined at line %d)", line)
		}
		if _, ok := l.m.consts[s]; ok {
			return l.errf(nd, "blocks."+b.name, s, "name shadows a constant")
		}
		names[s] = nd.Line
		return nil
	}
	// nameList reads a list of names the block defines (params, variants,
	// tensor and task params), each an identifier of its own.
	nameList := func(nd *yaml.Node, key string, check func([]string) error) ([]string, error) {
		list, err := l.strList(nd, key)
		if err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(list); err != nil {
				return nil, err
			}
		}
		for i, s := range list {
			if err := dup(nd.Content[i], s); err != nil {
				return nil, err
			}
		}
		return list, nil
	}
	var err error
	if p := d.Params; p != nil {
		if b.params, err = nameList(p, "params", nil); err != nil {
			return nil, err
		}
	}
	b.envSize = len(b.params)
	if v := d.Variants; v != nil {
		atLeastTwo := func(list []string) error {
			if len(list) < 2 {
				return l.errf(v, "variants", "", "want at least two variant names")
			}
			return nil
		}
		if b.variants, err = nameList(v, "variants", atLeastTwo); err != nil {
			return nil, err
		}
		b.variantSlot = b.envSize
		b.envSize++
	}
	if t := d.Tensors; t != nil {
		if b.tensors, err = nameList(t, "tensors", nil); err != nil {
			return nil, err
		}
	}
	if t := d.Tasks; t != nil {
		if b.taskParams, err = nameList(t, "tasks", nil); err != nil {
			return nil, err
		}
	}
	if err := l.blockBoundary(b, &d, n); err != nil {
		return nil, err
	}
	return d.Body, nil
}

// blockBody compiles block b's body, once every block's header is known.
func (l *loader) blockBody(b *block, n *yaml.Node) error {
	b.structural = make([]int, 64)
	if b.variantScalars != nil {
		// Variants that pass different boundary scalars have different
		// boundary signatures: each variant is its own key.
		b.structural[b.variantSlot] = b.variantScalarsLine
	}
	sc := &scope{l: l, b: b, vals: map[string]int{}, labelDef: map[string]bool{}, allIDs: map[string]bool{}, readVars: map[string]int{}, hostDeps: map[string]uint64{}, slotDeps: map[int]uint64{}}
	collectIDs(n, sc.allIDs)
	for i, p := range b.params {
		sc.vals[p] = i
	}
	for i, s := range b.scalars {
		sc.vals[s.name] = b.scalarBase + i
	}
	ops, err := sc.ops(n, "body")
	if err != nil {
		return err
	}
	b.body = ops
	if err := l.checkValueOnly(b); err != nil {
		return err
	}
	if b.auto {
		for _, o := range b.body {
			if o.kind == opCall && o.cond != nil {
				return l.errf(n, "body", "", "an auto boundary needs unconditional calls at the top of the body (line %d)", o.line)
			}
		}
	}
	return nil
}
