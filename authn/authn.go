// Package authn says who sent a message that crossed protoactor remote: the
// connection it came over, never the message. A node's gRPC server (the
// options Options makes) requires mutual TLS when it is given certificates
// (Go's crypto/tls, tls.RequireAndVerifyClientCert), and stamps every
// envelope it receives with its connection's remote address and the names
// of the certificate the connection was verified with, replacing whatever
// the sender put under those header keys. An actor reads the stamp with Of.
//
// protoactor remote carries a message's sender as a PID the sender wrote:
// anyone could name any node. The stamp is what the transport saw, so a
// node can refuse a Publish, an Answer or a Place whose connection does
// not match who it claims to be.
package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
)

// The stamp's header keys. Every key with prefix is the transport's: a
// sender's own are dropped.
const (
	prefix   = "hbg-conn-"
	hdrAddr  = prefix + "addr"
	hdrNames = prefix + "names"
	hdrTLS   = prefix + "tls"
)

// ErrTLS marks a connection refused by TLS (no certificate, one from
// another authority, a name that does not match).
var ErrTLS = errors.New("TLS")

// Files are the PEM files of a process's TLS identity, with etcd's flag
// names: --cert-file, --key-file, --trusted-ca-file. All three or none.
type Files struct {
	CertFile, KeyFile, TrustedCAFile string
}

// On says whether TLS is configured.
func (f Files) On() bool { return f.CertFile != "" || f.KeyFile != "" || f.TrustedCAFile != "" }

// Check says what is missing when some but not all are set.
func (f Files) Check() error {
	if !f.On() {
		return nil
	}
	var missing []string
	for _, m := range []struct{ flag, v string }{{"--cert-file", f.CertFile}, {"--key-file", f.KeyFile}, {"--trusted-ca-file", f.TrustedCAFile}} {
		if m.v == "" {
			missing = append(missing, m.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("TLS: %s missing: mutual TLS needs a certificate, its key and the authority that signs every peer's", strings.Join(missing, " and "))
	}
	return nil
}

// Configs loads the files: the server's config (client certificates
// required and verified against the trusted CA) and the client's (the
// server's certificate verified against it, the same certificate offered).
func (f Files) Configs() (server, client *tls.Config, err error) {
	if err := f.Check(); err != nil {
		return nil, nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: --cert-file %s, --key-file %s: %w", f.CertFile, f.KeyFile, err)
	}
	pem, err := os.ReadFile(f.TrustedCAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: --trusted-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("TLS: --trusted-ca-file %s: no PEM certificate in it", f.TrustedCAFile)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// Conns bounds the connections a process's gRPC server holds: a
// connection that sends nothing costs a goroutine, a file descriptor and
// about 20 KB until gRPC gives up on its handshake (120 s by default), so
// an attacker who opens them by the ten thousand took the node's memory
// and, at its descriptor limit, every driver's connection.
type Conns struct {
	// Max is how many connections are held at once (handshaking or
	// served); one over it is closed at once. 0: no bound.
	Max int
	// Handshake bounds a connection's TLS handshake and HTTP/2 preface
	// (grpc.ConnectionTimeout); 0: gRPC's default.
	Handshake time.Duration
	// PerPeer is how many of them one remote IP address may hold (0: no
	// bound of its own): a stranger's flood from one address fills its
	// own share, not the process's.
	PerPeer int
	// Idle closes a connection that has had no stream for that long
	// (grpc keepalive's MaxConnectionIdle; 0: never), and pings a silent
	// peer at that interval, closing it when the ping goes unanswered.
	Idle time.Duration
	// OnRefused, if set, hears each connection closed over Max or
	// PerPeer: its remote address, the number open and the refusal.
	OnRefused func(addr string, open int, why error)
}

// Options are the gRPC options of a process's protoactor remote: its
// server is behind guard (first), stamps every envelope with its
// connection (Of), takes messages up to maxMessage bytes and holds
// connections within conns; with TLS (files set), both the server and
// every connection it dials are mutual TLS. Every connection it dials
// records the status a peer ended its stream with (LastRefusal).
func Options(f Files, maxMessage int, conns Conns, guard Guard) ([]grpc.ServerOption, []grpc.DialOption, error) {
	server := append(guard.ServerOptions(), grpc.ChainStreamInterceptor(stamp), grpc.MaxRecvMsgSize(maxMessage))
	dial := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)), grpc.WithChainStreamInterceptor(recordRefusal)}
	if conns.Handshake > 0 {
		server = append(server, grpc.ConnectionTimeout(conns.Handshake))
	}
	if conns.Idle > 0 {
		server = append(server, Idle(conns.Idle, conns.Idle))
	}
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if f.On() {
		s, c, err := f.Configs()
		if err != nil {
			return nil, nil, err
		}
		creds = credentials.NewTLS(s)
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(c)))
	}
	if conns.Max > 0 || conns.PerPeer > 0 {
		creds = &boundedCreds{TransportCredentials: creds, slots: &slots{max: conns.Max, perPeer: conns.PerPeer, by: map[string]int{}}, onRefused: conns.OnRefused}
	}
	server = append(server, grpc.Creds(creds))
	return server, dial, nil
}

// ErrTooManyConns is a connection closed because the server holds its
// limit of them (Conns.Max); ErrTooManyPeerConns, its limit from one
// address (Conns.PerPeer).
var (
	ErrTooManyConns     = errors.New("too many connections")
	ErrTooManyPeerConns = errors.New("too many connections from one address")
)

// RefusalPrefix starts the line a refused connection is sent before it is
// closed (before any TLS or HTTP/2), so that a client that looks (a
// driver's probe) can say which limit refused it, not that the
// connection ended.
const RefusalPrefix = "HBG-REFUSED "

// slots counts connections, in all and by remote IP.
type slots struct {
	mu           sync.Mutex
	max, perPeer int
	open         int
	by           map[string]int
}

func (s *slots) take(addr string) (open int, err error) {
	ip := addr
	if h, _, e := net.SplitHostPort(addr); e == nil {
		ip = h
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.max > 0 && s.open >= s.max:
		return s.open, fmt.Errorf("%w: %d open, the limit (--max-conns %d)", ErrTooManyConns, s.open, s.max)
	case s.perPeer > 0 && s.by[ip] >= s.perPeer:
		return s.open, fmt.Errorf("%w: %d open from %s, the limit (--max-conns-per-peer %d)", ErrTooManyPeerConns, s.by[ip], ip, s.perPeer)
	}
	s.open++
	s.by[ip]++
	return s.open, nil
}

func (s *slots) give(addr string) {
	ip := addr
	if h, _, e := net.SplitHostPort(addr); e == nil {
		ip = h
	}
	s.mu.Lock()
	s.open--
	if s.by[ip]--; s.by[ip] <= 0 {
		delete(s.by, ip)
	}
	s.mu.Unlock()
}

// boundedCreds takes a slot for each connection from before its
// handshake until it closes.
type boundedCreds struct {
	credentials.TransportCredentials
	slots     *slots
	onRefused func(string, int, error)
}

func (b *boundedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	addr := raw.RemoteAddr().String()
	if open, err := b.slots.take(addr); err != nil {
		if b.onRefused != nil {
			b.onRefused(addr, open, err)
		}
		// Said before TLS: the refused client may have no certificate
		// this process would take, and still deserves the reason.
		_ = raw.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = raw.Write([]byte(RefusalPrefix + err.Error() + "\n"))
		return nil, nil, err
	}
	c, info, err := b.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		b.slots.give(addr)
		return nil, nil, err
	}
	return &slotConn{Conn: c, free: func() { b.slots.give(addr) }}, info, nil
}

func (b *boundedCreds) Clone() credentials.TransportCredentials {
	return &boundedCreds{TransportCredentials: b.TransportCredentials.Clone(), slots: b.slots, onRefused: b.onRefused}
}

// slotConn gives its slot back when it is closed (once).
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}

// stamp wraps the stream of a connection's messages.
func stamp(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c := connOf(ss.Context())
	return handler(srv, &stamped{ServerStream: ss, addr: c.Addr, names: strings.Join(c.Names, ","), tls: c.TLS})
}

type stamped struct {
	grpc.ServerStream
	addr, names string
	tls         bool
}

func (s *stamped) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*paremote.RemoteMessage)
	if !ok {
		return nil
	}
	b := rm.GetMessageBatch()
	if b == nil {
		return nil
	}
	b.Envelopes = slices.DeleteFunc(b.Envelopes, func(e *paremote.MessageEnvelope) bool {
		return s.refused(b, e)
	})
	for _, e := range b.GetEnvelopes() {
		if e.MessageHeader == nil {
			e.MessageHeader = &paremote.MessageHeader{}
		}
		h := e.MessageHeader.HeaderData
		if h == nil {
			h = map[string]string{}
			e.MessageHeader.HeaderData = h
		}
		for k := range h {
			if strings.HasPrefix(k, prefix) {
				delete(h, k)
			}
		}
		h[hdrAddr] = s.addr
		if s.names != "" {
			h[hdrNames] = s.names
		}
		if s.tls {
			h[hdrTLS] = "1"
		}
	}
	return nil
}

// refused says whether an envelope is one no remote may send: protoactor
// delivers a Stop or a PoisonPill from the wire to any actor it names (a
// node's peer actor, a run's host, a driver's actor: their names are fixed
// or counted), and a Terminated tells its target that Who has died, which
// a driver takes for its node's loss. hbg sends no Stop or PoisonPill
// between processes; a Terminated is taken only over a connection that
// speaks for Who's host (Vouches), as the watched process's own is; a
// Watch or Unwatch only over one that speaks for its watcher's.
func (s *stamped) refused(b *paremote.MessageBatch, e *paremote.MessageEnvelope) bool {
	if e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames) {
		return true
	}
	switch b.TypeNames[e.TypeId] {
	case "actor.Stop", "actor.PoisonPill":
		return true
	case "actor.Terminated":
		var t actor.Terminated
		if e.SerializerId != 0 || proto.Unmarshal(e.MessageData, &t) != nil {
			return true
		}
		return !s.vouches(t.GetWho())
	case "actor.Watch":
		// A watch names the process its Terminated goes to: this process
		// would dial whatever address a stranger wrote there.
		var w actor.Watch
		if e.SerializerId != 0 || proto.Unmarshal(e.MessageData, &w) != nil {
			return true
		}
		return !s.vouches(w.GetWatcher())
	case "actor.Unwatch":
		var w actor.Unwatch
		if e.SerializerId != 0 || proto.Unmarshal(e.MessageData, &w) != nil {
			return true
		}
		return !s.vouches(w.GetWatcher())
	}
	return false
}

// vouches says whether the stream's connection speaks for pid's host.
func (s *stamped) vouches(pid *actor.PID) bool {
	h, _, err := net.SplitHostPort(pid.GetAddress())
	c := Conn{Addr: s.addr, TLS: s.tls}
	if s.names != "" {
		c.Names = strings.Split(s.names, ",")
	}
	return err == nil && c.Vouches(h)
}

// Conn is the connection a message came over.
type Conn struct {
	// Addr is its remote address (host:port, the sender's end: not the
	// address the sender serves at); "" for a message from this process,
	// or from a remote without the stamp.
	Addr string
	// Names are the verified client certificate's subject alternative
	// names (DNS, IP, URI); none without TLS. Never its subject common
	// name: Go's TLS verifies a server by its SANs alone, and a CA that
	// signs a certificate with any CN (a client's, a user's) must not
	// thereby have signed a node's name.
	Names []string
	// TLS says the connection's client certificate was verified, even if
	// it has no names (then it vouches for nothing).
	TLS bool
}

func connOf(ctx context.Context) Conn {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Conn{}
	}
	c := Conn{}
	if p.Addr != nil {
		c.Addr = p.Addr.String()
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
		c.Names = certNames(ti.State.VerifiedChains[0][0])
		c.TLS = true
	}
	return c
}

func certNames(leaf *x509.Certificate) []string {
	ns := slices.Clone(leaf.DNSNames)
	for _, ip := range leaf.IPAddresses {
		ns = append(ns, ip.String())
	}
	for _, u := range leaf.URIs {
		ns = append(ns, u.String())
	}
	// A name holds no comma (the stamp joins them with one).
	return slices.DeleteFunc(ns, func(n string) bool { return n == "" || strings.Contains(n, ",") })
}

// Of is the connection of the message ctx is handling.
func Of(ctx actor.Context) Conn {
	h := ctx.MessageHeader()
	if h == nil {
		return Conn{}
	}
	c := Conn{Addr: h.Get(hdrAddr), TLS: h.Get(hdrTLS) != ""}
	if n := h.Get(hdrNames); n != "" {
		c.Names = strings.Split(n, ",")
	}
	return c
}

// Remote says whether the message came over a stamped connection.
func (c Conn) Remote() bool { return c.Addr != "" }

// Authenticated says whether the connection was verified by TLS.
// A certificate that names nothing (a CN alone) is still TLS: it vouches
// for no host, where without TLS the connection's IP address would.
func (c Conn) Authenticated() bool { return c.TLS || len(c.Names) > 0 }

// Vouches says whether the connection speaks for host (a node's or a
// driver's host, from an address it serves at): its certificate names
// host, or, without TLS, the connection comes from host's IP address.
func (c Conn) Vouches(host string) bool {
	if c.Authenticated() {
		return slices.Contains(c.Names, host)
	}
	h, _, err := net.SplitHostPort(c.Addr)
	return err == nil && sameIP(h, host)
}

func sameIP(a, b string) bool {
	ia, ib := net.ParseIP(a), net.ParseIP(b)
	return ia != nil && ib != nil && ia.Equal(ib)
}

// Identity is who the connection is, for a claim to match later
// messages against: its certificate's names and its remote address (a
// claim is the connection's, so another holder of the same certificate
// on another connection is not it).
func (c Conn) Identity() string {
	return strings.Join(c.Names, ",") + "@" + c.Addr
}

// Loopback says whether host is a loopback address (or localhost).
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
