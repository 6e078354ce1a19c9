package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// TestDescribeDSv4Images: run --images writes the run image of every pass
// and every Definition those images replay, each of which decodes and
// describe prints; describe refuses a file that is no image (exit 2) and a
// cut-short image (exit 1).
func TestDescribeDSv4Images(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "run", dsv4, "--form", "full", "--rounds", "2", "--skip-device", "--images", dir)
	if code != 0 {
		t.Fatalf("run --images: exit %d: %s", code, stderr)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "*.run"))
	defs, _ := filepath.Glob(filepath.Join(dir, "*.def"))
	if len(runs) != 2 {
		t.Fatalf("run --images --rounds 2 wrote run images %v, want 2", runs)
	}
	if want := fmt.Sprintf("wrote 2 run images and %d Definitions to %s", len(defs), dir); !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not say %q", stderr, want)
	}
	// Every Definition a run image replays is there, under its content hash.
	replayed := map[uint64]bool{}
	for _, path := range runs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := stages.DecodeRunImage(b)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, g := range img.Graphs {
			replayed[g.DefHash] = true
		}
		out, stderr, code := runCLI(t, "describe", path)
		if code != 0 {
			t.Fatalf("describe %s: exit %d: %s", path, code, stderr)
		}
		for _, want := range []string{
			fmt.Sprintf("run image, %d bytes", len(b)),
			"(verifies)",
			fmt.Sprintf("tasks: %d\n", len(img.Tasks)),
			fmt.Sprintf("graph submissions: %d\n", len(img.Graphs)),
			"sent as root and offset",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("describe %s: no %q in\n%s", path, want, head(out))
			}
		}
	}
	if len(replayed) == 0 || len(defs) != len(replayed) {
		t.Fatalf("the run images replay %d Definitions, --images wrote %d", len(replayed), len(defs))
	}
	for h := range replayed {
		path := filepath.Join(dir, fmt.Sprintf("%016x.def", h))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := stages.DecodeDefinition(b)
		if err != nil || d.ContentHash != h {
			t.Fatalf("%s: %v (content hash %#x)", path, err, stages.DefinitionHash(b))
		}
		out, stderr, code := runCLI(t, "describe", path)
		if code != 0 {
			t.Fatalf("describe %s: exit %d: %s", path, code, stderr)
		}
		for _, want := range []string{
			fmt.Sprintf("definition image, %d bytes", len(b)),
			fmt.Sprintf("content_hash %#016x (verifies)", h),
			fmt.Sprintf("key %q", d.Key),
			fmt.Sprintf("nodes: %d\n", len(d.Nodes)),
			fmt.Sprintf("boundary signature: %d tensors", len(d.Boundary)),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("describe %s: no %q in\n%s", path, want, head(out))
			}
		}
	}

	// Bad input: a clear error, no panic.
	cut := filepath.Join(t.TempDir(), "cut.run")
	b, err := os.ReadFile(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		code int
		want string
	}{
		{dsv4, 2, "is neither a Definition's"},
		{cut, 1, fmt.Sprintf("run image says %d bytes, got %d", len(b), len(b)/2)},
		{filepath.Join(dir, "missing.def"), 2, "no such file"},
	} {
		_, stderr, code := runCLI(t, "describe", c.file)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "panic") {
			t.Errorf("describe %s: exit %d, stderr %q; want exit %d naming %q", c.file, code, stderr, c.code, c.want)
		}
	}
	// Without retention no Definition outlives its pass: nothing to write.
	if _, stderr, code := runCLI(t, "run", dsv4, "--no-retain", "--images", t.TempDir()); code != 2 || !strings.Contains(stderr, "--images with --no-retain") {
		t.Errorf("run --no-retain --images: exit %d, stderr %q; want exit 2 naming both flags", code, stderr)
	}
}

func head(s string) string {
	if lines := strings.SplitN(s, "\n", 40); len(lines) == 40 {
		return strings.Join(lines[:39], "\n") + "\n..."
	}
	return s
}
