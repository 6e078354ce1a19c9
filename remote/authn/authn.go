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

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// The stamp's header keys. Every key with prefix is the transport's: a
// sender's own are dropped.
const (
	prefix   = "hbg-conn-"
	hdrAddr  = prefix + "addr"
	hdrNames = prefix + "names"
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

// Options are the gRPC options of a process's protoactor remote: its
// server stamps every envelope with its connection (Of), and takes
// messages up to maxMessage bytes; with TLS (files set), both the server
// and every connection it dials are mutual TLS.
func Options(f Files, maxMessage int) ([]grpc.ServerOption, []grpc.DialOption, error) {
	server := []grpc.ServerOption{grpc.ChainStreamInterceptor(stamp), grpc.MaxRecvMsgSize(maxMessage)}
	dial := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage))}
	if f.On() {
		s, c, err := f.Configs()
		if err != nil {
			return nil, nil, err
		}
		server = append(server, grpc.Creds(credentials.NewTLS(s)))
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(c)))
	}
	return server, dial, nil
}

// stamp wraps the stream of a connection's messages.
func stamp(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c := connOf(ss.Context())
	return handler(srv, &stamped{ServerStream: ss, addr: c.Addr, names: strings.Join(c.Names, ",")})
}

type stamped struct {
	grpc.ServerStream
	addr, names string
}

func (s *stamped) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*paremote.RemoteMessage)
	if !ok {
		return nil
	}
	for _, e := range rm.GetMessageBatch().GetEnvelopes() {
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
	}
	return nil
}

// Conn is the connection a message came over.
type Conn struct {
	// Addr is its remote address (host:port, the sender's end: not the
	// address the sender serves at); "" for a message from this process,
	// or from a remote without the stamp.
	Addr string
	// Names are the verified client certificate's subject common name and
	// subject alternative names (DNS, IP, URI); none without TLS.
	Names []string
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
	}
	return c
}

func certNames(leaf *x509.Certificate) []string {
	var ns []string
	if cn := leaf.Subject.CommonName; cn != "" {
		ns = append(ns, cn)
	}
	ns = append(ns, leaf.DNSNames...)
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
	c := Conn{Addr: h.Get(hdrAddr)}
	if n := h.Get(hdrNames); n != "" {
		c.Names = strings.Split(n, ",")
	}
	return c
}

// Remote says whether the message came over a stamped connection.
func (c Conn) Remote() bool { return c.Addr != "" }

// Authenticated says whether the connection was verified by TLS.
func (c Conn) Authenticated() bool { return len(c.Names) > 0 }

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
