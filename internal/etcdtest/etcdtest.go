// Package etcdtest runs a real etcd for tests: the etcd server module
// (embed) in a child process of the test binary, serving its clients on
// loopback with mutual TLS from certificates the test makes (authn/pki). A child
// process, not the test's own: etcd's embed sets gRPC's process-wide
// logger as it starts, and so does protoactor's remote, which races.
package etcdtest

import (
	"bufio"
	"fmt"
	"io"
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

	"github.com/hbg-dev/hbg/authn/pki"
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
	cmd               *exec.Cmd
	in                io.Closer
}

// Start starts etcd in a child process and waits until it serves; the
// test's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("etcd test CA", validity)
	if err != nil {
		t.Fatal(err)
	}
	names := pki.Names{IPs: []net.IP{net.ParseIP("127.0.0.1")}, DNS: []string{"localhost"}}
	if _, err := ca.WriteLeaf(dir, "server", "etcd-server", names, validity); err != nil {
		t.Fatal(err)
	}
	cli, err := ca.WriteLeaf(dir, "etcd-client", "etcd-client", names, validity)
	if err != nil {
		t.Fatal(err)
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
	s := &Server{CACert: cli.CAFile, Cert: cli.CertFile, Key: cli.KeyFile, cmd: cmd, in: in}
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

// validity is how long the test's certificates are good for.
const validity = 24 * time.Hour

// PKI is a throwaway certificate authority (authn/pki's) and the files
// it issued in one directory, for tests that hand certificates to hbg.
type PKI struct {
	dir string
	ca  *pki.CA
}

// NewPKI makes a CA named name, its certificate in dir/ca.crt.
func NewPKI(t testing.TB, dir, name string) *PKI {
	t.Helper()
	ca, err := pki.NewCA(name, validity)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.WriteCA(dir); err != nil {
		t.Fatal(err)
	}
	return &PKI{dir: dir, ca: ca}
}

// CAFile is the CA's certificate (PEM).
func (p *PKI) CAFile() string { return filepath.Join(p.dir, "ca.crt") }

// Issue makes a certificate named cn for 127.0.0.1 and localhost, good
// for serving and dialling, with uris as more SANs; it returns its
// certificate's and key's files.
func (p *PKI) Issue(t testing.TB, cn string, uris ...*url.URL) [2]string {
	t.Helper()
	n := pki.LoopbackNames()
	n.URIs = uris
	f, err := p.ca.WriteLeaf(p.dir, cn, cn, n, validity)
	if err != nil {
		t.Fatal(err)
	}
	return [2]string{f.CertFile, f.KeyFile}
}
