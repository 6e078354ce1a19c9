package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// DefinitionSource is where the store looks for a Definition it misses,
// after its store on disk and before recording it: the other nodes of a
// cluster (package peer implements it). The store never waits for it: Fetch
// answers through a callback, which the store turns into a message to
// itself, as it does with every other answer.
type DefinitionSource interface {
	// Fetch asks for req's Definition and calls done exactly once, from any
	// goroutine, with its image or with the answer to record it here. It
	// must not block, and it must answer in bounded time (a source that
	// cannot reach its peers answers "record" with a warning).
	Fetch(req FetchRequest, done func(FetchResult))
	// Recorded follows a Fetch that answered "record": this process
	// recorded and built req's Definition (image is its flat image), or
	// failed to (image nil). The source then serves the image to the
	// cluster, or lets another node record it.
	Recorded(req FetchRequest, image []byte)
}

// FetchRequest names a Definition to a DefinitionSource.
type FetchRequest struct {
	FullKey uint64
	// Key is the graph key and Model the orchestration identity, for the
	// source's messages and spans; full_key alone identifies the
	// Definition.
	Key   string
	Model string
	// Trace is the request's peer_fetch span.
	Trace trace.Carrier
}

// FetchResult is a DefinitionSource's answer.
type FetchResult struct {
	// Image is the Definition's flat image as another node stores it
	// (stages.EncodeDefinition), nil when this process is to record it.
	// The store verifies it before use and records in its place an image
	// that fails.
	Image []byte
	// Hash is the content hash the image came with.
	Hash uint64
	// Peer is the node that answered (host:port), "" when none did.
	Peer string
	// Outcome says how the request ended, for its span: "image", "record"
	// (this process is the cluster's recorder of the key), "fallback" (no
	// agreement could be reached in time: recorded here, with Warning).
	Outcome string
	// Warning, when set, goes into the pass's warnings.
	Warning string
	// Trusted says the image may be kept as it came: it is this node's
	// own (from its store on disk), or the operator trusts every peer
	// (hbgrun node --trust-peers). Otherwise the store records the
	// Definition here once and keeps the image only if its content hash
	// is the recording's.
	Trusted bool
}

// fetched is a DefinitionSource's answer, back at the store.
type fetched struct {
	job  *mailbox.RecordJob
	res  FetchResult
	span trace.PeerFetchSpan
	t0   int64
}

// fetch asks Config.Peers for job's Definition, whose key the caller has
// marked in flight; false when there is nowhere to ask (no peers, or a key
// salted per pass, which no other process can have).
func (s *store) fetch(ctx actor.Context, job *mailbox.RecordJob) bool {
	if s.peers == nil || job.StoreKey != job.FullKey {
		return false
	}
	spanCtx, span := s.disk.tracer.StartPeerFetch(job.Trace.Context(context.Background()),
		trace.PeerFetchInfo{Key: job.Key, FullKey: job.FullKey, Actor: "store"})
	self, root := ctx.Self(), ctx.ActorSystem().Root
	t0 := trace.Now()
	s.peers.Fetch(fetchRequest(job, trace.Inject(spanCtx)), func(r FetchResult) {
		root.Send(self, &fetched{job: job, res: r, span: span, t0: t0})
	})
	return true
}

func fetchRequest(job *mailbox.RecordJob, tr trace.Carrier) FetchRequest {
	return FetchRequest{FullKey: job.FullKey, Key: job.Key, Model: job.Model, Trace: tr}
}

// fetchDone takes the source's answer: a verified image is published like
// a recording (kept in memory and on disk, sent to every request waiting
// for the key); anything else records the Definition here.
func (s *store) fetchDone(ctx actor.Context, m *fetched) {
	job, r := m.job, m.res
	note := mailbox.PeerFetch{Asked: 1, Ns: trace.Now() - m.t0}
	if r.Warning != "" {
		note.Warnings = append(note.Warnings, fmt.Sprintf("graph %q: %s", job.Key, r.Warning))
	}
	if r.Image == nil {
		m.span.Finish(r.Peer, r.Outcome, 0, nil)
		s.fetchNotes[job.StoreKey] = note
		s.enqueue(ctx, job)
		return
	}
	d, err := verifyFetched(job, r)
	if err != nil {
		m.span.Finish(r.Peer, "rejected", int64(len(r.Image)), err)
		s.stats.FetchRejected.Add(1)
		note.Rejected = 1
		note.Warnings = append(note.Warnings, fmt.Sprintf("graph %q: image from peer %s rejected: %v; recorded here", job.Key, r.Peer, err))
		s.fetchNotes[job.StoreKey] = note
		s.enqueue(ctx, job)
		return
	}
	if !r.Trusted {
		s.checkPeer(ctx, m, d, note)
		return
	}
	m.span.Finish(r.Peer, r.Outcome, int64(len(r.Image)), nil)
	s.stats.Fetched.Add(1)
	s.stats.FetchedBytes.Add(int64(len(r.Image)))
	note.Fetched, note.Bytes = 1, int64(len(r.Image))
	s.disk.store(ctx, job, d)
	s.publish(ctx, job.StoreKey, d, func(r *mailbox.DefinitionReady) { r.Fetch = note })
}

// verifyFetched trusts nothing that came over the wire: the bytes must
// hash to the hash they came with, decode as an image of this hbg's format
// version whose own content hash checks, and be the full_key asked for.
func verifyFetched(job *mailbox.RecordJob, r FetchResult) (*mailbox.Definition, error) {
	if h := stages.DefinitionHash(r.Image); h != r.Hash {
		return nil, fmt.Errorf("%d bytes hash to %016x, sent as %016x", len(r.Image), h, r.Hash)
	}
	def, written, err := stages.DecodeDefinitionHost(r.Image)
	if err != nil {
		return nil, err
	}
	if def.FullKey != job.FullKey {
		return nil, fmt.Errorf("image is full_key %016x, asked for %016x", def.FullKey, job.FullKey)
	}
	return &mailbox.Definition{Def: def, Image: r.Image, Hash: def.ContentHash, Written: written}, nil
}

// recordedHere tells the source how a recording it asked for ended.
func (s *store) recordedHere(job *mailbox.RecordJob, image []byte) {
	if s.peers == nil || job.Verify || job.StoreKey != job.FullKey || s.checkedPeer(job) {
		return
	}
	s.peers.Recorded(fetchRequest(job, job.Trace), image)
}

func (s *store) takeFetchNote(key uint64) mailbox.PeerFetch {
	n := s.fetchNotes[key]
	delete(s.fetchNotes, key)
	return n
}

// fetched adds what the cluster did for one Definition to its pass, which
// may not be handed off yet.
func (r *replayActor) fetched(m *mailbox.DefinitionUploaded) {
	f := m.Fetch
	if f.Asked == 0 {
		return
	}
	if run := r.runs[m.Pass]; run != nil {
		run.fetch.Add(f)
		return
	}
	if r.earlyFetch == nil {
		r.earlyFetch = map[uint64]mailbox.PeerFetch{}
	}
	e := r.earlyFetch[m.Pass]
	e.Add(f)
	r.earlyFetch[m.Pass] = e
}

// handoffFetch gives a pass what arrived for it early, and drops what
// arrived for passes cancelled before their handoff.
func (r *replayActor) handoffFetch(run *passRun) {
	id := run.pass.ID
	for p, f := range r.earlyFetch {
		switch {
		case p == id:
			run.fetch.Add(f)
			delete(r.earlyFetch, p)
		case p < id:
			delete(r.earlyFetch, p)
		}
	}
}

// replyFetch puts what the cluster did for the pass into its result.
func replyFetch(run *passRun, res *PassResult) {
	f := &run.fetch
	res.Pass.FetchedDefinitions, res.Pass.FetchedBytes, res.Pass.FetchRejected = f.Fetched, f.Bytes, f.Rejected
	run.ops.Add(trace.OpPeerFetch, int64(f.Asked), f.Ns)
	if len(f.Warnings) > 0 {
		res.Warnings = append(res.Warnings[:len(res.Warnings):len(res.Warnings)], f.Warnings...)
	}
}
