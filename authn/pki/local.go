package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"time"
)

// DirEnv names the local PKI's directory when hbgrun's --pki-dir does not
// (tests point it at a temporary directory).
const DirEnv = "HBG_PKI_DIR"

// LocalValidity is how long the local PKI's certificates are good for.
// Nothing renews them: an expired PKI is refused, naming the directory to
// remove, and the next use makes a new one.
const LocalValidity = 5 * 365 * 24 * time.Hour

// ErrUnsafe is a local PKI directory or file others could read or
// replace: a key there is no one's proof of being this user.
var ErrUnsafe = errors.New("local PKI is not private to this user")

// ErrBadPKI is a local PKI directory that holds no usable PKI.
var ErrBadPKI = errors.New("local PKI unusable")

// The local PKI's files, in its directory. The CA's key is not among
// them: it signs the one leaf at creation and is dropped, so that no file
// can make another certificate this PKI trusts.
const (
	caName   = "ca.crt"
	leafName = "loopback"
)

// DefaultDir is the local PKI's directory: $HBG_PKI_DIR, else hbg/pki in
// the user's configuration directory (os.UserConfigDir).
func DefaultDir() (string, error) {
	if d := os.Getenv(DirEnv); d != "" {
		return d, nil
	}
	c, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("%w: no directory for it: %v (give --pki-dir or %s)", ErrBadPKI, err, DirEnv)
	}
	return filepath.Join(c, "hbg", "pki"), nil
}

// Local is the local PKI in dir, made there on first use: a CA and one
// leaf for 127.0.0.1, ::1 and localhost, which every node and driver of
// this user on loopback serves and dials with. It is made whole in a
// temporary directory beside dir and renamed into place, so that
// processes starting at once agree on one (the first rename wins; the
// others find it there). A dir, or a file in it, that another user owns,
// that group or others may access (a key) or write (a certificate), or a
// symbolic link, is refused (ErrUnsafe), as is an incomplete or expired
// PKI (ErrBadPKI).
func Local(dir string) (Files, error) {
	f, err := open(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	if err := create(dir); err != nil {
		return Files{}, err
	}
	return open(dir)
}

func files(dir string) Files {
	return Files{CertFile: filepath.Join(dir, leafName+".crt"), KeyFile: filepath.Join(dir, leafName+".key"), CAFile: filepath.Join(dir, caName)}
}

// create makes the PKI and renames it to dir, unless another process did
// first (then dir is there, and not empty: the rename fails).
func create(dir string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPKI, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-*")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadPKI, err)
	}
	defer os.RemoveAll(tmp)
	ca, err := NewCA(localName("hbg local CA"), LocalValidity)
	if err != nil {
		return err
	}
	if _, err := ca.WriteCA(tmp); err != nil {
		return err
	}
	if _, err := ca.WriteLeaf(tmp, leafName, localName("hbg loopback"), LoopbackNames(), LocalValidity); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Lstat(dir); serr == nil {
			return nil // another process's is there
		}
		return fmt.Errorf("%w: %v", ErrBadPKI, err)
	}
	return nil
}

// localName is name with whose it is, for a reader of the certificates.
func localName(name string) string {
	host, _ := os.Hostname()
	who := fmt.Sprint(os.Geteuid())
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	return fmt.Sprintf("%s (%s@%s)", name, who, host)
}

// open checks the PKI in dir and returns its files: fs.ErrNotExist when
// dir is not there, or is an empty directory (one a user made for it).
func open(dir string) (Files, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Files{}, err
		}
		return Files{}, fmt.Errorf("%w: %v", ErrBadPKI, err)
	}
	if err := private(dir, fi, 0o077); err != nil {
		return Files{}, err
	}
	if !fi.IsDir() {
		return Files{}, fmt.Errorf("%w: %s is not a directory", ErrBadPKI, dir)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) == 0 {
		return Files{}, fs.ErrNotExist
	}
	f := files(dir)
	for _, c := range []struct {
		path string
		deny os.FileMode
	}{{f.KeyFile, 0o077}, {f.CertFile, 0o022}, {f.CAFile, 0o022}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			return Files{}, fmt.Errorf("%w: %s: %v (an incomplete PKI: remove %s, and the next use makes a new one)", ErrBadPKI, dir, err, dir)
		}
		if err := private(c.path, fi, c.deny); err != nil {
			return Files{}, err
		}
	}
	return f, check(f, dir)
}

// private refuses a symbolic link, a file of another user's, and one
// whose permissions hold bits of deny.
func private(path string, fi os.FileInfo, deny os.FileMode) error {
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is a symbolic link (give --pki-dir the directory itself)", ErrUnsafe, path)
	}
	if uid, ok := owner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("%w: %s is owned by uid %d, not this user (uid %d)", ErrUnsafe, path, uid, os.Geteuid())
	}
	if p := fi.Mode().Perm(); p&deny != 0 {
		return fmt.Errorf("%w: %s has mode %04o, want no %04o bits (chmod %04o %s)", ErrUnsafe, path, p, deny, p&^deny, path)
	}
	return nil
}

// check loads the files as TLS does and verifies the leaf against the CA
// now, for the loopback names.
func check(f Files, dir string) error {
	pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return fmt.Errorf("%w: %v (remove %s, and the next use makes a new one)", ErrBadPKI, err, dir)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadPKI, f.CertFile, err)
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadPKI, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%w: %s: no PEM certificate in it (remove %s, and the next use makes a new one)", ErrBadPKI, f.CAFile, dir)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("%w: %s: %v (remove %s, and the next use makes a new one)", ErrBadPKI, f.CertFile, err, dir)
	}
	return nil
}
