package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra/doc"
)

var updateCLIDocs = flag.Bool("update-cli-docs", false, "rewrite docs/cli/*.md from the commands (go generate ./cmd/hbgrun)")

// cliDocs is where the CLI reference lives, from this package's directory.
const cliDocs = "../../docs/cli"

// TestCLIDocs: docs/cli/ is the CLI reference cobra generates from the
// commands themselves (their Use, Short, Long and flags), so it cannot say
// what a command no longer does. A command or flag changed without `go
// generate ./cmd/hbgrun` fails here, naming the page.
func TestCLIDocs(t *testing.T) {
	dir := t.TempDir()
	root := newRoot()
	root.DisableAutoGenTag = true // no date line: the pages are compared byte for byte
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *updateCLIDocs {
		if err := os.RemoveAll(cliDocs); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(cliDocs, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, e := range got {
		names = append(names, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(cliDocs, e.Name())
		if *updateCLIDocs {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		have, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("docs/cli/%s: %v (run go generate ./cmd/hbgrun)", e.Name(), err)
			continue
		}
		if string(have) != string(b) {
			t.Errorf("docs/cli/%s is not what the commands say (run go generate ./cmd/hbgrun)", e.Name())
		}
	}
	have, _ := filepath.Glob(filepath.Join(cliDocs, "*.md"))
	for _, p := range have {
		if !slices.Contains(names, filepath.Base(p)) {
			t.Errorf("docs/cli/%s is no command's page (run go generate ./cmd/hbgrun)", filepath.Base(p))
		}
	}
}
