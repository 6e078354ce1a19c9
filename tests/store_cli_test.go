package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.hbgp"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	if _, _, code := runCLI(t, "store", "verify", "--store", dir); code != 0 {
		t.Fatalf("store verify of a good store: exit %d", code)
	}
	// describe prints a pack: its records, each image as a tree.
	if out, stderr, code := runCLI(t, "describe", packs[0]); code != 0 || !strings.Contains(out, "pack, ") ||
		!strings.Contains(out, "1 records") || !strings.Contains(out, `key "k", model "m/full@1"`) || !strings.Contains(out, "definition image") {
		t.Errorf("describe of a pack: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	b, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	recs, err := diskstore.ReadPack(b)
	if err != nil || len(recs) != 1 {
		t.Fatalf("the pack: %d records, %v", len(recs), err)
	}
	b[recs[0].ImageOffset+50] ^= 0xff
	if err := os.WriteFile(packs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := runCLI(t, "describe", packs[0]); code != 1 || !strings.Contains(out, "content_hash") {
		t.Errorf("describe of a pack with a damaged image: exit %d, stdout %q, stderr %q; want exit 1", code, out, stderr)
	}
	out, stderr, code := runCLI(t, "store", "verify", "--store", dir)
	if code != 1 || !strings.Contains(out, "bad: "+packs[0]) {
		t.Errorf("store verify of a damaged image: exit %d, stdout %q, stderr %q; want exit 1 naming %s", code, out, stderr, packs[0])
	}
	for _, args := range [][]string{{"store", "frob"}, {"store", "ls", "extra", "--store", dir}} {
		out, stderr, code := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "unknown command") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, out, stderr)
		}
	}
}

// A --store that cannot be a store (here a file) is the flag's mistake,
// found before any work: run exits 2 naming it, and a node refuses to
// start rather than serve and fail every placement.
func TestStoreFlagUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "--store", file, "--rounds", "1", "--skip-device"},
		{"node", "--listen", "127.0.0.1:0", "--store", file},
	} {
		// A node that starts anyway serves until stopped: bounded.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, hbgrun(t), args...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err := cmd.Run()
		timedOut := ctx.Err() != nil
		cancel()
		code := cmd.ProcessState.ExitCode()
		if timedOut || code != 2 || out.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "--store "+file+": ") {
			t.Errorf("%v: %v, exit %d, stdout %q, stderr %q; want exit 2 and one line naming --store %s", args, err, code, out.String(), stderr.String(), file)
		}
	}
}
