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
