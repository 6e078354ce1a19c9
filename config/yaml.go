package config

import (
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// errf is a *Error at n (line 1 without a node).
func (l *loader) errf(n *yaml.Node, key, value, format string, a ...any) error {
	line := 1
	if n != nil {
		line = n.Line
	}
	return &Error{File: l.file, Line: line, Key: key, Value: value, Msg: fmt.Sprintf(format, a...)}
}

// wrap is err at n, unless it is a *Error already (which knows its place).
func (l *loader) wrap(n *yaml.Node, key, value string, err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	return &Error{File: l.file, Line: n.Line, Key: key, Value: value, Msg: err.Error(), Err: err}
}

// keyValues returns a mapping's entries in file order, rejecting duplicate
// keys and, when allowed is given, keys it does not list.
func (l *loader) keyValues(n *yaml.Node, what string, allowed ...string) ([]keyValue, error) {
	if n.Kind != yaml.MappingNode {
		return nil, l.errf(n, what, n.Value, "want a mapping")
	}
	out := make([]keyValue, 0, len(n.Content)/2)
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			return nil, l.errf(k, what, k.Value, "unknown key (want one of %s)", strings.Join(allowed, ", "))
		}
		if seen[k.Value] {
			return nil, l.errf(k, what, k.Value, "duplicate key")
		}
		seen[k.Value] = true
		out = append(out, keyValue{k, n.Content[i+1]})
	}
	return out, nil
}

// fields returns a mapping's values by key, as keyValues checks them: for
// mappings whose keys are not fixed (an op's, whose variants are keys too).
func (l *loader) fields(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	kvs, err := l.keyValues(n, what, allowed...)
	if err != nil {
		return nil, err
	}
	return byKey(kvs), nil
}

// byKey maps entries' keys to their values.
func byKey(kvs []keyValue) map[string]*yaml.Node {
	out := make(map[string]*yaml.Node, len(kvs))
	for _, kv := range kvs {
		out[kv.key.Value] = kv.value
	}
	return out
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
	e, err := parseExprT(n.Value, l.constRes, l.entryTables)
	if err != nil {
		return 0, l.errf(n, key, n.Value, "bad integer expression: %v", err)
	}
	return e.val, nil
}

func (l *loader) constRes(name string) (int64, int, int, bool) {
	v, ok := l.m.consts[name]
	return v, -1, -1, ok
}

// identRule says what isIdent takes, for messages: a name that is not one
// (ä, 1x) is told what it must be.
const identRule = "an ASCII letter or _, then ASCII letters, digits or _"

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

func nodeText(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	var b strings.Builder
	for _, c := range n.Content {
		b.WriteString(nodeText(c))
		b.WriteByte(' ')
	}
	return b.String()
}

// decode reads the mapping n into doc, a pointer to a struct whose fields
// are *yaml.Node, each tagged with its key (`yaml:"name"`): the nodes keep
// their positions for messages. A key the struct does not name, or one
// given twice, is an error naming it (what says whose key it is, and the
// struct's field order is the order the message lists the keys in); a field
// whose key is absent stays nil.
func (l *loader) decode(n *yaml.Node, what string, doc any) error {
	v := reflect.ValueOf(doc).Elem()
	keys := docKeys(v.Type())
	kvs, err := l.keyValues(n, what, keys...)
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		v.Field(slices.Index(keys, kv.key.Value)).Set(reflect.ValueOf(kv.value))
	}
	return nil
}

// docKeys lists a decode struct's keys, in field order.
func docKeys(t reflect.Type) []string {
	keys := make([]string, t.NumField())
	for i := range keys {
		f := t.Field(i)
		if f.Type != reflect.TypeFor[*yaml.Node]() || f.Tag.Get("yaml") == "" {
			panic(fmt.Sprintf("config: decode struct %s: field %s is not a tagged *yaml.Node", t, f.Name))
		}
		keys[i] = f.Tag.Get("yaml")
	}
	return keys
}

// keyValue is one entry of a mapping from names to values.
type keyValue struct{ key, value *yaml.Node }

// entries returns the entries of a mapping from names to values (constants,
// blocks, forms...), in file order; want says what the mapping maps when
// n is not one.
func (l *loader) entries(n *yaml.Node, key, want string) ([]keyValue, error) {
	if n.Kind != yaml.MappingNode {
		return nil, l.errf(n, key, "", "%s", want)
	}
	out := make([]keyValue, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, keyValue{n.Content[i], n.Content[i+1]})
	}
	return out, nil
}

// absent returns the first of keys that the decoded doc lacks, or "".
func absent(doc any, keys ...string) string {
	v := reflect.ValueOf(doc).Elem()
	all := docKeys(v.Type())
	for _, k := range keys {
		if v.Field(slices.Index(all, k)).IsNil() {
			return k
		}
	}
	return ""
}

// item is one entry of a list of mappings, decoded: the i-th, at node.
type item[T any] struct {
	i    int
	node *yaml.Node
	doc  T
}

// decodeEach decodes the list n (key) of mappings, each what, into T (see
// decode) one item at a time, so that what the caller finds wrong with an
// item is reported before a later item's decode error. An item without one
// of the required keys is an error at the item saying want. An error is
// yielded and ends the list.
func decodeEach[T any](l *loader, n *yaml.Node, key, what, want string, required ...string) iter.Seq2[*item[T], error] {
	return func(yield func(*item[T], error) bool) {
		nodes, err := l.seq(n, key)
		if err != nil {
			yield(nil, err)
			return
		}
		for i, nd := range nodes {
			it := &item[T]{i: i, node: nd}
			if err := l.decode(nd, what, &it.doc); err != nil {
				yield(nil, err)
				return
			}
			if absent(&it.doc, required...) != "" {
				yield(nil, l.errf(nd, what, "", "%s", want))
				return
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}
