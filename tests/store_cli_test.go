package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/stages"
)

// The store's subcommands exit as the others do: a bad image found is a
// failed check (1, as `store --help` says), a mistyped subcommand or an
// extra argument a usage error (2, one line), never the help and 0.
func TestStoreCommandExitCodes(t *testing.T) {
	dir := t.TempDir()
	s, err := diskstore.Open(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d := &stages.Definition{FullKey: 0x77, Key: "k", HeapBytes: 64,
		Nodes: []stages.NodeDesc{{Kind: stages.KindDummy, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1}}}
	img := stages.EncodeDefinition(d)
	if err := s.Put(d, img, "m/full@1"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	objs, _ := filepath.Glob(filepath.Join(dir, "objects", "*.hbgd"))
	if len(objs) != 1 {
		t.Fatalf("objects: %v", objs)
	}
	if _, _, code := runCLI(t, "store", "verify", "--store", dir); code != 0 {
		t.Fatalf("store verify of a good store: exit %d", code)
	}
	if err := os.WriteFile(objs[0], img[:50], 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "store", "verify", "--store", dir)
	if code != 1 || !strings.Contains(out, "bad: "+objs[0]) {
		t.Errorf("store verify of a damaged image: exit %d, stdout %q, stderr %q; want exit 1 naming %s", code, out, stderr, objs[0])
	}
	for _, args := range [][]string{{"store", "frob"}, {"store", "ls", "extra", "--store", dir}} {
		out, stderr, code := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "unknown command") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, out, stderr)
		}
	}
}
