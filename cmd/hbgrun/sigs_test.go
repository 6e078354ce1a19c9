package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/internal/etcdtest"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/stages"
)

// signedStore is a store with two Definitions, the first kept with a
// recorder's signature (of pki's CA), and that signer's serial.
func signedStore(t *testing.T, pki *etcdtest.PKI) (dir, serial string) {
	t.Helper()
	rec := pki.Issue(t, "recorder-a", defsig.RecorderSAN())
	signer, v, err := defsig.Load(rec[0], rec[1], pki.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	var items []diskstore.Item
	for i, fk := range []uint64{0x5161, 0x5162} {
		d := &stages.Definition{FullKey: fk, Key: "layer", HeapBytes: 4096,
			Nodes: []stages.NodeDesc{{Kind: stages.KindDummy, Kernel: [3]stages.KernelID{-1, -1, -1}, BlockNum: -1}}}
		img := stages.EncodeDefinition(d)
		h, _, err := stages.DecodeDefinitionHost(img)
		if err != nil {
			t.Fatal(err)
		}
		it := diskstore.Item{Def: h, Image: img, Model: "m"}
		if i == 0 {
			sig, err := signer.Sign(fk, h.ContentHash, stages.DefinitionVersion)
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := v.Verify(fk, h.ContentHash, stages.DefinitionVersion, sig)
			if err != nil {
				t.Fatal(err)
			}
			it.Signature, serial = sig.Encode(), defsig.Serial(leaf)
		}
		items = append(items, it)
	}
	dir = t.TempDir()
	s, err := diskstore.Open(dir, diskstore.DefaultMax)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.PutBatch(items); err != nil {
		t.Fatal(err)
	}
	return dir, serial
}

// TestStoreVerifySignatures: store verify and describe name a kept
// signature's signer (subject, serial) and say what it was checked
// against: its own certificate, or the cluster's CA; another CA's, a
// revoked serial's and a changed signature are reported and exit 1.
func TestStoreVerifySignatures(t *testing.T) {
	resetFlags(t, "store", "describe")
	pki := etcdtest.NewPKI(t, t.TempDir(), "cluster CA")
	stranger := etcdtest.NewPKI(t, t.TempDir(), "another CA")
	dir, serial := signedStore(t, pki)
	revoked := filepath.Join(t.TempDir(), "revoked")
	if err := os.WriteFile(revoked, []byte(serial+" # test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.hbgp"))
	if len(packs) != 1 {
		t.Fatalf("packs %v", packs)
	}
	signer := `signed by subject "CN=recorder-a", serial ` + serial
	for _, c := range []struct {
		name string
		args []string
		ok   bool
		want []string
	}{
		{"self", nil, true, []string{"signed: 1 image by " + strings.TrimPrefix(signer, "signed by "), "its CA not checked", "2 images", "1 signed (0 bad signatures)"}},
		{"ca", []string{"--trusted-ca-file", pki.CAFile()}, true, []string{"verified against --trusted-ca-file " + pki.CAFile()}},
		{"stranger", []string{"--trusted-ca-file", stranger.CAFile()}, false, []string{"bad signature:", signer, "does not chain to the cluster's CA", "1 signed (1 bad signature)"}},
		{"revoked", []string{"--trusted-ca-file", pki.CAFile(), "--revoked", revoked}, false, []string{"bad signature:", "is revoked"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := runCLI(t, append([]string{"store", "verify", "--store", dir}, c.args...)...)
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok %v; out %s", err, c.ok, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Fatalf("store verify says\n%s\nwant %q in it", out, w)
				}
			}
			dout, _, derr := runCLI(t, append([]string{"describe", packs[0]}, c.args...)...)
			if (derr == nil) != c.ok || !strings.Contains(dout, "signature: "+signer) || !strings.Contains(dout, "signature: unsigned") {
				t.Fatalf("describe: err %v, want ok %v; out %s", derr, c.ok, dout)
			}
		})
	}
	t.Run("changed", func(t *testing.T) {
		b, err := os.ReadFile(packs[0])
		if err != nil {
			t.Fatal(err)
		}
		recs, err := diskstore.ReadPack(b)
		if err != nil {
			t.Fatal(err)
		}
		r := recs[0]
		if r.Signature == nil {
			r = recs[1]
		}
		b[r.ImageOffset-int64(len(r.Signature))+4] ^= 1 // in the signature
		if err := os.WriteFile(packs[0], b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, _, err := runCLI(t, "store", "verify", "--store", dir, "--trusted-ca-file", pki.CAFile())
		if err == nil || !strings.Contains(out, "bad signature:") || !strings.Contains(out, "does not verify over this full_key") || !strings.Contains(out, "0 bad;") {
			t.Fatalf("err %v; out %s", err, out)
		}
		if _, _, err := runCLI(t, "describe", packs[0]); err == nil {
			t.Fatal("describe of a changed signature exits 0")
		}
	})
}

// TestClusterRevokeCLI: cluster revoke puts a serial, as openssl prints
// it, in a real etcd's deny list of the cluster named; cluster revoked
// prints the list as a file node --revoked and store verify --revoked
// read. Without etcd, or with a serial that is not hex, it is a usage
// error.
func TestClusterRevokeCLI(t *testing.T) {
	resetFlags(t, "cluster")
	s := etcdtest.Start(t)
	etcd := []string{"--etcd-endpoints", s.Endpoint, "--etcd-cacert", s.CACert, "--etcd-cert", s.Cert, "--etcd-key", s.Key, "--cluster", "c1"}
	// First: a command's flags keep their values from one call to the
	// next in this process.
	for _, args := range [][]string{
		{"cluster", "revoke", "--serial", "a1b"},
		append([]string{"cluster", "revoke", "--serial", "node-a"}, etcd...),
	} {
		if _, _, err := runCLI(t, args...); !isUsage(err) {
			t.Fatalf("%v: %v, want a usage error", args, err)
		}
	}
	out, _, err := runCLI(t, append([]string{"cluster", "revoke", "--serial", "serial=0A1B", "--reason", "its key leaked"}, etcd...)...)
	if err != nil || out != "revoked serial a1b in cluster c1\n" {
		t.Fatalf("revoke: %v, %q", err, out)
	}
	out, _, err = runCLI(t, append([]string{"cluster", "revoked"}, etcd...)...)
	if err != nil || !strings.HasPrefix(out, "a1b # revoked ") || !strings.HasSuffix(out, ": its key leaked\n") {
		t.Fatalf("revoked: %v, %q", err, out)
	}
	f := filepath.Join(t.TempDir(), "revoked")
	if err := os.WriteFile(f, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := defsig.ReadDenyList(f); err != nil || len(got) != 1 || got[0] != "a1b" {
		t.Fatalf("its output as a deny list: %q, %v", got, err)
	}
}

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

// resetFlags sets every flag of the named commands (and their
// subcommands) back to its default when the test ends: the commands are
// this process's, and a later test's describe must not check against a
// CA file this one removed.
func resetFlags(t *testing.T, names ...string) {
	t.Cleanup(func() {
		var walk func(c *cobra.Command)
		reset := func(f *pflag.Flag) {
			if !f.Changed {
				return
			}
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				_ = sv.Replace(nil)
			} else {
				_ = f.Value.Set(f.DefValue)
			}
			f.Changed = false
		}
		walk = func(c *cobra.Command) {
			c.Flags().VisitAll(reset)
			c.PersistentFlags().VisitAll(reset)
			for _, s := range c.Commands() {
				walk(s)
			}
		}
		for _, c := range commands {
			if slices.Contains(names, c.Name()) {
				walk(c)
			}
		}
	})
}
