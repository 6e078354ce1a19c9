package config_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestConformanceTable: every row of CONFORMANCE.md names a test function
// that exists in this repository (the suite running them checks they pass),
// and every unsupported row says why.
func TestConformanceTable(t *testing.T) {
	b, err := os.ReadFile("CONFORMANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	fn := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err = filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range fn.FindAllStringSubmatch(string(src), -1) {
				defined[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| upstream call |") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Errorf("line %d: %d cells, want 4 (call, YAML, test, why not): %s", i+1, len(cells), line)
			continue
		}
		rows++
		call, yaml, test, why := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])
		if !defined[test] {
			t.Errorf("line %d (%s): test %q is not a test function of this repository", i+1, call, test)
		}
		if yaml == "" && why == "" {
			t.Errorf("line %d (%s): no YAML and no reason", i+1, call)
		}
	}
	if rows < 50 {
		t.Errorf("%d rows, want the whole API (at least 50)", rows)
	}
}
