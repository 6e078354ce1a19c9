package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// Load reads and compiles a model config.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse compiles a model config; name is used in error positions.
func Parse(name string, data []byte) (*Model, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, &Error{File: name, Line: yamlErrLine(err), Msg: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: "), Err: err}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{File: name, Line: 1, Msg: "empty document (want a mapping with model, entry, kernels, blocks, program, forms)"}
	}
	// A second document would be silently ignored: a model is one document.
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		line := next.Line
		if len(next.Content) > 0 {
			line = next.Content[0].Line
		}
		return nil, &Error{File: name, Line: line, Key: "---", Value: "second document", Msg: "a model file holds one YAML document (remove the \"---\" and what follows, or move it to its own file)"}
	} else if !errors.Is(err, io.EOF) {
		return nil, &Error{File: name, Line: yamlErrLine(err), Msg: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: "), Err: err}
	}
	if err := noAliases(name, doc.Content[0], "model config"); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	l := &loader{file: name, m: &Model{file: name, contentHash: hex.EncodeToString(sum[:8]), consts: map[string]int64{}, kernelIdx: map[string]stages.KernelID{}, blockIdx: map[string]*block{}, formIdx: map[string]*form{}}}
	if err := l.model(doc.Content[0]); err != nil {
		return nil, err
	}
	l.m.GraphChecks() // marks the Graph specs that pass as complete
	return l.m, nil
}

// noAliases rejects YAML anchors and aliases: the loader reads the node
// tree, where an alias is a reference the schema does not expect (it used to
// surface as "want a list"), and a model's repetition is said with loops,
// blocks and let, which the checks understand.
func noAliases(file string, n *yaml.Node, key string) error {
	if n.Kind == yaml.AliasNode {
		return &Error{File: file, Line: n.Line, Key: key, Value: "*" + n.Value, Msg: "YAML aliases are not supported (write the value out, or use a block, a loop or let)"}
	}
	if n.Anchor != "" {
		return &Error{File: file, Line: n.Line, Key: key, Value: "&" + n.Anchor, Msg: "YAML anchors are not supported (write the value out, or use a block, a loop or let)"}
	}
	for i, c := range n.Content {
		k := key
		if n.Kind == yaml.MappingNode && i%2 == 1 {
			k = n.Content[i-1].Value
		}
		if err := noAliases(file, c, k); err != nil {
			return err
		}
	}
	return nil
}

// yamlErrLine digs the line out of a yaml.v3 error ("yaml: line 3: ...").
func yamlErrLine(err error) int {
	s := err.Error()
	if i := strings.Index(s, "line "); i >= 0 {
		j := i + 5
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if n, e := strconv.Atoi(s[j:k]); e == nil {
			return n
		}
	}
	return 1
}

type loader struct {
	file  string
	m     *Model
	calls []callSite
	// touchAt is the first op that declared each hinted kernel's touch.
	touchAt map[stages.KernelID]*touchSite
}

func (l *loader) errf(n *yaml.Node, key, value, format string, a ...any) error {
	line := 1
	if n != nil {
		line = n.Line
	}
	return &Error{File: l.file, Line: line, Key: key, Value: value, Msg: fmt.Sprintf(format, a...)}
}

func (l *loader) wrap(n *yaml.Node, key, value string, err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	return &Error{File: l.file, Line: n.Line, Key: key, Value: value, Msg: err.Error(), Err: err}
}

// fields returns a mapping's values by key, rejecting unknown and duplicate keys.
func (l *loader) fields(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, []string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nil, l.errf(n, what, n.Value, "want a mapping")
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	var order []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if allowed != nil && !contains(allowed, k.Value) {
			return nil, nil, l.errf(k, what, k.Value, "unknown key (want one of %s)", strings.Join(allowed, ", "))
		}
		if _, dup := out[k.Value]; dup {
			return nil, nil, l.errf(k, what, k.Value, "duplicate key")
		}
		out[k.Value] = n.Content[i+1]
		order = append(order, k.Value)
	}
	return out, order, nil
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func (l *loader) str(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", l.errf(n, key, "", "want a string")
	}
	return n.Value, nil
}

func (l *loader) seq(n *yaml.Node, key string) ([]*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, l.errf(n, key, n.Value, "want a list")
	}
	return n.Content, nil
}

func (l *loader) strList(n *yaml.Node, key string) ([]string, error) {
	items, err := l.seq(n, key)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(items))
	for i, it := range items {
		if out[i], err = l.str(it, key); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (l *loader) constInt(n *yaml.Node, key string) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, l.errf(n, key, "", "want an integer")
	}
	e, err := parseExpr(n.Value, l.constRes)
	if err != nil {
		return 0, l.errf(n, key, n.Value, "bad integer expression: %v", err)
	}
	return e.val, nil
}

func (l *loader) constRes(name string) (int64, int, int, bool) {
	v, ok := l.m.consts[name]
	return v, -1, -1, ok
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ---- the document

func (l *loader) model(n *yaml.Node) error {
	f, _, err := l.fields(n, "model config", "model", "source", "max_tasks", "constants", "entry", "kernels", "races", "blocks", "program", "forms")
	if err != nil {
		return err
	}
	for _, k := range []string{"model", "entry", "kernels", "program", "forms"} {
		if f[k] == nil {
			return l.errf(n, k, "", "missing (a model needs model, entry, kernels, program and forms)")
		}
	}
	if l.m.Name, err = l.str(f["model"], "model"); err != nil {
		return err
	}
	if c := f["constants"]; c != nil {
		if err := l.constants(c); err != nil {
			return err
		}
	}
	if mt := f["max_tasks"]; mt != nil {
		if l.m.maxTasks, err = l.constInt(mt, "max_tasks"); err != nil {
			return err
		}
		if l.m.maxTasks <= 0 {
			return l.errf(mt, "max_tasks", mt.Value, "want a positive number of tasks per pass")
		}
	}
	if err := l.entry(f["entry"]); err != nil {
		return err
	}
	if err := l.kernelTable(f["kernels"]); err != nil {
		return err
	}
	if r := f["races"]; r != nil {
		if err := l.declaredRaces(r); err != nil {
			return err
		}
	}
	var bnodes []*yaml.Node
	if bn := f["blocks"]; bn != nil {
		if bn.Kind != yaml.MappingNode {
			return l.errf(bn, "blocks", "", "want a mapping of block name to block")
		}
		for i := 0; i+1 < len(bn.Content); i += 2 {
			k := bn.Content[i]
			if _, dup := l.m.blockIdx[k.Value]; dup {
				return l.errf(k, "blocks", k.Value, "duplicate block name")
			}
			if !isIdent(k.Value) {
				return l.errf(k, "blocks", k.Value, "a block name must be an identifier")
			}
			b := &block{idx: len(l.m.blocks), name: k.Value, line: k.Line, variantSlot: -1}
			l.m.blocks = append(l.m.blocks, b)
			l.m.blockIdx[b.name] = b
			bnodes = append(bnodes, bn.Content[i+1])
		}
	}
	// Headers first (params, tensors, boundary), so calls can refer to
	// blocks defined later in the file; bodies second.
	bodies := make([]*yaml.Node, len(bnodes))
	for i, b := range l.m.blocks {
		if bodies[i], err = l.blockHeader(b, bnodes[i]); err != nil {
			return err
		}
	}
	prog, err := l.programHeader(f["program"])
	if err != nil {
		return err
	}
	for i, b := range l.m.blocks {
		if err := l.blockBody(b, bodies[i]); err != nil {
			return err
		}
	}
	if err := l.blockBody(l.m.program, prog); err != nil {
		return err
	}
	l.propagate()
	return l.formsSection(f["forms"])
}

func (l *loader) constants(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return l.errf(n, "constants", "", "want a mapping of name to integer")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !isIdent(k.Value) {
			return l.errf(k, "constants", k.Value, "a constant name must be an identifier")
		}
		if _, dup := l.m.consts[k.Value]; dup {
			return l.errf(k, "constants", k.Value, "duplicate constant")
		}
		x, err := l.constInt(v, "constants."+k.Value)
		if err != nil {
			return err
		}
		l.m.consts[k.Value] = x
	}
	return nil
}

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

func (l *loader) entry(n *yaml.Node) error {
	f, _, err := l.fields(n, "entry", "tensors", "scalars")
	if err != nil {
		return err
	}
	if f["tensors"] == nil {
		return l.errf(n, "entry.tensors", "", "missing")
	}
	items, err := l.seq(f["tensors"], "entry.tensors")
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, it := range items {
		tf, _, err := l.fields(it, "entry tensor", "name", "dtype", "shape", "role", "out", "value")
		if err != nil {
			return err
		}
		for _, k := range []string{"name", "dtype", "shape"} {
			if tf[k] == nil {
				return l.errf(it, "entry tensor."+k, "", "missing (an entry tensor needs name, dtype, shape)")
			}
		}
		e := entryTensor{line: it.Line, kind: stages.RootEntry}
		if e.name, err = l.str(tf["name"], "name"); err != nil {
			return err
		}
		if seen[e.name] || !isIdent(e.name) {
			return l.errf(tf["name"], "entry tensor name", e.name, "duplicate or not an identifier")
		}
		seen[e.name] = true
		if e.dtype, err = stages.ParseDType(tf["dtype"].Value); err != nil {
			return l.wrap(tf["dtype"], "dtype", tf["dtype"].Value, err)
		}
		if e.shape, err = l.shapeConst(tf["shape"], "shape"); err != nil {
			return err
		}
		if !shapeOK(e.shape, e.dtype) {
			return l.errf(tf["shape"], "shape", fmt.Sprint(e.shape), "%s bytes overflow int64", e.dtype)
		}
		if r := tf["role"]; r != nil {
			e.role = r.Value
		}
		if o := tf["out"]; o != nil {
			var b bool
			if err := o.Decode(&b); err != nil {
				return l.errf(o, "out", o.Value, "want true or false")
			}
			if b {
				e.kind = stages.RootEntryOutput
			}
		}
		if v := tf["value"]; v != nil {
			if e.value, err = l.constInt(v, "value"); err != nil {
				return err
			}
			e.hasValue = true
		}
		l.m.entry = append(l.m.entry, e)
		l.m.entryViews = append(l.m.entryViews, stages.NewView(stages.RootID(len(l.m.entryViews)), 0, e.dtype, e.shape...))
	}
	if s := f["scalars"]; s != nil {
		items, err := l.seq(s, "entry.scalars")
		if err != nil {
			return err
		}
		for _, it := range items {
			sf, _, err := l.fields(it, "entry scalar", "name", "value")
			if err != nil {
				return err
			}
			if sf["name"] == nil || sf["value"] == nil {
				return l.errf(it, "entry scalar", "", "want name and value")
			}
			nm := sf["name"].Value
			if _, dup := l.m.consts[nm]; dup || !isIdent(nm) {
				return l.errf(sf["name"], "entry scalar name", nm, "duplicate (a constant or entry scalar has this name) or not an identifier")
			}
			v, err := l.constInt(sf["value"], "value")
			if err != nil {
				return err
			}
			l.m.consts[nm] = v
		}
	}
	return nil
}

func (l *loader) kernelTable(n *yaml.Node) error {
	items, err := l.seq(n, "kernels")
	if err != nil {
		return err
	}
	for i, it := range items {
		kf, _, err := l.fields(it, "kernel", "id", "name", "core", "code", "sig", "intensity", "folded")
		if err != nil {
			return err
		}
		if kf["name"] == nil || kf["core"] == nil {
			return l.errf(it, "kernel", "", "want at least name and core")
		}
		k := stages.Kernel{Name: kf["name"].Value}
		if _, dup := l.m.kernelIdx[k.Name]; dup {
			return l.errf(kf["name"], "kernel name", k.Name, "duplicate kernel")
		}
		if id := kf["id"]; id != nil {
			v, err := l.constInt(id, "id")
			if err != nil {
				return err
			}
			if v != int64(i) {
				return l.errf(id, "kernel id", id.Value, "a kernel's id is its position in the table (want %d)", i)
			}
		}
		switch kf["core"].Value {
		case "aic":
			k.Core = stages.KindAIC
		case "aiv":
			k.Core = stages.KindAIV
		default:
			return l.errf(kf["core"], "core", kf["core"].Value, "unknown core type (want aic or aiv)")
		}
		k.Code = k.Name
		if c := kf["code"]; c != nil {
			k.Code = c.Value
		}
		if s := kf["sig"]; s != nil {
			for _, c := range s.Value {
				if c != 'i' && c != 'o' && c != 'x' {
					return l.errf(s, "sig", s.Value, "a signature is a string over i, o, x")
				}
			}
			k.Sig = s.Value
		}
		if fo := kf["folded"]; fo != nil {
			items, err := l.seq(fo, "folded")
			if err != nil {
				return err
			}
			for _, x := range items {
				v, err := l.constInt(x, "folded")
				if err != nil {
					return err
				}
				k.Folded = append(k.Folded, uint64(v))
			}
		}
		if in := kf["intensity"]; in != nil {
			v, err := strconv.ParseFloat(in.Value, 64)
			if err != nil || v < 0 {
				return l.errf(in, "intensity", in.Value, "want a non-negative number (operations per byte)")
			}
			k.Intensity = v
		}
		l.m.kernelIdx[k.Name] = stages.KernelID(i)
		l.m.kernels = append(l.m.kernels, k)
	}
	return nil
}

// ---- blocks

func (l *loader) blockHeader(b *block, n *yaml.Node) (*yaml.Node, error) {
	f, _, err := l.fields(n, "block "+b.name, "params", "variants", "tensors", "tasks", "boundary", "scalars", "body")
	if err != nil {
		return nil, err
	}
	if f["body"] == nil {
		return nil, l.errf(n, "blocks."+b.name+".body", "", "missing")
	}
	names := map[string]int{}
	dup := func(nd *yaml.Node, s string) error {
		if !isIdent(s) {
			return l.errf(nd, "blocks."+b.name, s, "a name must be an identifier")
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
	if p := f["params"]; p != nil {
		if b.params, err = l.strList(p, "params"); err != nil {
			return nil, err
		}
		for i, s := range b.params {
			if err := dup(p.Content[i], s); err != nil {
				return nil, err
			}
		}
	}
	b.envSize = len(b.params)
	if v := f["variants"]; v != nil {
		if b.variants, err = l.strList(v, "variants"); err != nil {
			return nil, err
		}
		if len(b.variants) < 2 {
			return nil, l.errf(v, "variants", "", "want at least two variant names")
		}
		for i, s := range b.variants {
			if err := dup(v.Content[i], s); err != nil {
				return nil, err
			}
		}
		b.variantSlot = b.envSize
		b.envSize++
	}
	if t := f["tensors"]; t != nil {
		if b.tensors, err = l.strList(t, "tensors"); err != nil {
			return nil, err
		}
		for i, s := range b.tensors {
			if err := dup(t.Content[i], s); err != nil {
				return nil, err
			}
		}
	}
	if t := f["tasks"]; t != nil {
		if b.taskParams, err = l.strList(t, "tasks"); err != nil {
			return nil, err
		}
		for i, s := range b.taskParams {
			if err := dup(t.Content[i], s); err != nil {
				return nil, err
			}
		}
	}
	// Boundary scalars take env slots after the params.
	b.scalarBase = b.envSize
	bres := l.boundaryRes(b)
	if s := f["scalars"]; s != nil {
		items, err := l.seq(s, "scalars")
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.Kind == yaml.ScalarNode {
				// A bare name passes the caller's value of that name.
				it = &yaml.Node{Kind: yaml.MappingNode, Line: it.Line, Column: it.Column, Content: []*yaml.Node{
					{Kind: yaml.ScalarNode, Value: "name", Line: it.Line}, {Kind: yaml.ScalarNode, Value: it.Value, Line: it.Line},
					{Kind: yaml.ScalarNode, Value: "value", Line: it.Line}, {Kind: yaml.ScalarNode, Value: it.Value, Line: it.Line}}}
			}
			sf, _, err := l.fields(it, "boundary scalar", "name", "value")
			if err != nil {
				return nil, err
			}
			if sf["name"] == nil || sf["value"] == nil {
				return nil, l.errf(it, "boundary scalar", "", "want name and value (or a bare name: the caller's value of that name)")
			}
			nm := sf["name"].Value
			for _, o := range b.scalars {
				if o.name == nm {
					return nil, l.errf(sf["name"], "boundary scalar", nm, "duplicate name")
				}
			}
			e, err := parseExpr(sf["value"].Value, bres)
			if err != nil {
				return nil, l.errf(sf["value"], "boundary scalar "+nm, sf["value"].Value, "bad expression: %v", err)
			}
			b.scalars = append(b.scalars, &bscalar{name: nm, value: e, line: it.Line})
		}
	}
	b.envSize += len(b.scalars)
	bn := f["boundary"]
	if bn != nil && bn.Kind == yaml.ScalarNode && bn.Value == "auto" {
		b.auto = true
		b.slotNames = append(b.slotNames, b.tensors...)
		b.fixedSlots = len(b.slotNames)
		if len(b.scalars) > 0 {
			return nil, l.errf(f["scalars"], "scalars", "", "an auto boundary takes its scalars from its calls; declare none")
		}
		return f["body"], nil
	}
	if bn == nil {
		return nil, l.errf(n, "blocks."+b.name+".boundary", "", "missing (a list of slots, or auto)")
	}
	items, err := l.seq(bn, "boundary")
	if err != nil {
		return nil, err
	}
	tused := map[string]bool{}
	for _, it := range items {
		sf, _, err := l.fields(it, "boundary slot", "name", "tag", "view", "dtype", "shape")
		if err != nil {
			return nil, err
		}
		if sf["name"] == nil || sf["tag"] == nil {
			return nil, l.errf(it, "boundary slot", "", "want name and tag")
		}
		s := &boundSlot{name: sf["name"].Value, line: it.Line}
		for _, o := range b.boundary {
			if o.name == s.name {
				return nil, l.errf(sf["name"], "boundary slot", s.name, "duplicate name (also at line %d)", o.line)
			}
		}
		if !isIdent(s.name) {
			return nil, l.errf(sf["name"], "boundary slot", s.name, "a slot name must be an identifier")
		}
		if s.tag, err = stages.ParseTag(sf["tag"].Value); err != nil || s.tag == stages.TagOutput {
			return nil, l.errf(sf["tag"], "tag", sf["tag"].Value, "unknown boundary tag (want in, inout, out_existing or no_dep)")
		}
		src := s.name
		vn := sf["view"]
		if vn != nil {
			src = vn.Value
		} else {
			vn = sf["name"]
		}
		sc := &scope{l: l, b: b, boundary: true}
		if s.view, err = sc.view(src, vn.Line); err != nil {
			return nil, l.errf(vn, "view", src, "%v", err)
		}
		if s.view.kind == baseTArg {
			tused[b.tensors[s.view.base]] = true
		}
		if d := sf["dtype"]; d != nil {
			if s.dtype, err = stages.ParseDType(d.Value); err != nil {
				return nil, l.wrap(d, "dtype", d.Value, err)
			}
		}
		if sh := sf["shape"]; sh != nil {
			if s.shape, err = l.shapeConst(sh, "shape"); err != nil {
				return nil, err
			}
		}
		b.boundary = append(b.boundary, s)
		b.slotNames = append(b.slotNames, s.name)
	}
	for i, t := range b.tensors {
		if !tused[t] {
			return nil, l.errf(f["tensors"].Content[i], "tensors", t, "tensor param is not used by any boundary slot")
		}
	}
	b.fixedSlots = len(b.slotNames)
	return f["body"], nil
}

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

func (l *loader) programHeader(n *yaml.Node) (*yaml.Node, error) {
	f, _, err := l.fields(n, "program", "params", "body")
	if err != nil {
		return nil, err
	}
	if f["body"] == nil {
		return nil, l.errf(n, "program.body", "", "missing")
	}
	p := &block{idx: -1, name: "program", line: n.Line, variantSlot: -1, isProgram: true}
	if pn := f["params"]; pn != nil {
		if pn.Kind != yaml.MappingNode {
			return nil, l.errf(pn, "program.params", "", "want a mapping of name to default value")
		}
		for i := 0; i+1 < len(pn.Content); i += 2 {
			k := pn.Content[i]
			if contains(p.params, k.Value) || !isIdent(k.Value) {
				return nil, l.errf(k, "program.params", k.Value, "duplicate or not an identifier")
			}
			v, err := l.constInt(pn.Content[i+1], "program.params."+k.Value)
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
	return f["body"], nil
}

func (l *loader) blockBody(b *block, n *yaml.Node) error {
	b.structural = make([]int, 64)
	sc := &scope{l: l, b: b, vals: map[string]int{}, labelDef: map[string]bool{}, allIDs: map[string]bool{}}
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
	if b.auto {
		for _, o := range b.body {
			if o.kind == opCall && o.cond != nil {
				return l.errf(n, "body", "", "an auto boundary needs unconditional calls at the top of the body (line %d)", o.line)
			}
		}
	}
	return nil
}

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

// ---- forms

func (l *loader) formsSection(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return l.errf(n, "forms", "", "want a mapping of form name to form")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, dup := l.m.formIdx[k.Value]; dup {
			return l.errf(k, "forms", k.Value, "duplicate form name")
		}
		fm := &form{name: k.Value, line: k.Line, params: append([]int64(nil), l.m.progDef...), graphs: make([]*graphSpec, len(l.m.blocks))}
		ff, _, err := l.fields(v, "form "+fm.name, "params", "graphs")
		if err != nil {
			return err
		}
		if pn := ff["params"]; pn != nil {
			if pn.Kind != yaml.MappingNode {
				return l.errf(pn, "params", "", "want a mapping of program param to value")
			}
			for j := 0; j+1 < len(pn.Content); j += 2 {
				pk := pn.Content[j]
				idx := -1
				for x, p := range l.m.progParam {
					if p == pk.Value {
						idx = x
					}
				}
				if idx < 0 {
					return l.errf(pk, "forms."+fm.name+".params", pk.Value, "undefined parameter (want one of the program params: %s)", strings.Join(l.m.progParam, ", "))
				}
				if fm.params[idx], err = l.constInt(pn.Content[j+1], pk.Value); err != nil {
					return err
				}
			}
		}
		if gn := ff["graphs"]; gn != nil {
			if gn.Kind != yaml.MappingNode {
				return l.errf(gn, "graphs", "", "want a mapping of block name to {key, config}")
			}
			for j := 0; j+1 < len(gn.Content); j += 2 {
				bk := gn.Content[j]
				b := l.m.blockIdx[bk.Value]
				if b == nil {
					return l.errf(bk, "forms."+fm.name+".graphs", bk.Value, "unknown block (want one of %s)", strings.Join(l.m.Blocks(), ", "))
				}
				if fm.graphs[b.idx] != nil {
					return l.errf(bk, "forms."+fm.name+".graphs", bk.Value, "duplicate block")
				}
				g, err := l.graphSpec(b, gn.Content[j+1])
				if err != nil {
					return err
				}
				fm.graphs[b.idx] = g
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

func (l *loader) graphSpec(b *block, n *yaml.Node) (*graphSpec, error) {
	f, _, err := l.fields(n, "graph", "key", "config")
	if err != nil {
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
	if k := f["key"]; k != nil {
		g.key = k.Value
		s := k.Value
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
			g.parts = append(g.parts, keyPart{slot: slot})
			g.inKey |= 1 << uint(slot)
			s = s[i+j+1:]
		}
	} else {
		g.parts = []keyPart{{lit: b.name, slot: -1}}
	}
	if c := f["config"]; c != nil {
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
	return g, nil
}

// GraphChecks runs the static Graph checks of every form (and marks the
// Graph specs that pass them complete, see GraphCall.KeyComplete): a Graph body whose
// structure depends on a param outside its key (*StructureError), and a
// scalar computed from a boundary scalar (*BakedScalarError). The errors are
// typed so that the runtime can treat them as errors or warnings.
func (m *Model) GraphChecks() []error {
	var out []error
	for _, f := range m.forms {
		for _, g := range f.graphs {
			if g == nil {
				continue
			}
			b := g.block
			g.complete = true
			var slots []int
			for s, line := range b.structural {
				if line > 0 && g.inKey&(1<<uint(s)) == 0 {
					slots = append(slots, s)
				}
			}
			sort.Ints(slots)
			if len(slots) > 0 || len(b.baked) > 0 {
				g.complete = false
			}
			for _, s := range slots {
				out = append(out, &StructureError{File: m.file, Line: b.structural[s], Form: f.name, Block: b.name, Param: b.slotName(s)})
			}
			for _, u := range b.baked {
				out = append(out, &BakedScalarError{File: m.file, Line: u.line, Form: f.name, Block: b.name, Scalar: u.scalar, Expr: u.expr})
			}
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
