package peer

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/authn"
	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// Messages inside the process, never on the wire.
type (
	localAsk struct {
		v    view
		req  actors.FetchRequest
		done func(actors.FetchResult)
	}
	localRecorded struct {
		v     view
		req   actors.FetchRequest
		image []byte
	}
	setDisk      struct{ disk *diskstore.Store }
	askTimeout   struct{ id uint64 }
	claimTimeout struct {
		fullKey uint64
		gen     int
	}
	// claimQuery asks how many asks wait for a key's claim (-1: no
	// claim), for tests that need an ask queued before they go on.
	claimQuery struct{ fullKey uint64 }
	// grantQuery asks where this node would publish a key it holds the
	// claim of ("": it holds none), for tests of an owner's rebuild.
	grantQuery struct{ fullKey uint64 }
)

// server is a node's peer actor: the owner's side (held images, claims and
// their waiters) and the asker's (its open asks).
type server struct {
	cfg  Config
	disk *diskstore.Store
	// images is what this node holds for the cluster, recorded here or
	// Published to it as an owner, within Config.MaxHeld bytes.
	images *heldImages
	claims map[uint64]*claim
	asks   map[uint64]*ask
	// refused counts the Publishes, Abandons and Answers refused.
	refused int
	// granted is the keys whose claim another node's owner granted this
	// one: only these are published or abandoned to their owner (a key
	// recorded after a refusal or a timeout is this node's own).
	granted map[uint64]*actor.PID
	// owners finds keys' owners in a cluster (Config.Cluster; nil: the
	// ring over the node list).
	owners *owners
	// watched is the nodes whose peer actor this one watches, by address:
	// an owner asked, a remote claim holder.
	watched map[string]bool
}

type held struct {
	image []byte
	hash  uint64
	from  string
	// local: this node recorded it or read it from its own store on disk;
	// else a peer published it, and whoever takes it checks it first.
	local bool
	// sig is the recorder's signature (empty until this node signs its own
	// image, or when the publisher's did not verify).
	sig defsig.Signature
	// vouched: this node signs the image for its peers when sig is empty
	// (false for one from its store on disk whose kept signature no longer
	// verifies: Config.storedSig).
	vouched bool
}

// ask is one of this node's requests, open until answered.
type ask struct {
	id    uint64
	req   actors.FetchRequest
	done  func(actors.FetchResult)
	owner string
	// pid is the owner asked (nil: none yet, its lookup under way), tries
	// the lookups so far (a cluster's owner that stops is looked up again).
	pid   *actor.PID
	tries int
	timer *time.Timer
}

// claim is a key being recorded somewhere in the cluster, at its owner.
type claim struct {
	holder  waiter
	gen     int
	timer   *time.Timer
	waiters []waiter
	key     string
}

// waiter is an asker at the owner: another node's peer actor (addr is its
// address), its ask id and the connection the ask came over (ident,
// authn.Conn.Identity: granted the claim, only that connection may
// publish or abandon it), or an ask of this node (pid nil, addr "").
type waiter struct {
	pid   *actor.PID
	id    uint64
	addr  string
	ident string
}

func newServer(cfg Config) *server {
	return &server{cfg: cfg, disk: cfg.Disk, images: newHeldImages(cfg.MaxHeld), claims: map[uint64]*claim{}, asks: map[uint64]*ask{}, watched: map[string]bool{}, granted: map[uint64]*actor.PID{}}
}

func (s *server) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *localAsk:
		if s.owners != nil {
			s.clusterAsk(ctx, m)
		} else {
			s.localAsk(ctx, m)
		}
	case *ownerFound:
		s.ownerFound(ctx, m)
	case *localRecorded:
		s.localRecorded(ctx, m)
	case *Ask:
		if s.owners != nil {
			s.holderAsk(ctx, m)
		} else {
			s.remoteAsk(ctx, m)
		}
	case *Answer:
		s.answered(ctx, m)
	case *Publish:
		if from := ctx.Sender(); from != nil && s.fromHolder(ctx, m.FullKey, from, "Publish") {
			s.published(ctx, m.FullKey, m.Image, from, from.Address)
		}
	case *Abandon:
		if from := ctx.Sender(); from != nil && s.fromHolder(ctx, m.FullKey, from, "Abandon") {
			s.abandoned(ctx, m.FullKey, from.Address)
		}
	case *askTimeout:
		if a := s.take(m.id); a != nil {
			w := fmt.Sprintf("no answer from node %s, the key's owner, within %v: recorded here", a.owner, s.cfg.AskTimeout)
			if a.owner == "" {
				w = fmt.Sprintf("the cluster placed no owner of the key within %v: recorded here", s.cfg.AskTimeout)
			}
			a.done(actors.FetchResult{Peer: a.owner, Outcome: "fallback", Warning: w})
		}
	case *claimTimeout:
		if c := s.claims[m.fullKey]; c != nil && c.gen == m.gen {
			s.passClaim(ctx, m.fullKey)
		}
	case *actor.Terminated:
		if s.owners != nil {
			s.ownerGone(ctx, m.Who)
		} else {
			s.terminated(ctx, m.Who.Address)
		}
	case *setDisk:
		s.disk = m.disk
	case *grantQuery:
		to := ""
		if p := s.granted[m.fullKey]; p != nil {
			to = p.Address
		}
		ctx.Respond(to)
	case *claimQuery:
		n := -1
		if c := s.claims[m.fullKey]; c != nil {
			n = len(c.waiters)
		}
		ctx.Respond(n)
	case *actor.Stopping:
		for id, a := range s.asks {
			delete(s.asks, id)
			a.timer.Stop()
			a.done(actors.FetchResult{Peer: a.owner, Outcome: "fallback", Warning: "the node is stopping: recorded here"})
		}
	}
}

// localAsk is this node's store missing a key.
func (s *server) localAsk(ctx actor.Context, m *localAsk) {
	owner := s.cfg.ownerOf(m.v, m.req.FullKey)
	a := &ask{id: s.newAskID(), req: m.req, done: m.done, owner: owner}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.timer = time.AfterFunc(s.cfg.AskTimeout, func() { root.Send(self, &askTimeout{id: a.id}) })
	s.asks[a.id] = a
	if owner == m.v.self {
		s.serve(ctx, waiter{id: a.id}, m.req.FullKey, m.req.Key, m.req.Model)
		return
	}
	pid := actor.NewPID(owner, ActorName)
	a.pid = pid
	s.watch(ctx, pid)
	ctx.Request(pid, &Ask{Id: a.id, FullKey: m.req.FullKey, Key: m.req.Key, Model: m.req.Model, Trace: traceMap(m.req.Trace)})
}

// remoteAsk is another node asking this one, the key's owner.
func (s *server) remoteAsk(ctx actor.Context, m *Ask) {
	from := ctx.Sender()
	if from == nil {
		return // nowhere to answer
	}
	info := trace.PeerFetchInfo{Key: m.Key, FullKey: m.FullKey, Actor: ActorName}
	_, span := s.cfg.Tracer.StartPeerServe(traceContext(m.Trace), info, from.Address)
	outcome := s.serve(ctx, waiter{pid: from, id: m.Id, addr: from.Address, ident: authn.Of(ctx).Identity()}, m.FullKey, m.Key, m.Model)
	span.SetAttributes(trace.KeyPeerOutcome.String(outcome))
	span.End()
}

// serve answers an ask at the key's owner: the image, the claim, or a
// place in the claim's queue. It returns which.
func (s *server) serve(ctx actor.Context, w waiter, fullKey uint64, key, model string) string {
	if h, ok := s.lookup(fullKey, model); ok {
		s.sendImage(ctx, w, fullKey, h)
		return "image"
	}
	if c := s.claims[fullKey]; c != nil {
		c.waiters = append(c.waiters, w)
		return "wait"
	}
	c := &claim{key: key}
	s.claims[fullKey] = c
	s.grant(ctx, fullKey, c, w)
	return "record"
}

// lookup finds an image this node holds, in memory or on disk.
func (s *server) lookup(fullKey uint64, model string) (held, bool) {
	if h, ok := s.images.get(fullKey); ok {
		return h, true
	}
	if s.disk == nil {
		return held{}, false
	}
	l, err := s.disk.Load(fullKey, model)
	if l == nil || err != nil {
		return held{}, false
	}
	// Read and verified: the bytes are ours, the entry need not stay pinned.
	s.disk.Unpin(fullKey)
	h := held{image: l.Image, hash: l.Def.ContentHash, from: "this node's store on disk", local: true}
	h.sig, h.vouched = s.cfg.storedSig(fullKey, l)
	s.images.put(fullKey, h)
	return h, true
}

func (s *server) grant(ctx actor.Context, fullKey uint64, c *claim, w waiter) {
	s.hold(ctx, fullKey, c, w)
	if w.pid == nil {
		if a := s.take(w.id); a != nil {
			a.done(actors.FetchResult{Peer: a.owner, Outcome: "record"})
		}
		return
	}
	ctx.Send(w.pid, &Answer{Id: w.id, FullKey: fullKey, Result: &Answer_Grant{Grant: &Grant{}}})
}

// hold makes w the holder of fullKey's claim c, for at most ClaimTimeout,
// watching it.
func (s *server) hold(ctx actor.Context, fullKey uint64, c *claim, w waiter) {
	c.holder = w
	c.gen++
	if c.timer != nil {
		c.timer.Stop()
	}
	self, root, gen := ctx.Self(), ctx.ActorSystem().Root, c.gen
	c.timer = time.AfterFunc(s.cfg.ClaimTimeout, func() { root.Send(self, &claimTimeout{fullKey: fullKey, gen: gen}) })
	if w.pid != nil {
		s.watch(ctx, w.pid)
	}
}

func (s *server) sendImage(ctx actor.Context, w waiter, fullKey uint64, h held) {
	if w.pid == nil {
		if a := s.take(w.id); a != nil {
			// The signature goes with it to this node's store: one another
			// node published (verified as it came) stays its recorder's.
			a.done(actors.FetchResult{Image: h.image, Hash: h.hash, Peer: h.from, Outcome: "image", Trusted: h.local || (!s.cfg.Rerecord && !h.sig.Empty()),
				Signature: h.sig.Encode()})
		}
		return
	}
	if h.local && h.vouched && h.sig.Empty() && s.cfg.Signer != nil {
		// This node's own image (recorded here, or from its own store):
		// it vouches for the bytes it serves.
		if sig, err := s.cfg.Signer.Sign(fullKey, h.hash, stages.DefinitionVersion); err == nil {
			h.sig = sig
			s.images.put(fullKey, h)
		}
	}
	if len(h.image) > s.cfg.MaxImage {
		s.answer(ctx, w.pid, &Answer{Id: w.id, FullKey: fullKey, Result: &Answer_Refusal{Refusal: &Refusal{
			Reason: fmt.Sprintf("its image is %d bytes, over the %d-byte limit for one message", len(h.image), s.cfg.MaxImage)}}})
		return
	}
	s.answer(ctx, w.pid, &Answer{Id: w.id, FullKey: fullKey, Result: &Answer_Image{Image: &Image{
		Image: h.image, ContentHash: h.hash, FormatVersion: stages.DefinitionVersion, Signature: h.sig.Sig, SignerCert: h.sig.Cert}}})
}

// passClaim gives a key's claim to its next waiter still waiting, or
// drops it when none is.
func (s *server) passClaim(ctx actor.Context, fullKey uint64) {
	c := s.claims[fullKey]
	for len(c.waiters) > 0 {
		w := c.waiters[0]
		c.waiters = c.waiters[1:]
		if w.pid == nil && s.asks[w.id] == nil {
			continue // this node's ask gave up waiting: it records already
		}
		s.grant(ctx, fullKey, c, w)
		return
	}
	c.timer.Stop()
	delete(s.claims, fullKey)
}

// answered is an owner's Answer to one of this node's asks: taken only
// from the node asked (its ask id is not guessable, and the connection
// must speak for the owner's host).
func (s *server) answered(ctx actor.Context, m *Answer) {
	a := s.asks[m.Id]
	if a == nil {
		return // gave up waiting: it records already
	}
	if from := ctx.Sender(); (from != nil && from.Address != a.owner) || !vouches(authn.Of(ctx), a.owner) {
		s.refuse("Answer", m.FullKey, ctx, "not from the node asked, "+a.owner)
		return
	}
	s.take(m.Id)
	switch r := m.Result.(type) {
	case *Answer_Image:
		s.fetchedImage(ctx, a, r.Image)
	case *Answer_Grant:
		s.granted[a.req.FullKey] = a.pid
		a.done(actors.FetchResult{Peer: a.owner, Outcome: "record"})
	case *Answer_Refusal:
		a.done(actors.FetchResult{Peer: a.owner, Outcome: "fallback",
			Warning: fmt.Sprintf("node %s, the key's owner, refused it: %s; recorded here", a.owner, r.Refusal.GetReason())})
	default:
		a.done(actors.FetchResult{Peer: a.owner, Outcome: "fallback",
			Warning: fmt.Sprintf("node %s, the key's owner, answered nothing usable; recorded here", a.owner)})
	}
}

// fetchedImage is an owner's image for one of this node's asks: replayed
// as it came when its recorder's signature verifies (unless
// Config.Rerecord), its signature kept with it in the store; with no TLS,
// checked by recording it here; otherwise dropped, counted and recorded
// here (or the request failed, Config.RefuseUnsigned): a stranger's, an
// expired or revoked certificate's, an unsigned image or a signature over
// other bytes is never replayed.
func (s *server) fetchedImage(ctx actor.Context, a *ask, img *Image) {
	fk := a.req.FullKey
	if err := checkImage(fk, img); err != nil {
		// The store checks again and counts it rejected.
		a.done(actors.FetchResult{Image: img.GetImage(), Hash: img.GetContentHash(), Peer: a.owner, Outcome: "image"})
		return
	}
	if s.cfg.Verifier == nil {
		s.keepFetched(fk, img, a.owner)
		a.done(actors.FetchResult{Image: img.GetImage(), Hash: img.GetContentHash(), Peer: a.owner, Outcome: "image"})
		return
	}
	if err := s.cfg.verifySig(fk, img); err != nil {
		s.refuse("signed image", fk, ctx, err.Error())
		a.done(s.cfg.refusedResult(a.owner, err))
		return
	}
	s.keepFetched(fk, img, a.owner)
	a.done(actors.FetchResult{Image: img.GetImage(), Hash: img.GetContentHash(), Peer: a.owner, Outcome: "image", Trusted: !s.cfg.Rerecord,
		Signature: sigOf(img).Encode()})
}

// localRecorded is this node's recording of a key it asked for: kept and
// served here when this node owns the key, else Published to its owner.
func (s *server) localRecorded(ctx actor.Context, m *localRecorded) {
	fk := m.req.FullKey
	if s.owners != nil {
		s.clusterRecorded(ctx, m)
		return
	}
	owner := s.cfg.ownerOf(m.v, fk)
	if m.image == nil {
		if owner == m.v.self {
			s.abandoned(ctx, fk, "")
		} else if s.granted[fk] != nil {
			delete(s.granted, fk)
			ctx.Request(actor.NewPID(owner, ActorName), &Abandon{FullKey: fk, Reason: "its recording failed"})
		}
		return
	}
	img := &Image{Image: m.image, ContentHash: stages.DefinitionHash(m.image), FormatVersion: stages.DefinitionVersion}
	if s.cfg.Signer != nil {
		if sig, err := s.cfg.Signer.Sign(fk, img.ContentHash, stages.DefinitionVersion); err == nil {
			img.Signature, img.SignerCert = sig.Sig, sig.Cert
		}
	}
	if owner == m.v.self {
		s.published(ctx, fk, img, nil, m.v.self)
		return
	}
	if s.granted[fk] == nil {
		return // not the cluster's recording: the owner would refuse it
	}
	delete(s.granted, fk)
	if len(m.image) > s.cfg.MaxImage {
		ctx.Request(actor.NewPID(owner, ActorName), &Abandon{FullKey: fk, Reason: "its image is over the size limit for one message"})
		return
	}
	// Request, not Send: the owner sees who published.
	ctx.Request(actor.NewPID(owner, ActorName), &Publish{FullKey: fk, Image: img})
}

// published is a key's image arriving at its owner (from the recorder at
// addr, or this node's own recording: from nil): checked, kept, and sent to
// every waiter.
func (s *server) published(ctx actor.Context, fullKey uint64, img *Image, from *actor.PID, addr string) {
	if s.images.has(fullKey) {
		return
	}
	if err := checkImage(fullKey, img); err != nil {
		// Not served: the claim goes on as if the holder had abandoned it.
		if from != nil {
			s.refuse("Publish", fullKey, ctx, "its image is bad: "+err.Error())
		}
		s.abandoned(ctx, fullKey, holderAddr(from))
		return
	}
	h := held{image: img.Image, hash: img.ContentHash, from: addr, local: from == nil, sig: sigOf(img), vouched: from == nil}
	if from != nil && s.cfg.Verifier != nil {
		// A published image is served only with its recorder's signature:
		// one that does not verify is refused like a bad image.
		if err := s.cfg.verifySig(fullKey, img); err != nil {
			s.refuse("Publish", fullKey, ctx, "its signature is refused: "+err.Error())
			s.abandoned(ctx, fullKey, holderAddr(from))
			return
		}
	} else if from != nil {
		h.sig = defsig.Signature{} // nothing to check it against: not vouched for
	}
	s.images.put(fullKey, h)
	c := s.claims[fullKey]
	if c == nil {
		return
	}
	c.timer.Stop()
	delete(s.claims, fullKey)
	for _, w := range c.waiters {
		s.sendImage(ctx, w, fullKey, h)
	}
}

func holderAddr(from *actor.PID) string {
	if from == nil {
		return ""
	}
	return from.Address
}

// abandoned passes a claim on when its holder (at addr; "" for this node)
// gave it up.
func (s *server) abandoned(ctx actor.Context, fullKey uint64, addr string) {
	if c := s.claims[fullKey]; c != nil && c.holder.addr == addr {
		s.passClaim(ctx, fullKey)
	}
}

// terminated is a node's endpoint gone: its claims pass on, its places in
// queues are dropped, and this node's asks to it record here.
func (s *server) terminated(ctx actor.Context, addr string) {
	delete(s.watched, addr)
	for fk, c := range s.claims {
		c.waiters = deleteAddr(c.waiters, addr)
		if c.holder.addr == addr {
			s.passClaim(ctx, fk)
		}
	}
	for id, a := range s.asks {
		if a.owner == addr {
			s.take(id)
			a.done(actors.FetchResult{Peer: addr, Outcome: "fallback",
				Warning: fmt.Sprintf("node %s, the key's owner, is unreachable: recorded here", addr)})
		}
	}
}

func deleteAddr(ws []waiter, addr string) []waiter {
	out := ws[:0]
	for _, w := range ws {
		if w.addr != addr {
			out = append(out, w)
		}
	}
	return out
}

// take removes an open ask and stops its timer; nil when it is not open.
func (s *server) take(id uint64) *ask {
	a := s.asks[id]
	if a == nil {
		return nil
	}
	delete(s.asks, id)
	a.timer.Stop()
	return a
}

// fromHolder says whether a Publish or Abandon of fullKey came from the
// key's current claim holder: the peer actor granted it, over the
// connection its ask came over. Anything else is refused and counted.
func (s *server) fromHolder(ctx actor.Context, fullKey uint64, from *actor.PID, what string) bool {
	c := s.claims[fullKey]
	switch {
	case c == nil:
		s.refuse(what, fullKey, ctx, "no claim of the key is held")
	case c.holder.pid == nil || c.holder.addr != from.Address:
		s.refuse(what, fullKey, ctx, "the sender does not hold the key's claim")
	case c.holder.ident != authn.Of(ctx).Identity():
		s.refuse(what, fullKey, ctx, "it came over another connection than the claim holder's ask")
	default:
		return true
	}
	return false
}

// refuse counts a message refused and says so (Config.OnRefused).
func (s *server) refuse(what string, fullKey uint64, ctx actor.Context, why string) {
	s.refused++
	if f := s.cfg.OnRefused; f != nil {
		from := "an unknown sender"
		if p := ctx.Sender(); p != nil {
			from = p.Address
		}
		c := authn.Of(ctx)
		f(Refused{What: what, FullKey: fullKey, From: from, Conn: c.Addr, Names: c.Names, Why: why, Count: s.refused})
	}
}

// vouches says whether a message's connection speaks for the node at
// addr (authn.Conn.Vouches); a message from this process, or over a remote
// without the stamp, has nothing to check.
func vouches(c authn.Conn, addr string) bool {
	if !c.Remote() {
		return true
	}
	h, _, err := net.SplitHostPort(addr)
	return err == nil && c.Vouches(h)
}

// newAskID is an ask's id: random, so that only the node asked (which
// sees it) can answer the ask.
func (s *server) newAskID() uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := binary.LittleEndian.Uint64(b[:])
		if id != 0 && s.asks[id] == nil {
			return id
		}
	}
}

func (s *server) watch(ctx actor.Context, pid *actor.PID) {
	if !s.watched[pid.Address] {
		s.watched[pid.Address] = true
		ctx.Watch(pid)
	}
}
