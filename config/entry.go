package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// constants compiles the constants section: names usable in every
// expression.
func (l *loader) constants(n *yaml.Node) error {
	consts, err := l.entries(n, "constants", "want a mapping of name to integer")
	if err != nil {
		return err
	}
	for _, kv := range consts {
		k, v := kv.key, kv.value
		if !isIdent(k.Value) {
			return l.errf(k, "constants", k.Value, "a constant name must be an identifier: %s", identRule)
		}
		if line, dup := l.constLine[k.Value]; dup {
			return l.errf(k, "constants", k.Value, "duplicate constant (also at line %d)", line)
		}
		l.constLine[k.Value] = k.Line
		x, err := l.constInt(v, "constants."+k.Value)
		if err != nil {
			return err
		}
		l.m.consts[k.Value] = x
	}
	return nil
}

// shapeConst reads a constant shape: 1 to MaxDims positive dimensions.
func (l *loader) shapeConst(n *yaml.Node, key string) ([]int64, error) {
	items, err := l.seq(n, key)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 || len(items) > stages.MaxDims {
		return nil, l.errf(n, key, "", "want 1 to %d dimensions, got %d", stages.MaxDims, len(items))
	}
	out := make([]int64, len(items))
	for i, it := range items {
		if out[i], err = l.constInt(it, key); err != nil {
			return nil, err
		}
		if out[i] <= 0 {
			return nil, l.errf(it, key, it.Value, "a dimension must be positive")
		}
	}
	if !shapeOK(out, stages.DTypeInvalid) {
		return nil, l.errf(n, key, fmt.Sprint(out), "the shape's product overflows int64")
	}
	return out, nil
}

// entryDoc is the entry section; entryTensorDoc and entryScalarDoc its
// items.
type entryDoc struct {
	Tensors *yaml.Node `yaml:"tensors"`
	Scalars *yaml.Node `yaml:"scalars"`
}

type entryTensorDoc struct {
	Name  *yaml.Node `yaml:"name"`
	DType *yaml.Node `yaml:"dtype"`
	Shape *yaml.Node `yaml:"shape"`
	Role  *yaml.Node `yaml:"role"`
	Out   *yaml.Node `yaml:"out"`
	Value *yaml.Node `yaml:"value"`
}

type entryScalarDoc struct {
	Name  *yaml.Node `yaml:"name"`
	Value *yaml.Node `yaml:"value"`
}

// entry compiles the entry section: RootIDs 0..N-1 in order, and scalars,
// which are constants too.
func (l *loader) entry(n *yaml.Node) error {
	var d entryDoc
	if err := l.decode(n, "entry", &d); err != nil {
		return err
	}
	if d.Tensors == nil {
		return l.errf(n, "entry.tensors", "", "missing")
	}
	seen := map[string]int{} // name -> its line
	for ti, err := range decodeEach[entryTensorDoc](l, d.Tensors, "entry.tensors", "entry tensor", "") {
		if err != nil {
			return err
		}
		it, td := ti.node, &ti.doc
		if k := absent(td, "name", "dtype", "shape"); k != "" {
			return l.errf(it, "entry tensor."+k, "", "missing (an entry tensor needs name, dtype, shape)")
		}
		e := entryTensor{line: it.Line, kind: stages.RootEntry}
		if e.name, err = l.str(td.Name, "name"); err != nil {
			return err
		}
		if !isIdent(e.name) {
			return l.errf(td.Name, "entry tensor name", e.name, "not an identifier: %s", identRule)
		}
		if line, dup := seen[e.name]; dup {
			return l.errf(td.Name, "entry tensor name", e.name, "duplicate entry tensor (also at line %d)", line)
		}
		seen[e.name] = td.Name.Line
		if e.dtype, err = stages.ParseDType(td.DType.Value); err != nil {
			return l.wrap(td.DType, "dtype", td.DType.Value, err)
		}
		if e.shape, err = l.shapeConst(td.Shape, "shape"); err != nil {
			return err
		}
		if !shapeOK(e.shape, e.dtype) {
			return l.errf(td.Shape, "shape", fmt.Sprint(e.shape), "%s bytes overflow int64", e.dtype)
		}
		if r := td.Role; r != nil {
			e.role = r.Value
		}
		if o := td.Out; o != nil {
			// YAML 1.1's yes, on and their kin decode as booleans too; the
			// language says true or false (doc.go), and reads them alone.
			if o.Kind != yaml.ScalarNode || o.Value != "true" && o.Value != "false" {
				return l.errf(o, "out", nodeText(o), "want true or false")
			}
			if o.Value == "true" {
				e.kind = stages.RootEntryOutput
			}
		}
		if v := td.Value; v != nil {
			if e.value, err = l.constInt(v, "value"); err != nil {
				return err
			}
			e.hasValue = true
		}
		l.m.entry = append(l.m.entry, e)
		l.m.entryViews = append(l.m.entryViews, stages.NewView(stages.RootID(len(l.m.entryViews)), 0, e.dtype, e.shape...))
	}
	if s := d.Scalars; s != nil {
		for si, err := range decodeEach[entryScalarDoc](l, s, "entry.scalars", "entry scalar", "want name and value", "name", "value") {
			if err != nil {
				return err
			}
			sd := &si.doc
			nm := sd.Name.Value
			if !isIdent(nm) {
				return l.errf(sd.Name, "entry scalar name", nm, "not an identifier: %s", identRule)
			}
			if line, dup := l.constLine[nm]; dup {
				return l.errf(sd.Name, "entry scalar name", nm, "duplicate name: a constant or entry scalar at line %d has it", line)
			}
			l.constLine[nm] = sd.Name.Line
			v, err := l.constInt(sd.Value, "value")
			if err != nil {
				return err
			}
			l.m.consts[nm] = v
			l.m.entryScalars = append(l.m.entryScalars, v)
		}
	}
	return nil
}
