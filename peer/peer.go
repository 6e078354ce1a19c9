// Package peer makes a Definition recorded once per cluster: a node whose
// store misses a full_key (in memory and on disk) asks the cluster before
// recording it, over protoactor remote, and a node that has it sends the
// image, the same flat bytes it is stored in. It implements
// actors.DefinitionSource; one Node runs per hbg process (`hbgrun node`).
//
// # Agreement: one recorder per key
//
// In a cluster whose membership is kept in etcd (Config.Cluster, package
// remote), a key's owner is a virtual actor of protoactor's cluster, kind
// OwnerKind, identity the full_key: the cluster places it on one member,
// moves it when members join and leave, and a new activation rebuilds
// from what the members hold (owner.go). What follows of the owner's
// claim and its bounds holds for both; the node list is the static setup's
// (`--nodes` without etcd), where no membership changes come.
//
// Every full_key has an owner, chosen by rendezvous hashing over the
// cluster's node list (Owner): every node computes the same owner with no
// message, and a node joining or leaving moves only the keys it owns. A node
// that misses a key asks its owner (the owner asks itself, through the same
// code, with no message). The owner answers from what it holds, in memory
// or in its store on disk, with the image; when it holds nothing and no node
// is recording the key, it grants the asker the key's claim: the asker
// records the Definition and Publishes the image to the owner, which answers
// every asker that came meanwhile (they wait, in order) and serves the key
// from then on. One owner per key and one claim per owner make one recorder
// per key: two nodes that miss at the same moment reach the same owner, and
// its actor takes their asks one at a time.
//
// Why that is enough, and where it stops:
//   - A claim holder that dies (its endpoint terminates: the owner watches
//     it), abandons the claim (its recording failed) or holds it longer
//     than Config.ClaimTimeout loses it to the next waiter. A Publish (or
//     Abandon) is taken only from the current holder, over the connection
//     its ask came over (package authn stamps every message with it): a
//     late one from a holder that lost the claim is refused like a
//     stranger's, and a recording that outlasts the timeout is recorded
//     twice.
//   - An asker's wait is bounded: with no answer after Config.AskTimeout,
//     or when the owner's endpoint terminates, it records the Definition
//     itself and the pass says so in a warning. A dead owner costs each
//     node at most one recording per key it owns, never a hang.
//   - The owner knows what it recorded, fetched or was published, and what
//     is in its own store on disk. A Definition that only a node other than
//     the owner has on disk (from an earlier run with other nodes) is not
//     found: it is recorded again, once, and is then served.
//   - Every node must be given the same node list (the driver's placement
//     does that); two lists give two owners, and a key is then recorded at
//     most once per list.
//
// # Never trust the wire
//
// An image travels with its content hash and format version. The asker's
// store checks the bytes against the hash, decodes the image's host part
// (stages.DecodeDefinitionHost: magic, format version, its own content
// hash, section table) and its full_key against the one asked for; an image
// that fails is rejected, counted (fetch_rejected), warned about and
// recorded locally. The owner checks a Published image the same way before
// it serves it. None of that proves the image right: its sender made its
// hash, and a Definition with extra fanin edges decodes, keeps the pass's
// digest and runs slower. What proves it is a signature: the node that
// records a Definition signs (full_key, content hash, format version) with
// its TLS key (package peer/defsig), and the asker replays the image
// without recording it (actors.FetchResult.Trusted) only when that
// signature verifies against a recorder certificate of the cluster's CA,
// valid now and not revoked. An image that fails (unsigned, a stranger's,
// revoked, expired, or a signature over other bytes) is dropped, refused
// (Config.OnRefused) and recorded here, or, with Config.RefuseUnsigned,
// fails the pass. Without TLS there is nothing to
// verify against: the asker records the Definition once itself and takes
// the image only if the content hashes match, as it does with
// Config.Rerecord for every image; a match is kept in its store, memory
// and disk, like one it recorded. A fetched image whose signature verified
// is kept in the store on disk with its signature beside it, so an owner
// that serves it from there later passes on its recorder's signature
// (verified again: a signer revoked since, or a signature changed on disk,
// is not passed on, and the image goes unsigned). One recorded here has
// none on disk: the owner signs it as it sends it (it vouches for its own
// recordings). An Answer is taken
// only from the node asked: ask ids are random, and the connection must
// speak for the owner's host (its certificate's names, or without TLS its
// IP address).
//
// Images larger than Config.MaxImage are not sent: the asker records them.
// A limit per image is not a limit per gRPC message, though: protoactor
// remote sends whatever is queued for one node as one batch, and the
// receiver refuses a message over gRPC's limit (a node's: its model limit
// and 4 MiB, remote.Transport), which breaks the connection. The images
// answered or published to one node at once must stay under it: DSv4's 8
// are 195 KB in all (34 KB the largest). The peer does not pace its
// messages.
package peer

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/otel/propagation"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// ActorName is the name of a node's peer actor: the cluster reaches it at
// actor.NewPID(address, ActorName).
const ActorName = "hbg-peer"

// Defaults of Config.
const (
	DefaultAskTimeout     = 10 * time.Second
	DefaultClaimTimeout   = 5 * time.Second
	DefaultRebuildTimeout = 2 * time.Second
	DefaultMaxImage       = 2 << 20
	DefaultMaxHeld        = 256 << 20
)

// Config configures a node's peer.
type Config struct {
	// Disk, when set, is this node's store on disk, which the node serves
	// from too (also settable later: Node.SetDisk); else StoreDir, when
	// set and not "off", names it (opened with StoreMax).
	Disk     *diskstore.Store
	StoreDir string
	StoreMax int64
	// AskTimeout bounds a request for a key (default DefaultAskTimeout):
	// past it, the node records the key itself. It should exceed
	// ClaimTimeout, so that a waiter is granted a dead holder's claim
	// before it gives up.
	AskTimeout time.Duration
	// ClaimTimeout is how long a node may hold a key's claim before the
	// owner passes it to the next waiter (default DefaultClaimTimeout).
	ClaimTimeout time.Duration
	// RebuildTimeout bounds a cluster owner's rebuild on activation, at
	// most ClaimTimeout and a quarter of AskTimeout (default
	// DefaultRebuildTimeout): a member that does not answer within it is
	// taken to hold nothing, and the key may be recorded once more.
	RebuildTimeout time.Duration
	// MaxImage is the largest image sent (default DefaultMaxImage).
	MaxImage int
	// MaxHeld bounds the bytes of images the node keeps in memory to serve
	// (default DefaultMaxHeld); past it the least recently served go.
	MaxHeld int64
	// Tracer makes the peer_serve spans; nil traces nothing.
	Tracer *trace.Tracer
	// Signer signs the images this node records or serves from its own
	// store (nil: it signs nothing; its peers record what it sends).
	// Verifier checks the signatures of images from peers: an image whose
	// signature verifies is replayed without recording it here
	// (actors.FetchResult.Trusted); any other is dropped and recorded here.
	// Nil Verifier (no TLS): no image from a peer is trusted, each is
	// checked by recording it here (stages.Store.FetchCheck).
	Signer   *defsig.Signer
	Verifier *defsig.Verifier
	// Rerecord (the paranoid's flag) checks even a well-signed image by
	// recording it here once and comparing content hashes.
	Rerecord bool
	// RefuseUnsigned fails a request whose fetched image's signature does
	// not verify (ErrRefusedImage, the pass fails saying why) instead of
	// recording the Definition here: for a node that must replay only what
	// a recorder of the cluster vouched for. It needs a Verifier.
	RefuseUnsigned bool
	// OnRefused, if set, hears every message the node refused (from
	// the node's actor: it must not block).
	OnRefused func(Refused)

	// Cluster, when set, makes the node a member of a protoactor cluster
	// (membership from etcd: package remote): a key's owner is then a
	// virtual actor of kind OwnerKind found through the cluster, not the
	// ring over a node list (owner.go). The cluster's remote must be the
	// one sys runs, and the node must be started before the cluster's
	// provider, to hear its first topology.
	Cluster *cluster.Cluster
	// MaxOwners bounds the owners this node keeps active in a cluster
	// (default DefaultMaxOwners).
	MaxOwners int

	// owner replaces Owner in tests that need a key's owner to be a
	// given node.
	owner func(fullKey uint64) string
}

// Refused is a message a node refused: a Publish or Abandon not from the
// key's claim holder, an Answer not from the node asked, a Publish of a
// bad image.
type Refused struct {
	What    string
	FullKey uint64
	// From is the sender's PID address (what it claims); Conn and Names
	// the connection it came over (its remote address, its certificate's
	// names).
	From, Conn string
	Names      []string
	Why        string
	// Count is the node's refusals so far.
	Count int
}

func (r Refused) String() string {
	return fmt.Sprintf("refused a %s of %016x from %s (connection %s %v): %s (%d refused so far)", r.What, r.FullKey, r.From, r.Conn, r.Names, r.Why, r.Count)
}

// view is a cluster as one node sees it: its own address and every
// node's, itself among them.
type view struct {
	self  string
	nodes []string
}

// ownerOf is the owner of fullKey in v.
func (c *Config) ownerOf(v view, fullKey uint64) string {
	if c.owner != nil {
		return c.owner(fullKey)
	}
	return Owner(fullKey, v.nodes)
}

// Owner is the node that owns fullKey among nodes: the highest rendezvous
// score, hash(node, full_key), ties to the lower address.
func Owner(fullKey uint64, nodes []string) string {
	var best string
	var bestScore uint64
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], fullKey)
	for i, n := range nodes {
		d := xxhash.New()
		_, _ = d.WriteString(n)
		_, _ = d.Write(b[:])
		s := d.Sum64()
		if i == 0 || s > bestScore || (s == bestScore && n < best) {
			best, bestScore = n, s
		}
	}
	return best
}

// Node is one node's peer: its actor serves the keys it owns to the
// cluster and asks the owners of the keys its store misses.
type Node struct {
	sys    *actor.ActorSystem
	pid    *actor.PID
	owners *owners
}

// Start spawns the node's peer actor (named ActorName) in sys, which must
// run protoactor remote for other nodes to reach it. One node serves any
// number of clusters (Cluster): a key's owner, claim and image do not
// depend on which.
func Start(sys *actor.ActorSystem, cfg Config) (*Node, error) {
	if cfg.AskTimeout == 0 {
		cfg.AskTimeout = DefaultAskTimeout
	}
	if cfg.ClaimTimeout == 0 {
		cfg.ClaimTimeout = DefaultClaimTimeout
	}
	if cfg.RebuildTimeout == 0 {
		cfg.RebuildTimeout = DefaultRebuildTimeout
	}
	if cfg.MaxImage == 0 {
		cfg.MaxImage = DefaultMaxImage
	}
	if cfg.MaxHeld == 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	if cfg.MaxOwners <= 0 {
		cfg.MaxOwners = DefaultMaxOwners
	}
	if cfg.AskTimeout < 0 || cfg.ClaimTimeout < 0 || cfg.RebuildTimeout < 0 || cfg.MaxImage < 0 || cfg.MaxHeld < 0 {
		return nil, fmt.Errorf("peer: ask timeout %v, claim timeout %v, image limit %d, held limit %d: want positive values", cfg.AskTimeout, cfg.ClaimTimeout, cfg.MaxImage, cfg.MaxHeld)
	}
	if cfg.Tracer == nil {
		cfg.Tracer = trace.NewTracer(nil)
	}
	if cfg.Disk == nil && cfg.StoreDir != "" && cfg.StoreDir != "off" {
		d, err := diskstore.Open(cfg.StoreDir, cfg.StoreMax)
		if err != nil {
			return nil, fmt.Errorf("peer: %w", err)
		}
		cfg.Disk = d
	}
	var o *owners
	if cfg.Cluster != nil {
		var err error
		oc := cfg
		oc.Disk, oc.StoreDir = nil, ""
		o, err = startOwners(cfg.Cluster, cfg, func(fk uint64) *actor.Props {
			return actor.PropsFromProducer(func() actor.Actor { return newOwner(oc, fk, o.addrs) })
		})
		if err != nil {
			return nil, err
		}
	}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		s := newServer(cfg)
		s.owners = o
		return s
	}), ActorName)
	if err != nil {
		if o != nil {
			o.stop()
		}
		return nil, fmt.Errorf("peer: spawning %s: %w", ActorName, err)
	}
	return &Node{sys: sys, pid: pid, owners: o}, nil
}

// Cluster is the node's DefinitionSource for a cluster: self is this
// node's address as the cluster names it (host:port), nodes every node's,
// self among them; every node of the cluster must be given the same list,
// in any order.
func (n *Node) Cluster(self string, nodes []string) (actors.DefinitionSource, error) {
	if !slices.Contains(nodes, self) {
		return nil, fmt.Errorf("peer: this node %q is not in the node list %q", self, nodes)
	}
	return &source{n: n, v: view{self: self, nodes: slices.Clone(nodes)}}, nil
}

// source is a Node's DefinitionSource for one cluster.
type source struct {
	n *Node
	v view
}

// Fetch implements actors.DefinitionSource.
func (s *source) Fetch(req actors.FetchRequest, done func(actors.FetchResult)) {
	s.n.sys.Root.Send(s.n.pid, &localAsk{v: s.v, req: req, done: done})
}

// Recorded implements actors.DefinitionSource.
func (s *source) Recorded(req actors.FetchRequest, image []byte) {
	s.n.sys.Root.Send(s.n.pid, &localRecorded{v: s.v, req: req, image: image})
}

// Source is the node's DefinitionSource in its cluster (Config.Cluster):
// the owners are the cluster's, whatever node list a placement names.
func (n *Node) Source() actors.DefinitionSource {
	return &source{n: n, v: view{self: n.sys.Address()}}
}

// SetDisk makes the node serve from a store on disk as well (the
// runtime's, actors.Runtime.Disk, opened after the node started).
func (n *Node) SetDisk(d *diskstore.Store) {
	n.sys.Root.Send(n.pid, &setDisk{disk: d})
}

// Stop stops the node's actor; asks still open are answered "record".
func (n *Node) Stop() {
	_ = n.sys.Root.StopFuture(n.pid).Wait()
	if n.owners != nil {
		n.owners.stop()
	}
}

var _ actors.DefinitionSource = (*source)(nil)

// traceMap carries a span context across the wire (W3C trace context).
func traceMap(c trace.Carrier) map[string]string {
	if !c.IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(c.Context(context.Background()), m)
	return m
}

func traceContext(m map[string]string) context.Context {
	return propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(m))
}

// checkImage is what a node checks of an image from the wire before it
// keeps or serves it (the asker's store checks it again before use).
func checkImage(fullKey uint64, img *Image) error {
	if img == nil {
		return fmt.Errorf("no image")
	}
	if img.FormatVersion != stages.DefinitionVersion {
		return fmt.Errorf("image format version %d, this hbg reads %d", img.FormatVersion, stages.DefinitionVersion)
	}
	if h := stages.DefinitionHash(img.Image); h != img.ContentHash {
		return fmt.Errorf("%d bytes hash to %016x, sent as %016x", len(img.Image), h, img.ContentHash)
	}
	def, _, err := stages.DecodeDefinitionHost(img.Image)
	if err != nil {
		return err
	}
	if def.FullKey != fullKey {
		return fmt.Errorf("image is full_key %016x, want %016x", def.FullKey, fullKey)
	}
	return nil
}

// sigOf is an image's signature as it travels.
func sigOf(img *Image) defsig.Signature {
	return defsig.Signature{Sig: img.GetSignature(), Cert: img.GetSignerCert()}
}

// verifySig checks an image's signature over the content hash of the bytes
// it came with (checkImage has checked that hash against the bytes).
func (c *Config) verifySig(fullKey uint64, img *Image) error {
	if c.Verifier == nil {
		return fmt.Errorf("%w (this node has no TLS: no cluster CA to check a signature against)", defsig.ErrUntrusted)
	}
	_, err := c.Verifier.Verify(fullKey, stages.DefinitionHash(img.GetImage()), uint16(img.GetFormatVersion()), sigOf(img))
	return err
}
