package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

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
		return nil, malformed(name, data, err)
	}
	// A document of only "---" (or ~) is a null root: empty too, which
	// says more than plainTree's null would.
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
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
		return nil, malformed(name, data, err)
	}
	if err := plainTree(name, doc.Content[0], "model config"); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	l := &loader{file: name, constLine: map[string]int{}, m: &Model{file: name, contentHash: hex.EncodeToString(sum[:8]), consts: map[string]int64{}, kernelIdx: map[string]stages.KernelID{}, blockIdx: map[string]*block{}, formIdx: map[string]*form{}}}
	if err := l.model(doc.Content[0]); err != nil {
		return nil, err
	}
	l.m.GraphChecks() // marks the Graph specs that pass as complete
	return l.m, nil
}

// plainTree rejects YAML anchors and aliases: the loader reads the node
// tree, where an alias is a reference the schema does not expect (it used to
// surface as "want a list"), and a model's repetition is said with loops,
// blocks and let, which the checks understand. It also rejects nulls and
// tags the loader would misread (plainNode).
func plainTree(file string, n *yaml.Node, key string) error {
	if n.Kind == yaml.AliasNode {
		return &Error{File: file, Line: n.Line, Key: key, Value: "*" + n.Value, Msg: "YAML aliases are not supported (write the value out, or use a block, a loop or let)"}
	}
	if n.Anchor != "" {
		return &Error{File: file, Line: n.Line, Key: key, Value: "&" + n.Anchor, Msg: "YAML anchors are not supported (write the value out, or use a block, a loop or let)"}
	}
	if err := plainNode(file, n, key); err != nil {
		return err
	}
	for i, c := range n.Content {
		k := key
		if n.Kind == yaml.MappingNode && i%2 == 1 {
			k = n.Content[i-1].Value
		}
		if err := plainTree(file, c, k); err != nil {
			return err
		}
	}
	return nil
}

// plainNode rejects a node whose text the loader would take for something
// it is not. The loader reads a scalar's text (n.Value) and ignores its
// tag: a null (~, null, or nothing after the colon) read as the text "~"
// or "" (model: ~ named the model "~"), and a tag was dropped unread
// (to: !custom 3 was 3). So a null is an error wherever it stands, and an
// explicit tag is one unless it is a standard tag that agrees with how the
// loader reads the text: !!str, !!int on a decimal integer, !!bool on true
// or false, !!map on a mapping and !!seq on a list.
func plainNode(file string, n *yaml.Node, key string) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return &Error{File: file, Line: n.Line, Key: key, Value: n.Value, Msg: "a YAML null where a value is expected (write the value; {} or [] for an empty mapping or list)"}
	}
	if n.Style&yaml.TaggedStyle == 0 {
		return nil
	}
	ok := false
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			ok = true
		case "!!int":
			_, err := strconv.ParseInt(n.Value, 10, 64)
			ok = err == nil
		case "!!bool":
			ok = n.Value == "true" || n.Value == "false"
		}
	case yaml.MappingNode:
		ok = n.Tag == "!!map"
	case yaml.SequenceNode:
		ok = n.Tag == "!!seq"
	}
	if ok {
		return nil
	}
	return &Error{File: file, Line: n.Line, Key: key, Value: n.Tag + " " + shorten(nodeText(n)), Msg: "unsupported YAML tag (the loader reads untagged text; the standard tags !!str, !!int on a decimal integer, !!bool on true or false, !!map and !!seq are taken where they agree with it)"}
}

// malformed is the error for a document yaml.v3 cannot parse, at the line
// of the mistake. yaml.v3 reports a parser error at its context mark, the
// start of the construct it was parsing ("did not find expected key" at the
// line of the enclosing block mapping): a list item indented one space too
// few at line 21 was reported at line 12, where its block began. The line of
// the mistake is the first line at which a prefix of the document fails
// with the same complaint (a prefix of valid YAML parses, unless it cuts a
// construct that spans lines, whose complaint is another one).
func malformed(name string, data []byte, err error) *Error {
	ctx := yamlErrLine(err)
	msg := yamlErrMsg(err)
	line := problemLine(data, ctx, msg)
	text := "malformed YAML: " + msg
	if line != ctx {
		text += fmt.Sprintf(" (in the construct that starts at line %d)", ctx)
	}
	return &Error{File: name, Line: line, Msg: text, Err: err}
}

// maxProblemScan bounds the prefixes problemLine parses (each is a parse of
// up to the whole file, on the error path only).
const maxProblemScan = 4096

// problemLine is the first line from ctx on at which the document's prefix
// fails with msg; ctx when none does within maxProblemScan lines.
func problemLine(data []byte, ctx int, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	for k := max(ctx, 1); k <= len(lines) && k < ctx+maxProblemScan; k++ {
		var n yaml.Node
		err := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
		if err != nil && yamlErrMsg(err) == msg {
			return k
		}
	}
	return ctx
}

// yamlErrMsg is a yaml.v3 error without its "yaml: line N: " prefix.
func yamlErrMsg(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.HasPrefix(s, "line ") {
		if _, rest, ok := strings.Cut(s, ": "); ok {
			return rest
		}
	}
	return s
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
	// constLine is the line that defined each constant or entry scalar.
	constLine map[string]int
	// touchAt is the first op that declared each hinted kernel's touch.
	touchAt map[stages.KernelID]*touchSite
}

type callSite struct {
	caller *block
	c      *callOp
}

// modelDoc is the document: a model file's top-level keys.
type modelDoc struct {
	Model     *yaml.Node `yaml:"model"`
	Source    *yaml.Node `yaml:"source"`
	MaxTasks  *yaml.Node `yaml:"max_tasks"`
	MaxEdges  *yaml.Node `yaml:"max_edges"`
	Constants *yaml.Node `yaml:"constants"`
	Entry     *yaml.Node `yaml:"entry"`
	Kernels   *yaml.Node `yaml:"kernels"`
	Races     *yaml.Node `yaml:"races"`
	Blocks    *yaml.Node `yaml:"blocks"`
	Program   *yaml.Node `yaml:"program"`
	Forms     *yaml.Node `yaml:"forms"`
	Steps     *yaml.Node `yaml:"steps"`
}

func (l *loader) model(n *yaml.Node) error {
	var d modelDoc
	if err := l.decode(n, "model config", &d); err != nil {
		return err
	}
	if k := absent(&d, "model", "entry", "kernels", "program", "forms"); k != "" {
		return l.errf(n, k, "", "missing (a model needs model, entry, kernels, program and forms)")
	}
	var err error
	if l.m.Name, err = l.str(d.Model, "model"); err != nil {
		return err
	}
	if !printableName(l.m.Name) {
		// The name heads reports, names store entries and spans.
		return l.errf(d.Model, "model", l.m.Name, "want a name of 1 to %d printable characters (no newline, tab or other control character)", maxNameLen)
	}
	if src := d.Source; src != nil {
		if err := l.source(src); err != nil {
			return err
		}
	}
	if c := d.Constants; c != nil {
		if err := l.constants(c); err != nil {
			return err
		}
	}
	if mt := d.MaxTasks; mt != nil {
		if l.m.maxTasks, err = l.constInt(mt, "max_tasks"); err != nil {
			return err
		}
		if l.m.maxTasks <= 0 {
			return l.errf(mt, "max_tasks", mt.Value, "want a positive number of tasks per pass")
		}
	}
	if me := d.MaxEdges; me != nil {
		if l.m.maxEdges, err = l.constInt(me, "max_edges"); err != nil {
			return err
		}
		if l.m.maxEdges <= 0 {
			return l.errf(me, "max_edges", me.Value, "want a positive number of dependency edges per pass")
		}
	}
	if err := l.entry(d.Entry); err != nil {
		return err
	}
	if err := l.kernelTable(d.Kernels); err != nil {
		return err
	}
	if r := d.Races; r != nil {
		if err := l.declaredRaces(r); err != nil {
			return err
		}
	}
	var bnodes []*yaml.Node
	if bn := d.Blocks; bn != nil {
		blocks, err := l.entries(bn, "blocks", "want a mapping of block name to block")
		if err != nil {
			return err
		}
		for _, kv := range blocks {
			k := kv.key
			if o, dup := l.m.blockIdx[k.Value]; dup {
				return l.errf(k, "blocks", k.Value, "duplicate block name (also at line %d)", o.line)
			}
			if !isIdent(k.Value) {
				return l.errf(k, "blocks", k.Value, "a block name must be an identifier: %s", identRule)
			}
			b := &block{idx: len(l.m.blocks), name: k.Value, line: k.Line, variantSlot: -1}
			l.m.blocks = append(l.m.blocks, b)
			l.m.blockIdx[b.name] = b
			bnodes = append(bnodes, kv.value)
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
	prog, err := l.programHeader(d.Program)
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
	if st := d.Steps; st != nil {
		if err := l.stepsSection(st); err != nil {
			return err
		}
	}
	return l.formsSection(d.Forms)
}

// sourceDoc is the source key: the upstream program a model was written
// from. It is provenance for readers and tools; nothing runs from it.
type sourceDoc struct {
	Repo   *yaml.Node `yaml:"repo"`
	Commit *yaml.Node `yaml:"commit"`
	Path   *yaml.Node `yaml:"path"`
}

// maxSourcePath bounds source.path (upstream's deepest example is about 120
// bytes).
const maxSourcePath = 512

func (l *loader) source(n *yaml.Node) error {
	var d sourceDoc
	if err := l.decode(n, "source", &d); err != nil {
		return err
	}
	if k := absent(&d, "repo", "commit"); k != "" {
		return l.errf(n, "source."+k, "", "missing (a source names repo: OWNER/NAME and commit: HEX, path: optional)")
	}
	repo, err := l.str(d.Repo, "source.repo")
	if err != nil {
		return err
	}
	if o, nm, ok := strings.Cut(repo, "/"); !ok || o == "" || nm == "" || strings.ContainsAny(nm, "/ \t") || !printableName(repo) {
		return l.errf(d.Repo, "source.repo", repo, "want OWNER/NAME (a GitHub repository)")
	}
	c, err := l.str(d.Commit, "source.commit")
	if err != nil {
		return err
	}
	if len(c) < 7 || len(c) > 40 || strings.Trim(c, "0123456789abcdef") != "" {
		return l.errf(d.Commit, "source.commit", c, "want a commit hash: 7 to 40 lowercase hex digits")
	}
	if p := d.Path; p != nil {
		ps, err := l.str(p, "source.path")
		if err != nil {
			return err
		}
		if !printableUpTo(ps, maxSourcePath) {
			return l.errf(p, "source.path", ps, "want a path of 1 to %d printable characters", maxSourcePath)
		}
	}
	return nil
}

// maxNameLen bounds a model's name.
const maxNameLen = 128

func printableName(s string) bool { return printableUpTo(s, maxNameLen) }

// printableUpTo reports whether s is 1 to n bytes of printable UTF-8.
func printableUpTo(s string, n int) bool {
	if s == "" || len(s) > n || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
