package config

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// boundaryRes resolves names in boundary expressions: block params and
// constants (evaluated in the callee's env at call time, before the body).
func (l *loader) boundaryRes(b *block) resolver {
	return func(name string) (int64, int, int, bool) {
		for i, p := range b.params {
			if p == name {
				return 0, i, -1, true
			}
		}
		v, ok := l.m.consts[name]
		return v, -1, -1, ok
	}
}

// boundaryScalarDoc is a boundary scalar; boundarySlotDoc a boundary slot.
type boundaryScalarDoc struct {
	Name  *yaml.Node `yaml:"name"`
	Value *yaml.Node `yaml:"value"`
}

type boundarySlotDoc struct {
	Name  *yaml.Node `yaml:"name"`
	Tag   *yaml.Node `yaml:"tag"`
	View  *yaml.Node `yaml:"view"`
	DType *yaml.Node `yaml:"dtype"`
	Shape *yaml.Node `yaml:"shape"`
}

// maxBlockSlots bounds a block's params, variant and boundary scalars
// together: the static Graph checks track which of them an expression reads
// in a uint64 (expr.deps, graphSpec.inKey), and a slot past it would go
// unchecked, its Graph marked complete and its first call's body replayed
// for every call.
const maxBlockSlots = 64

// blockBoundary compiles block b's boundary: its scalars (env slots after
// the params, evaluated in the caller), then its slots, or with boundary:
// auto none of either: the block's calls' boundaries make it at run time
// (runner.autoBoundary).
func (l *loader) blockBoundary(b *block, d *blockDoc, n *yaml.Node) error {
	b.scalarBase = b.envSize
	bres := l.boundaryRes(b)
	if s := d.Scalars; s != nil {
		if err := l.blockScalars(b, s, bres); err != nil {
			return err
		}
	}
	b.envSize += len(b.scalars)
	for i := range b.scalars {
		b.allScalars = append(b.allScalars, i)
	}
	return l.blockSlots(b, d, n)
}

// blockScalars compiles a block's boundary scalars: a list, or in a block
// with variants a mapping of variant name to list (upstream's Graph
// function that adds three scalars in one construction variant and one in
// another). A name in several variants' lists is one env slot with one
// value; b.variantScalars[v] lists variant v's, in its order.
func (l *loader) blockScalars(b *block, s *yaml.Node, bres resolver) error {
	if s.Kind == yaml.MappingNode {
		if len(b.variants) == 0 {
			return l.errf(s, "scalars", "", "per-variant boundary scalars (a mapping of variant to list) in a block without variants: want a list")
		}
		kvs, err := l.entries(s, "scalars", "")
		if err != nil {
			return err
		}
		b.variantScalars = make([][]int, len(b.variants))
		b.variantScalarsLine = s.Line
		given := make([]bool, len(b.variants))
		for _, kv := range kvs {
			v := slices.Index(b.variants, kv.key.Value)
			if v < 0 {
				return l.errf(kv.key, "scalars", kv.key.Value, "not a variant of %s (want one of %s)", b.name, strings.Join(b.variants, ", "))
			}
			if given[v] {
				return l.errf(kv.key, "scalars", kv.key.Value, "duplicate variant")
			}
			given[v] = true
			idx, err := l.scalarList(b, kv.value, bres, "scalars."+kv.key.Value)
			if err != nil {
				return err
			}
			b.variantScalars[v] = idx
		}
		return nil
	}
	_, err := l.scalarList(b, s, bres, "scalars")
	return err
}

// scalarList compiles one list of boundary scalars into b.scalars and
// returns their indices, in list order. A name already compiled (another
// variant's) must have the same value text.
func (l *loader) scalarList(b *block, s *yaml.Node, bres resolver, key string) ([]int, error) {
	{
		items, err := l.seq(s, key)
		if err != nil {
			return nil, err
		}
		var idx []int
		for _, it := range items {
			var sf boundaryScalarDoc
			if it.Kind == yaml.ScalarNode {
				// A bare name is the value of that name in the block: a
				// param (bound by the call) or a constant.
				sf.Name, sf.Value = it, it
			} else if err := l.decode(it, "boundary scalar", &sf); err != nil {
				return nil, err
			}
			if sf.Name == nil || sf.Value == nil {
				return nil, l.errf(it, "boundary scalar", "", "want name and value (or a bare name: the block's param or the constant of that name)")
			}
			nm := sf.Name.Value
			j := slices.IndexFunc(b.scalars, func(o *bscalar) bool { return o.name == nm })
			if j >= 0 && slices.Contains(idx, j) {
				return nil, l.errf(sf.Name, "boundary scalar", nm, "duplicate name")
			}
			if j >= 0 {
				if o := b.scalars[j]; o.src != sf.Value.Value {
					return nil, l.errf(sf.Value, "boundary scalar "+nm, sf.Value.Value, "another variant's %s at line %d is %q: one name has one value (give this one another name)", nm, o.line, o.src)
				}
				idx = append(idx, j)
				continue
			}
			e, err := parseExprT(sf.Value.Value, bres, l.entryTables)
			if err != nil {
				return nil, l.errf(sf.Value, "boundary scalar "+nm, sf.Value.Value, "bad expression: %v (a boundary scalar's value reads the block's params and the constants, not the caller's names: pass the caller's value as a param)", err)
			}
			idx = append(idx, len(b.scalars))
			b.scalars = append(b.scalars, &bscalar{name: nm, value: e, src: sf.Value.Value, line: it.Line})
			t, _ := termOf(e)
			b.scalarTerms = append(b.scalarTerms, t)
		}
		return idx, nil
	}
}

// blockSlots compiles block b's boundary slots (after its scalars).
func (l *loader) blockSlots(b *block, d *blockDoc, n *yaml.Node) error {
	if b.envSize > maxBlockSlots {
		return l.errf(n, "blocks."+b.name, "", "%d params, variant and boundary scalars; at most %d (the static Graph checks follow each in one bit of a 64-bit set)", b.envSize, maxBlockSlots)
	}
	bn := d.Boundary
	if bn != nil && bn.Kind == yaml.ScalarNode && bn.Value == "auto" {
		b.auto = true
		b.slotNames = append(b.slotNames, b.tensors...)
		b.fixedSlots = len(b.slotNames)
		if len(b.scalars) > 0 {
			return l.errf(d.Scalars, "scalars", "", "an auto boundary takes its scalars from its calls; declare none")
		}
		return nil
	}
	if bn == nil {
		return l.errf(n, "blocks."+b.name+".boundary", "", "missing (a list of slots, or auto)")
	}
	tused := map[string]bool{}
	for si, err := range decodeEach[boundarySlotDoc](l, bn, "boundary", "boundary slot", "want name and tag", "name", "tag") {
		if err != nil {
			return err
		}
		it, sf := si.node, &si.doc
		s := &boundSlot{name: sf.Name.Value, line: it.Line}
		for _, o := range b.boundary {
			if o.name == s.name {
				return l.errf(sf.Name, "boundary slot", s.name, "duplicate name (also at line %d)", o.line)
			}
		}
		if !isIdent(s.name) {
			return l.errf(sf.Name, "boundary slot", s.name, "a slot name must be an identifier: %s", identRule)
		}
		if s.tag, err = stages.ParseTag(sf.Tag.Value); err != nil || s.tag == stages.TagOutput {
			return l.errf(sf.Tag, "tag", sf.Tag.Value, "unknown boundary tag (want in, inout, out_existing or no_dep)")
		}
		src := s.name
		vn := sf.View
		if vn != nil {
			src = vn.Value
		} else {
			vn = sf.Name
		}
		sc := &scope{l: l, b: b, boundary: true}
		if s.view, err = sc.view(src, vn.Line); err != nil {
			return l.errf(vn, "view", src, "%v", err)
		}
		if s.view.kind == baseTArg {
			tused[b.tensors[s.view.base]] = true
		}
		if d := sf.DType; d != nil {
			if s.dtype, err = stages.ParseDType(d.Value); err != nil {
				return l.wrap(d, "dtype", d.Value, err)
			}
		}
		if sh := sf.Shape; sh != nil {
			if s.shape, err = l.shapeConst(sh, "shape"); err != nil {
				return err
			}
		}
		fs := l.fastSlot(s)
		if fs.kind == slotRow && !slices.Contains(b.rowSlots, fs.row.slot) {
			b.rowSlots = append(b.rowSlots, fs.row.slot)
		}
		b.fastBoundary = append(b.fastBoundary, fs)
		b.boundary = append(b.boundary, s)
		b.slotNames = append(b.slotNames, s.name)
	}
	for i, t := range b.tensors {
		if !tused[t] {
			return l.errf(d.Tensors.Content[i], "tensors", t, "tensor param is not used by any boundary slot")
		}
	}
	b.fixedSlots = len(b.slotNames)
	return nil
}
