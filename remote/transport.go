package remote

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/wire"
)

// DefaultMaxModel is the largest model a node takes and a driver sends
// (Transport.MaxModel): the bound hbgrun reads a model file within.
const DefaultMaxModel = 64 << 20

// messageSlack is what a Place carries beside its model (options, ranks,
// node list), and what the largest batch of peer images needs: gRPC's
// message limit is the model limit plus it.
const messageSlack = 4 << 20

// ErrInsecure is a node asked to serve beyond loopback without TLS.
var ErrInsecure = errors.New("no TLS on a non-loopback address")

// ErrTLS marks a connection TLS refused (authn.ErrTLS).
var ErrTLS = authn.ErrTLS

// The named refusals a driver gets (package wire's, which carries them).
var (
	ErrLimit             = wire.ErrLimit
	ErrTooManyRanks      = wire.ErrTooManyRanks
	ErrTooManyPlacements = wire.ErrTooManyPlacements
	ErrTooManyDrivers    = wire.ErrTooManyDrivers
	ErrModelTooLarge     = wire.ErrModelTooLarge
	ErrTooManyTasks      = wire.ErrTooManyTasks
	ErrTooManyEdges      = wire.ErrTooManyEdges
	ErrUnauthorized      = wire.ErrUnauthorized
)

// Transport is how a process's protoactor remote connects: mutual TLS
// when TLS names the files (every connection, served and dialled), and
// the largest model it takes.
type Transport struct {
	TLS authn.Files
	// MaxModel bounds a model's bytes (default DefaultMaxModel); gRPC's
	// message limit is set above it, so that what is under it arrives.
	MaxModel int
	// MaxConns bounds the connections the process's server holds at once
	// (default DefaultMaxConns): one over it is closed at once, and
	// OnConnRefused, if set, hears its address and the number open. A
	// connection must finish its handshake within HandshakeTimeout.
	MaxConns int
	// MaxConnsPerPeer bounds those from one remote IP address (default
	// DefaultMaxConnsPerPeer): a flood from one address fills its share.
	MaxConnsPerPeer int
	// IdleTimeout closes a connection with no stream open for that long
	// (default DefaultIdleTimeout): a stranger's handshaken, silent one.
	IdleTimeout   time.Duration
	OnConnRefused func(addr string, open int, why error)
	// OnGuard, if set, hears each call or batch the guard refused and
	// each handler panic it recovered (authn.Guard).
	OnGuard func(authn.Event)
}

// DefaultMaxConns bounds a process's connections (Transport.MaxConns): a
// driver and each peer hold one each.
const DefaultMaxConns = 1024

// DefaultMaxConnsPerPeer bounds one address's connections: a machine's
// processes (a driver, nodes, their probes) hold one each to this one.
const DefaultMaxConnsPerPeer = 32

// DefaultIdleTimeout closes a connection that holds no stream: every
// peer of protoactor remote holds its message stream open while it is
// connected, so only a stranger's connection is ever idle.
const DefaultIdleTimeout = 30 * time.Second

// HandshakeTimeout bounds a connection's TLS handshake and HTTP/2 preface:
// one that sends nothing holds its slot no longer (gRPC's default is 120 s).
const HandshakeTimeout = 10 * time.Second

// ErrTooManyConns is a connection closed over Transport.MaxConns.
var ErrTooManyConns = authn.ErrTooManyConns

func (t Transport) maxConns() int {
	if t.MaxConns <= 0 {
		return DefaultMaxConns
	}
	return t.MaxConns
}

func (t Transport) perPeer() int {
	if t.MaxConnsPerPeer <= 0 {
		return DefaultMaxConnsPerPeer
	}
	return t.MaxConnsPerPeer
}

func (t Transport) idle() time.Duration {
	if t.IdleTimeout <= 0 {
		return DefaultIdleTimeout
	}
	return t.IdleTimeout
}

func (t Transport) maxModel() int {
	if t.MaxModel <= 0 {
		return DefaultMaxModel
	}
	return t.MaxModel
}

// option is t as protoactor remote's configuration: appended to what
// other options set, never replacing it.
func (t Transport) option() (paremote.ConfigOption, error) {
	server, dial, err := authn.Options(t.TLS, t.maxModel()+messageSlack,
		authn.Conns{Max: t.maxConns(), PerPeer: t.perPeer(), Idle: t.idle(), Handshake: HandshakeTimeout, OnRefused: t.OnConnRefused},
		authn.Guard{FirstMessage: HandshakeTimeout, MessageLimit: fmt.Sprintf("--max-model %d and %d bytes beside", t.maxModel(), messageSlack), OnEvent: t.OnGuard})
	if err != nil {
		return nil, err
	}
	return func(c *paremote.Config) {
		c.ServerOptions = append(c.ServerOptions, server...)
		c.DialOptions = append(c.DialOptions, dial...)
	}, nil
}

// probe checks that the node at addr and this process agree on TLS, so a
// refusal is said with its reason instead of as a connection that ended:
// with TLS, a handshake (this process's certificate offered, the node's
// verified) and the node's first bytes, where TLS 1.3 says whether it took
// the client's certificate; without, whether the node answers a TLS
// handshake at all (then it wants a certificate this process does not
// have). A node that cannot be reached is not probe's to report: nil.
func probe(addr string, client *tls.Config, timeout time.Duration) error {
	d := &net.Dialer{Timeout: timeout}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		return nil
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(timeout))
	host, _, _ := net.SplitHostPort(addr)
	if client == nil {
		c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}, ServerName: host})
		if c.Handshake() == nil {
			return fmt.Errorf("node %s: %w: it serves only mutual TLS, and this driver has no certificate (give --cert-file, --key-file and --trusted-ca-file; on loopback, drop --insecure-loopback to use the local PKI)", addr, ErrTLS)
		}
		return refused(addr, timeout)
	}
	cfg := client.Clone()
	cfg.NextProtos = []string{"h2"}
	cfg.ServerName = host
	c := tls.Client(raw, cfg)
	if err := c.Handshake(); err != nil {
		if r := refused(addr, timeout); r != nil {
			return r
		}
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) {
			return fmt.Errorf("node %s: %w handshake: %v: the node serves without TLS (its --insecure or --insecure-loopback), and this driver speaks only TLS (on loopback, --insecure-loopback drops it)", addr, ErrTLS, err)
		}
		return fmt.Errorf("node %s: %w handshake: %v", addr, ErrTLS, err)
	}
	// A gRPC server speaks first (its HTTP/2 settings); a TLS 1.3 server
	// that refused the client's certificate sends its alert instead.
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return fmt.Errorf("node %s: %w: the node refused this driver's certificate: %v", addr, ErrTLS, err)
	}
	return nil
}

// ErrConnRefused is a connection a node closed over one of its
// connection limits (it says which).
var ErrConnRefused = errors.New("connection refused by the node's limit")

// refused is the limit the node at addr refuses connections over, if it
// does (authn.Refusal), as the driver's error.
func refused(addr string, timeout time.Duration) error {
	if r := authn.Refusal(addr, min(timeout, 2*time.Second)); r != "" {
		return fmt.Errorf("node %s: %w: %s", addr, ErrConnRefused, r)
	}
	return nil
}

// checkExposure refuses a node without TLS on anything but loopback,
// unless insecure.
func checkExposure(listen, advertise string, t Transport, insecure bool) error {
	if t.TLS.On() || insecure {
		return nil
	}
	for _, a := range []string{listen, advertise} {
		if a == "" {
			continue
		}
		h, _, err := net.SplitHostPort(a)
		if err == nil && !authn.Loopback(h) {
			return fmt.Errorf("%w: %s is reachable from other machines, and without TLS anyone who reaches it can place models, run passes and write Definitions: give --cert-file, --key-file and --trusted-ca-file (or --insecure to serve so anyway)", ErrInsecure, a)
		}
	}
	return nil
}

// ErrNotNamed is a process whose own certificate does not name the host
// it serves at: every peer that dials it (a node answering a driver, a
// peer fetching) verifies that name, and would refuse it.
var ErrNotNamed = errors.New("certificate does not name this process's host")

// checkOwnName checks, with TLS, that the process's certificate names the
// host others reach it at (advertise, else listen), by its subject
// alternative names as Go's TLS verifies them: said at start, not as a
// spawn left unanswered NodeTimeout later.
func checkOwnName(t Transport, listen, advertise string) error {
	if !t.TLS.On() {
		return nil
	}
	addr := advertise
	if addr == "" {
		addr = listen
	}
	h, _, err := net.SplitHostPort(addr)
	if err != nil || wildcard(h) {
		return nil // refused with its own message elsewhere
	}
	cert, err := tls.LoadX509KeyPair(t.TLS.CertFile, t.TLS.KeyFile)
	if err != nil {
		return fmt.Errorf("TLS: --cert-file %s, --key-file %s: %w", t.TLS.CertFile, t.TLS.KeyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("TLS: --cert-file %s: %w", t.TLS.CertFile, err)
	}
	if err := leaf.VerifyHostname(h); err != nil {
		return fmt.Errorf("%w: --cert-file %s: %v (its SANs: DNS %v, IP %v); peers verify %s by it and would refuse every answer", ErrNotNamed, t.TLS.CertFile, err, leaf.DNSNames, leaf.IPAddresses, addr)
	}
	return nil
}
