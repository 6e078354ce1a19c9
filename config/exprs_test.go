package config

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

var (
	exprType = reflect.TypeOf((*expr)(nil))
	viewType = reflect.TypeOf((*viewExpr)(nil))
	opType   = reflect.TypeOf((*op)(nil))
	blockTyp = reflect.TypeOf((*block)(nil))
)

// opLeaves collects every expression and view an op holds, by reflection
// over its fields (not its body's ops, not a callee block, not a call
// site's templates), keyed by pointer, with each one's field path.
func opLeaves(v reflect.Value, path string, out map[uintptr]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		switch v.Type() {
		case exprType, viewType:
			out[v.Pointer()] = path
			return
		case blockTyp:
			return
		}
		opLeaves(v.Elem(), path, out)
	case reflect.Struct:
		if v.Type().PkgPath() != "github.com/hbg-dev/hbg/config" {
			return // stages' values, atomic.Pointer: no expression of ours
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if v.Type() == opType.Elem() && f.Name == "body" {
				continue
			}
			opLeaves(v.Field(i), path+"."+f.Name, out)
		}
	case reflect.Slice, reflect.Array:
		if v.Type() == reflect.TypeOf([]*op(nil)) {
			return
		}
		for i := 0; i < v.Len(); i++ {
			opLeaves(v.Index(i), path+"[]", out)
		}
	}
}

// testModels is every model config of the repository that loads.
func testModels(t *testing.T) []*Model {
	var paths []string
	for _, g := range []string{"models/*.yaml", "testdata/*/*.yaml", "../tests/testdata/*/*.yaml", "../analyze/testdata/*.yaml"} {
		ps, _ := filepath.Glob(g)
		paths = append(paths, ps...)
	}
	var out []*Model
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(p, data)
		if err != nil && filepath.Base(filepath.Dir(p)) == "exprs" {
			t.Fatal(err)
		}
		if err == nil {
			out = append(out, m)
		}
	}
	if len(out) < 10 {
		t.Fatalf("%d models load, want the repository's", len(out))
	}
	return out
}

// TestOpExprsComplete: op.exprs lists every expression and view an op
// holds, so that the walks that read it (bodyVaries, ...) cannot miss a
// field; and every field path that holds one is held by some op of the
// repository's models, so that a new field is seen here by its first
// model. A field added to an op (or an item of one) and not to exprs fails
// the first part.
func TestOpExprsComplete(t *testing.T) {
	seen := map[string]bool{}
	var walk func(m *Model, ops []*op)
	walk = func(m *Model, ops []*op) {
		for _, o := range ops {
			held := map[uintptr]string{}
			opLeaves(reflect.ValueOf(o), "op", held)
			listed := map[uintptr]bool{}
			o.exprs(func(x opExpr) bool {
				if x.e != nil {
					listed[reflect.ValueOf(x.e).Pointer()] = true
				} else {
					listed[reflect.ValueOf(x.v).Pointer()] = true
				}
				return true
			})
			for p, path := range held {
				seen[path] = true
				if !listed[p] {
					t.Errorf("%s:%d: %s holds an expression op.exprs does not list", m.file, o.line, path)
				}
			}
			for p := range listed {
				if _, ok := held[p]; !ok {
					t.Errorf("%s:%d: op.exprs lists an expression the op does not hold", m.file, o.line)
				}
			}
			walk(m, o.body)
		}
	}
	for _, m := range testModels(t) {
		walk(m, m.program.body)
		for _, b := range m.blocks {
			walk(m, b.body)
		}
	}
	var paths []string
	exprPaths(opType.Elem(), "op", map[reflect.Type]bool{}, &paths)
	sort.Strings(paths)
	for _, p := range paths {
		if !seen[p] {
			t.Errorf("no model holds an expression at %s (add one to testdata/exprs/cover.yaml)", p)
		}
	}
}

// exprPaths lists the field paths of t that hold an expression or a view.
func exprPaths(t reflect.Type, path string, on map[reflect.Type]bool, out *[]string) {
	switch t.Kind() {
	case reflect.Pointer:
		switch t {
		case exprType, viewType:
			*out = append(*out, path)
			return
		case blockTyp, opType:
			return
		}
		exprPaths(t.Elem(), path, on, out)
	case reflect.Struct:
		if t.PkgPath() != "github.com/hbg-dev/hbg/config" || on[t] {
			return
		}
		on[t] = true
		defer delete(on, t)
		for i := 0; i < t.NumField(); i++ {
			exprPaths(t.Field(i).Type, path+"."+t.Field(i).Name, on, out)
		}
	case reflect.Slice, reflect.Array:
		exprPaths(t.Elem(), path+"[]", on, out)
	}
}
