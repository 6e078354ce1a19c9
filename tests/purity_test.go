package tests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pureTrees are the folders whose packages are pure stages (ARCHITECTURE
// §3): plain functions over plain data, so they can be tested, replayed and
// reasoned about without an actor system, a clock or a scheduler. Every
// package under them, present or future, is held to the rule.
var pureTrees = []string{"stages", "npu", "analyze", "golden"}

// impureImports are what a pure stage must not import: actors and telemetry
// belong to the shells, and time, sync and context mean the stage waits,
// locks or races, which only an actor may do. An entry ending in "/" forbids
// the whole module tree.
var impureImports = []string{
	"time", "sync", "sync/atomic", "context",
	"github.com/asynkron/", "go.opentelemetry.io/",
}

// purityBreaches lists, for every non-test Go file under dir, each import
// the rule forbids and each go statement, as "file:line:col: what" with the
// file relative to dir.
func purityBreaches(dir string) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// A testdata folder is not a package of the tree (its fixture
			// breaks the rule on purpose), unless it is the tree itself.
			if path != dir && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		at := func(p token.Pos) string {
			pos := fset.Position(p)
			return fmt.Sprintf("%s:%d:%d", filepath.ToSlash(rel), pos.Line, pos.Column)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if forbidden(p) {
				out = append(out, fmt.Sprintf("%s: imports %q", at(imp.Pos()), p))
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				out = append(out, fmt.Sprintf("%s: starts a goroutine", at(g.Pos())))
			}
			return true
		})
		return nil
	})
	return out, err
}

func forbidden(path string) bool {
	for _, f := range impureImports {
		if path == f || strings.HasSuffix(f, "/") && strings.HasPrefix(path, f) {
			return true
		}
	}
	return false
}

// TestPurity holds the pure trees (stages/, npu/, analyze/, golden/) to the
// rule: no actors, telemetry, clock, locks or goroutines.
func TestPurity(t *testing.T) {
	for _, tree := range pureTrees {
		breaches, err := purityBreaches(filepath.Join("..", tree))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range breaches {
			t.Errorf("%s is a pure tree, but %s", tree, b)
		}
	}
}

// closureAllowed are module packages a pure tree may reach although they
// break the rule, each with why; the closure check does not look past them.
// Keep it short: an entry is a known breach, not a rule.
var closureAllowed = map[string]string{
	// analyze maps a model's structure, which is config's to parse and
	// interpret; config keeps a sync.Pool of runners, a mutex over its sizer
	// cache and an atomic template cache (and go.yaml.in/yaml/v3, below
	// it, imports time and sync to parse timestamps). analyze calls none of
	// them concurrently, but the rule cannot see that: config's interpreter
	// refactor (issue 35 item 1) is where this entry should go.
	"github.com/hbg-dev/hbg/config": "analyze reads models through config",
}

// closureBreaches checks every package patterns name (from dir) over its
// whole import closure (go list -deps), not only its own imports: each
// non-standard package it reaches must not be a forbidden one, import a
// forbidden one or start a goroutine. So a pure stage cannot reach the
// clock through trace, say. Standard packages are not looked into (fmt
// reaches sync and time, and is no actor); closureAllowed are not looked
// past. Each breach names the chain from the pure package.
func closureBreaches(dir string, patterns ...string) ([]string, error) {
	pkgs, roots, err := goList(dir, patterns...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, root := range roots {
		via := map[string]string{root: ""}
		chain := func(p string) string {
			var c []string
			for ; p != ""; p = via[p] {
				c = append(c, p)
			}
			slices.Reverse(c)
			return strings.Join(c, " -> ")
		}
		queue := []string{root}
		for len(queue) > 0 {
			p := pkgs[queue[0]]
			queue = queue[1:]
			if p.ImportPath != root {
				if forbidden(p.ImportPath) {
					out = append(out, fmt.Sprintf("%s reaches a forbidden package", chain(p.ImportPath)))
					continue
				}
				breaches, err := fileBreaches(p)
				if err != nil {
					return nil, err
				}
				for _, b := range breaches {
					out = append(out, fmt.Sprintf("%s: %s", chain(p.ImportPath), b))
				}
			}
			for _, imp := range p.Imports {
				q, ok := pkgs[imp]
				if _, seen := via[imp]; seen || !ok || q.Standard || closureAllowed[imp] != "" {
					continue
				}
				via[imp] = p.ImportPath
				queue = append(queue, imp)
			}
		}
	}
	return out, nil
}

// fileBreaches is the rule over one listed package's own files.
func fileBreaches(p *listedPackage) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, imp := range f.Imports {
			if q, _ := strconv.Unquote(imp.Path.Value); forbidden(q) {
				out = append(out, fmt.Sprintf("%s imports %q", name, q))
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				out = append(out, fmt.Sprintf("%s:%d starts a goroutine", name, fset.Position(g.Pos()).Line))
			}
			return true
		})
	}
	return out, nil
}

// TestPurityClosure holds every package of the pure trees to the rule over
// its whole import closure.
func TestPurityClosure(t *testing.T) {
	var patterns []string
	for _, tree := range pureTrees {
		patterns = append(patterns, "./"+tree+"/...")
	}
	breaches, err := closureBreaches("..", patterns...)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range breaches {
		t.Errorf("a pure package reaches an impure one: %s", b)
	}
}

// TestPurityClosureCatches checks the closure rule against a fixture that
// imports nothing forbidden itself and reads the clock through a package
// of its own: the direct rule passes it, the closure rule must not.
func TestPurityClosureCatches(t *testing.T) {
	fixture := filepath.Join("testdata", "purity", "indirect", "pure")
	if direct, err := purityBreaches(fixture); err != nil || len(direct) != 0 {
		t.Fatalf("the fixture should pass the direct rule: %v %v", direct, err)
	}
	got, err := closureBreaches(".", "./"+filepath.ToSlash(fixture))
	if err != nil {
		t.Fatal(err)
	}
	const m = "github.com/hbg-dev/hbg/tests/testdata/purity/indirect/"
	want := []string{m + "pure -> " + m + `clock: clock.go imports "time"`}
	if !slices.Equal(got, want) {
		t.Fatalf("the closure rule found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPurityRuleCatches checks the rule against a fixture package that
// breaks it in every way, so TestPurity cannot pass by checking nothing.
func TestPurityRuleCatches(t *testing.T) {
	got, err := purityBreaches(filepath.Join("testdata", "purity", "impure"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`impure.go:6:2: imports "sync"`,
		`impure.go:7:2: imports "time"`,
		`impure.go:9:2: imports "github.com/asynkron/protoactor-go/actor"`,
		`impure.go:10:2: imports "go.opentelemetry.io/otel"`,
		`impure.go:16:2: starts a goroutine`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the rule found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
