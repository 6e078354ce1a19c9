package pki

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// childEnv makes this test binary a process that opens the local PKI in
// the directory the variable names and prints its CA's fingerprint.
const childEnv = "HBG_PKI_TEST_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		f, err := Local(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(fingerprint(f.CAFile))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fingerprint(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestLocalConcurrentFirstUse: processes that make the local PKI at once
// (none there yet) agree on one CA, and leave no temporary directory.
func TestLocalConcurrentFirstUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	const procs = 4
	out := make([]string, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+dir)
			b, err := cmd.Output()
			if err != nil {
				out[i] = "error: " + err.Error()
				return
			}
			out[i] = strings.TrimSpace(string(b))
		})
	}
	wg.Wait()
	want := fingerprint(filepath.Join(dir, caName))
	for i, o := range out {
		if o != want {
			t.Errorf("process %d: CA %s, the directory's %s", i, o, want)
		}
	}
	ents, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("beside the PKI: %v, want it alone", ents)
	}
	// In one process too: goroutines opening a made PKI read the same.
	for range procs {
		wg.Go(func() {
			if f, err := Local(dir); err != nil || fingerprint(f.CAFile) != want {
				t.Errorf("Local again: %v, %v", f, err)
			}
		})
	}
	wg.Wait()
}

// TestLocalFiles: the made PKI is private (directory 0700, key 0600, no
// CA key), and its leaf serves and dials mutual TLS for the loopback
// names under its CA.
func TestLocalFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hbg", "pki")
	f, err := Local(dir)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, f.KeyFile: 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %04o", path, fi.Mode(), err, want)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("PKI files %v, want ca.crt, loopback.crt and loopback.key", ents)
	}
	pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	for _, h := range []string{"127.0.0.1", "::1", "localhost"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if leaf.Subject.CommonName == "" || len(leaf.IPAddresses) != 2 {
		t.Errorf("leaf %q, IPs %v", leaf.Subject.CommonName, leaf.IPAddresses)
	}
}

// TestLocalRefusesUnsafe: a directory or key others may read, another
// user's (tested as root only: it takes a chown), a symbolic link, an
// incomplete PKI: refused, naming the path and what is wrong,
// and nothing written there.
func TestLocalRefusesUnsafe(t *testing.T) {
	base := t.TempDir()
	made := filepath.Join(base, "made")
	f, err := Local(made)
	if err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(made, link); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(base, "partial")
	if err := os.Mkdir(partial, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(partial, "ca.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	type refusal struct {
		name, dir string
		prep      func()
		want      error
		says      string
	}
	var extra []refusal
	if os.Geteuid() == 0 {
		// Only root can give a directory to another user.
		theirs := filepath.Join(base, "theirs")
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, refusal{"another user's directory", theirs, nil, ErrUnsafe, "owned by uid 65534"})
	}
	for _, c := range append([]refusal{
		{"group-readable directory", open, nil, ErrUnsafe, "has mode 0755"},
		{"symbolic link", link, nil, ErrUnsafe, "symbolic link"},
		{"incomplete", partial, nil, ErrBadPKI, "incomplete"},
		{"readable key", made, func() { _ = os.Chmod(f.KeyFile, 0o640) }, ErrUnsafe, "loopback.key has mode 0640"},
	}, extra...) {
		t.Run(c.name, func(t *testing.T) {
			if c.prep != nil {
				c.prep()
			}
			before, _ := os.ReadDir(c.dir)
			_, err := Local(c.dir)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.dir) {
				t.Fatalf("Local(%s): %v, want %v saying %q and the path", c.dir, err, c.want, c.says)
			}
			if after, _ := os.ReadDir(c.dir); len(after) != len(before) {
				t.Errorf("Local wrote into %s: %v", c.dir, after)
			}
		})
	}
}

// TestIssue: a leaf names what it is given and nothing else, and does
// not outlive its CA.
func TestIssue(t *testing.T) {
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ca.Issue("127.0.0.1", Names{}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Cert.IPAddresses)+len(l.Cert.DNSNames)+len(l.Cert.URIs) != 0 {
		t.Errorf("SANs %v %v %v, want none", l.Cert.IPAddresses, l.Cert.DNSNames, l.Cert.URIs)
	}
	if l.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("leaf until %v, its CA until %v", l.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := l.TLS(); err != nil {
		t.Error(err)
	}
}
