package config

import (
	"fmt"
	"math"
	"math/rand/v2"

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
		if v.Kind == yaml.SequenceNode {
			// A constant array: static const int32_t NAME[] = {...}.
			if k.Value == "scalar" || k.Value == "shape" {
				return l.errf(k, "constants", k.Value, "%s(...) is a lookup of its own: give the array another name", k.Value)
			}
			if len(v.Content) == 0 || len(v.Content) > maxEntryData {
				return l.errf(v, "constants."+k.Value, "", "a constant array has 1 to %d values, got %d", maxEntryData, len(v.Content))
			}
			a := make([]int64, len(v.Content))
			for i, it := range v.Content {
				if a[i], err = l.constInt(it, "constants."+k.Value); err != nil {
					return err
				}
			}
			if l.m.constArrays == nil {
				l.m.constArrays = map[string][]int64{}
			}
			l.m.constArrays[k.Value] = a
			continue
		}
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
	Data  *yaml.Node `yaml:"data"`
	// ManualDep is make_tensor_external(..., manual_dep=true) over the
	// entry buffer: the entry tensor's descriptor is manual_dep.
	ManualDep *yaml.Node `yaml:"manual_dep"`
}

// entryDataDoc is a generated data: {seed, min, max}.
type entryDataDoc struct {
	Seed *yaml.Node `yaml:"seed"`
	Min  *yaml.Node `yaml:"min"`
	Max  *yaml.Node `yaml:"max"`
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
		if o := td.ManualDep; o != nil {
			if o.Kind != yaml.ScalarNode || o.Value != "true" && o.Value != "false" {
				return l.errf(o, "manual_dep", nodeText(o), "want true or false")
			}
			e.manualDep = o.Value == "true"
		}
		if v := td.Value; v != nil {
			if e.value, err = l.constInt(v, "value"); err != nil {
				return err
			}
			e.hasValue = true
		}
		if dn := td.Data; dn != nil {
			if e.data, err = l.entryData(dn, &e); err != nil {
				return err
			}
		}
		l.m.entry = append(l.m.entry, e)
		ev := stages.NewView(stages.RootID(len(l.m.entryViews)), 0, e.dtype, e.shape...)
		ev.ManualDep = e.manualDep
		l.m.entryViews = append(l.m.entryViews, ev)
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

// maxEntryData bounds the elements of an entry tensor with contents: data
// is for the small integer tables a host reads (context lengths, block
// tables), not for weights.
const maxEntryData = 1 << 16

// entryData reads an entry tensor's contents: a list of integers, one per
// element in row-major order, or {seed, min, max}: each element drawn
// uniformly from [min, max] by a PCG seeded with seed (math/rand/v2), so a
// model's data is the same in every run.
func (l *loader) entryData(n *yaml.Node, e *entryTensor) ([]int64, error) {
	elems := prod(e.shape)
	lo, hi, ok := dtypeRange(e.dtype)
	if !ok {
		return nil, l.errf(n, "data", nodeText(n), "entry tensor %s is %s: data is for integer tensors (int8, int32, int64, uint8, uint32, uint64)", e.name, e.dtype)
	}
	if elems > maxEntryData {
		return nil, l.errf(n, "data", "", "entry tensor %s has %d elements: data takes at most %d", e.name, elems, maxEntryData)
	}
	out := make([]int64, elems)
	check := func(nd *yaml.Node, v int64) error {
		if v < lo || v > hi {
			return l.errf(nd, "data", nd.Value, "%d does not fit %s (want %d to %d)", v, e.dtype, lo, hi)
		}
		return nil
	}
	if n.Kind == yaml.SequenceNode {
		if int64(len(n.Content)) != elems {
			return nil, l.errf(n, "data", "", "%d values for the %d elements of %s %v (want one per element, row-major)", len(n.Content), elems, e.name, e.shape)
		}
		for i, it := range n.Content {
			v, err := l.constInt(it, "data")
			if err != nil {
				return nil, err
			}
			if err := check(it, v); err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	var d entryDataDoc
	if err := l.decode(n, "data", &d); err != nil {
		return nil, err
	}
	if k := absent(&d, "seed", "min", "max"); k != "" {
		return nil, l.errf(n, "data."+k, "", "missing (want a list of values, or {seed, min, max})")
	}
	seed, err := l.constInt(d.Seed, "data.seed")
	if err != nil {
		return nil, err
	}
	mn, err := l.constInt(d.Min, "data.min")
	if err != nil {
		return nil, err
	}
	mx, err := l.constInt(d.Max, "data.max")
	if err != nil {
		return nil, err
	}
	if err := check(d.Min, mn); err != nil {
		return nil, err
	}
	if err := check(d.Max, mx); err != nil {
		return nil, err
	}
	if span, ok := subOK(mx, mn); mx < mn || !ok || span == math.MaxInt64 {
		return nil, l.errf(d.Max, "data.max", d.Max.Value, "want max >= min (%d), and a range below 2^63", mn)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x68626764617461)) // "hbgdata"
	for i := range out {
		out[i] = mn + rng.Int64N(mx-mn+1)
	}
	return out, nil
}

// dtypeRange is the values an integer dtype holds (within int64).
func dtypeRange(dt stages.DType) (lo, hi int64, ok bool) {
	switch dt {
	case stages.INT8:
		return math.MinInt8, math.MaxInt8, true
	case stages.INT32:
		return math.MinInt32, math.MaxInt32, true
	case stages.INT64:
		return math.MinInt64, math.MaxInt64, true
	case stages.UINT8:
		return 0, math.MaxUint8, true
	case stages.UINT32:
		return 0, math.MaxUint32, true
	case stages.UINT64:
		return 0, math.MaxInt64, true
	}
	return 0, 0, false
}
