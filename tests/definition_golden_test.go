package tests

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

var updateDefinitions = flag.Bool("update-definitions", false, "rewrite testdata/definitions.golden (commit only diffs you understand)")

// TestDefinitionImagesGolden pins the content hash, and so every byte, of
// each Definition image the shipped models record, form by form: a
// recorder that writes its records differently (stages.Recorder keeps
// tensor templates and predicates as image records) must still write the
// same images.
func TestDefinitionImagesGolden(t *testing.T) {
	var b strings.Builder
	for _, file := range []string{dsv4, "../config/models/qwen3_14b_decode.yaml"} {
		m, err := config.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range m.Forms() {
			o := &collector{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots()), seen: map[uint64]bool{}}
			if err := m.Run(o, form); err != nil {
				t.Fatal(err)
			}
			for _, img := range o.images {
				d, _, err := stages.DecodeDefinitionHost(img)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, "%s %s %s %d bytes %016x\n", strings.TrimPrefix(file, "../config/models/"), form, d.Key, len(img), d.ContentHash)
			}
		}
	}
	const golden = "testdata/definitions.golden"
	if *updateDefinitions {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Fatalf("Definition images differ from %s:\n%s", golden, got)
	}
}
