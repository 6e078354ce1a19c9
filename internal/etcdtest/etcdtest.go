// Package etcdtest runs a real etcd for tests: the etcd server module
// (embed) in a child process of the test binary, serving its clients on
// loopback with mutual TLS from certificates the test makes. A child
// process, not the test's own: etcd's embed sets gRPC's process-wide
// logger as it starts, and so does protoactor's remote, which races.
package etcdtest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

const serveEnv = "HBG_ETCDTEST_SERVE"

// Main serves etcd and exits when the test binary was started as Start's
// child; otherwise it returns. Call it first in TestMain.
func Main() {
	if dir := os.Getenv(serveEnv); dir != "" {
		os.Exit(serve(dir))
	}
}

// Server is a running etcd.
type Server struct {
	// Endpoint is its client URL (https://127.0.0.1:PORT).
	Endpoint string
	// CACert, Cert and Key are a client's files: the CA that signed the
	// server's certificate (and every client's), and a client
	// certificate etcd takes.
	CACert, Cert, Key string
	// PKI issues more certificates of etcd's CA.
	PKI *PKI
	cmd *exec.Cmd
	in  io.Closer
}

// Start starts etcd in a child process and waits until it serves; the
// test's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	p := NewPKI(t, dir, "etcd test CA")
	srv := p.Issue(t, "etcd-server")
	cli := p.Issue(t, "etcd-client")
	for i, f := range []string{srv[0], srv[1]} {
		if err := os.Link(f, filepath.Join(dir, []string{"server.crt", "server.key"}[i])); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{CACert: p.CAFile(), Cert: cli[0], Key: cli[1], PKI: p, cmd: cmd, in: in}
	t.Cleanup(s.stop)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("etcd exited before serving")
		}
		s.Endpoint = strings.TrimPrefix(l, "etcd ")
	case <-time.After(60 * time.Second):
		t.Fatal("etcd: not serving within 60s")
	}
	return s
}

func (s *Server) stop() {
	_ = s.in.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// serve is the child: etcd with its data in dir, client TLS from dir's
// files (clients must show a certificate of the CA), on free loopback
// ports; it prints "etcd URL" once ready and serves until stdin closes
// or SIGTERM.
func serve(dir string) int {
	cport, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pport, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "data")
	// Its own errors are what serve returns; the rest (a listener closed
	// as it stops) is noise in the test's output.
	cfg.LogLevel = "fatal"
	cu := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", cport)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pport)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.ClientTLSInfo = transport.TLSInfo{
		CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"),
		TrustedCAFile: filepath.Join(dir, "ca.crt"), ClientCertAuth: true,
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 2
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd: not ready within 60s")
		return 2
	}
	fmt.Printf("etcd %s\n", cu.String())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	gone := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(gone) }()
	select {
	case <-sig:
	case <-gone:
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
	return 0
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PKI is a throwaway certificate authority and the files it issued.
type PKI struct {
	dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

// NewPKI makes a CA named name, its certificate in dir/ca.crt.
func NewPKI(t testing.TB, dir, name string) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{dir: dir, ca: ca, key: key, next: 2}
	writePEM(t, p.CAFile(), "CERTIFICATE", der)
	return p
}

// CAFile is the CA's certificate (PEM).
func (p *PKI) CAFile() string { return filepath.Join(p.dir, "ca.crt") }

// Issue makes a certificate named cn for 127.0.0.1 and localhost, good
// for serving and dialling, with uris as more SANs; it returns its
// certificate's and key's files.
func (p *PKI) Issue(t testing.TB, cn string, uris ...*url.URL) [2]string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.next++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.next), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}, URIs: uris,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(p.dir, cn+".crt"), filepath.Join(p.dir, cn+".key")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kd)
	return [2]string{cert, keyFile}
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
