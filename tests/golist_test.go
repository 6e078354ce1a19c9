package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

// listedPackage is what the tests read of `go list -json`.
type listedPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	DepOnly    bool
	GoFiles    []string
	Imports    []string
	Error      *struct{ Err string }
}

// goList runs `go list -deps -json` on patterns from dir: the packages
// they name and every package they import, transitively, each once (the
// build's own closure, not test files').
func goList(dir string, patterns ...string) (map[string]*listedPackage, []string, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json"}, patterns...)...)
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	pkgs := map[string]*listedPackage{}
	var roots []string
	dec := json.NewDecoder(out)
	for {
		p := new(listedPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			cmd.Wait()
			return nil, nil, err
		}
		if p.Error != nil {
			cmd.Wait()
			return nil, nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = p
		if !p.DepOnly {
			roots = append(roots, p.ImportPath)
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, nil, fmt.Errorf("go list %v: %w: %s", patterns, err, stderr.b)
	}
	return pkgs, roots, nil
}

// limitedBuffer keeps the first few kilobytes of go list's stderr.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 8192 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
