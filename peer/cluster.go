package peer

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/stages"
)

// The node's side of a cluster's owners (Config.Cluster): it asks a key's
// owner, found through the cluster (owners.get), keeps what it records to
// answer an owner's rebuild, and answers an owner's Ask with what it holds
// and never with a claim of its own.

// maxLookups bounds the owners one ask tries: an owner that stops (its
// key moved, its member died) is looked up again, this many times in all.
const maxLookups = 4

// lookupRetry is the pause before looking an owner up again when the
// lookup found none (the placing member died and the topology does not
// say so yet).
const lookupRetry = 100 * time.Millisecond

// ownerFound is an owner lookup's result for an ask.
type ownerFound struct {
	id  uint64
	pid *actor.PID
}

// rebuildTimeout bounds an owner's rebuild: a member that does not answer
// within it is taken to hold nothing.
func (c *Config) rebuildTimeout() time.Duration {
	return min(c.ClaimTimeout, c.AskTimeout/4, c.RebuildTimeout)
}

// clusterAsk is this node's store missing a key, in a cluster: its owner
// is looked up off the actor (the lookup may ask another member).
func (s *server) clusterAsk(ctx actor.Context, m *localAsk) {
	a := &ask{id: s.newAskID(), req: m.req, done: m.done}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.timer = time.AfterFunc(s.cfg.AskTimeout, func() { root.Send(self, &askTimeout{id: a.id}) })
	s.asks[a.id] = a
	s.lookupOwner(ctx, a, 0)
}

// lookupOwner looks a's owner up, after wait.
func (s *server) lookupOwner(ctx actor.Context, a *ask, wait time.Duration) {
	self, root, o, id, fk := ctx.Self(), ctx.ActorSystem().Root, s.owners, a.id, a.req.FullKey
	go func() {
		if wait > 0 {
			time.Sleep(wait)
		}
		root.Send(self, &ownerFound{id: id, pid: o.get(fk)})
	}()
}

func (s *server) ownerFound(ctx actor.Context, m *ownerFound) {
	a := s.asks[m.id]
	if a == nil {
		return // answered meanwhile (gave up waiting)
	}
	if m.pid == nil {
		// Until the ask's own bound, which records it here.
		s.lookupOwner(ctx, a, lookupRetry)
		return
	}
	a.pid, a.owner = m.pid, m.pid.Address
	s.watchPID(ctx, m.pid)
	ctx.Request(m.pid, &Ask{Id: a.id, FullKey: a.req.FullKey, Key: a.req.Key, Model: a.req.Model, Trace: traceMap(a.req.Trace)})
}

// ownerGone is an owner this node asked that stopped (its key moved) or
// whose member is gone: its asks look the owner up again, within
// maxLookups.
func (s *server) ownerGone(ctx actor.Context, who *actor.PID) {
	delete(s.watched, who.String())
	for id, a := range s.asks {
		if a.pid == nil || !a.pid.Equal(who) {
			continue
		}
		s.owners.forget(a.req.FullKey, who)
		// A late answer of the stopped owner is refused: a claim it
		// granted is the new owner's to grant again.
		a.pid, a.owner = nil, ""
		if a.tries++; a.tries >= maxLookups {
			s.take(id)
			a.done(actors.FetchResult{Peer: who.Address, Outcome: "fallback",
				Warning: fmt.Sprintf("the key's owner stopped %d times (last at node %s): recorded here", a.tries, who.Address)})
			continue
		}
		s.lookupOwner(ctx, a, 0)
	}
}

// holderAsk is an owner asking what this node holds of a key (its
// rebuild): the image, or the claim this node holds (granted by an
// activation now gone: it publishes to the asker from now on), or nothing.
func (s *server) holderAsk(ctx actor.Context, m *Ask) {
	from := ctx.Sender()
	if from == nil {
		return
	}
	if h, ok := s.lookup(m.FullKey, m.Model); ok {
		s.sendImage(ctx, waiter{pid: from, id: m.Id, addr: from.Address}, m.FullKey, h)
		return
	}
	if s.granted[m.FullKey] != nil && isOwner(from) {
		s.granted[m.FullKey] = from
		ctx.Request(from, &Answer{Id: m.Id, FullKey: m.FullKey, Result: &Answer_Grant{Grant: &Grant{}}})
		return
	}
	ctx.Request(from, &Answer{Id: m.Id, FullKey: m.FullKey, Result: &Answer_Refusal{Refusal: &Refusal{Reason: "not held here"}}})
}

// isOwner says whether pid names an owner activation (an activator's
// child): only one is told of a claim this node holds, and published to.
func isOwner(pid *actor.PID) bool {
	return strings.HasPrefix(pid.GetId(), ownersName+"/")
}

// answer sends an Answer; a cluster member's (to an owner's rebuild)
// names its sender, whom the owner checks.
func (s *server) answer(ctx actor.Context, to *actor.PID, a *Answer) {
	if s.owners != nil {
		ctx.Request(to, a)
		return
	}
	ctx.Send(to, a)
}

// clusterRecorded is this node's recording of a key, in a cluster: kept
// here (an owner's rebuild finds it) and, when this node holds the key's
// claim, published to the owner that granted it (or abandoned).
func (s *server) clusterRecorded(ctx actor.Context, m *localRecorded) {
	fk := m.req.FullKey
	to := s.granted[fk]
	delete(s.granted, fk)
	if m.image == nil {
		if to != nil {
			ctx.Request(to, &Abandon{FullKey: fk, Reason: "its recording failed"})
		}
		return
	}
	img := &Image{Image: m.image, ContentHash: stages.DefinitionHash(m.image), FormatVersion: stages.DefinitionVersion}
	s.images.put(fk, held{image: m.image, hash: img.ContentHash, from: "this node", local: true})
	if to == nil {
		return // not the cluster's recording
	}
	if len(m.image) > s.cfg.MaxImage {
		ctx.Request(to, &Abandon{FullKey: fk, Reason: "its image is over the size limit for one message"})
		return
	}
	if s.cfg.Signer != nil {
		if sig, err := s.cfg.Signer.Sign(fk, img.ContentHash, stages.DefinitionVersion); err == nil {
			img.Signature, img.SignerCert = sig.Sig, sig.Cert
		}
	}
	ctx.Request(to, &Publish{FullKey: fk, Image: img})
}

// keepFetched keeps a fetched image in a cluster, with its recorder's
// signature, so that an owner's rebuild finds it here after its recorder
// and its owner are gone (whoever takes it checks it as any fetched one).
func (s *server) keepFetched(fullKey uint64, img *Image, from string) {
	if s.owners != nil {
		s.images.put(fullKey, held{image: img.GetImage(), hash: img.GetContentHash(), from: from, sig: sigOf(img)})
	}
}

// watchPID watches one actor (an owner), not its whole node.
func (s *server) watchPID(ctx actor.Context, pid *actor.PID) {
	if k := pid.String(); !s.watched[k] {
		s.watched[k] = true
		ctx.Watch(pid)
	}
}
