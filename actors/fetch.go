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
	// own (from its store on disk), or its recorder's signature verifies
	// (package peer/defsig). Otherwise the store records the Definition
	// here once and takes the image only if its content hash is the
	// recording's (stages.Store.FetchCheck).
	Trusted bool
	// Signature is the recorder's signature that verified (package
	// peer/defsig's encoding), nil for none: the store on disk keeps it
	// beside the image, so that the image is still known signed, and by
	// whom, when it is loaded or served later.
	Signature []byte
	// Err, when set, fails the request instead of recording the
	// Definition here: the source refuses to (an image whose signature
	// did not verify, with peer.Config.RefuseUnsigned).
	Err error
}

// fetched is a DefinitionSource's answer, back at the store.
type fetched struct {
	job *mailbox.RecordJob
	res FetchResult
}

// fetchSpan is a request to the cluster under way: its span and start.
type fetchSpan struct {
	span trace.PeerFetchSpan
	t0   int64
}

// fetch asks Config.Peers for job's Definition (the stage's StoreFetch).
func (s *store) fetch(ctx actor.Context, job *mailbox.RecordJob) {
	spanCtx, span := s.tracer.StartPeerFetch(job.Trace.Context(context.Background()),
		trace.PeerFetchInfo{Key: job.Key, FullKey: job.FullKey, Actor: "store"})
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.fetching[job] = fetchSpan{span: span, t0: trace.Now()}
	s.peers.Fetch(fetchRequest(job, trace.Inject(spanCtx)), func(r FetchResult) {
		root.Send(self, &fetched{job: job, res: r})
	})
}

func fetchRequest(job *mailbox.RecordJob, tr trace.Carrier) FetchRequest {
	return FetchRequest{FullKey: job.FullKey, Key: job.Key, Model: job.Model, Trace: tr}
}

// fetchDone takes the source's answer: an image that verifies goes to the
// stage as the key's Definition; anything else has the stage record it.
func (s *store) fetchDone(m *fetched) {
	job, r := m.job, m.res
	f := s.fetching[job]
	delete(s.fetching, job)
	note := mailbox.PeerFetch{Asked: 1, Ns: trace.Now() - f.t0}
	if r.Warning != "" {
		note.Warnings = append(note.Warnings, fmt.Sprintf("graph %q: %s", job.Key, r.Warning))
	}
	if r.Err != nil {
		f.span.Finish(r.Peer, "refused", int64(len(r.Image)), r.Err)
		err := fmt.Errorf("graph %q: %w", job.Key, r.Err)
		note.Rejected = append(note.Rejected, err)
		s.st.FetchRefused(job, err, note)
		return
	}
	if r.Image == nil {
		f.span.Finish(r.Peer, r.Outcome, 0, nil)
		s.st.FetchDone(job, nil, note)
		return
	}
	d, err := verifyFetched(job, r)
	if err != nil {
		f.span.Finish(r.Peer, "rejected", int64(len(r.Image)), err)
		err = fmt.Errorf("graph %q: image from peer %s rejected: %w", job.Key, r.Peer, err)
		note.Rejected = append(note.Rejected, err)
		note.Warnings = append(note.Warnings, err.Error()+"; recorded here")
		s.st.FetchDone(job, nil, note)
		return
	}
	if !r.Trusted {
		// The span ends with the recording that checks it (checkedSpan).
		s.checking[job] = checkSpan{fetchSpan: f, peer: r.Peer, outcome: r.Outcome, hash: d.Hash, bytes: int64(len(r.Image))}
		s.st.FetchCheck(job, d, note, r.Peer)
		return
	}
	f.span.Finish(r.Peer, r.Outcome, int64(len(r.Image)), nil)
	note.Loaded, note.Bytes = 1, int64(len(r.Image))
	s.st.FetchDone(job, d, note)
}

// checkSpan is a fetched image waiting for the recording that checks it.
type checkSpan struct {
	fetchSpan
	peer, outcome string
	hash          uint64
	bytes         int64
}

// checkedSpan ends the peer_fetch span of a fetch that job's recording b
// checked: "rejected" unless the recording is the image.
func (s *store) checkedSpan(job *mailbox.RecordJob, b *mailbox.Built) {
	c, ok := s.checking[job]
	if !ok {
		return
	}
	delete(s.checking, job)
	if b.Err == nil && b.Def.Hash == c.hash {
		c.span.Finish(c.peer, c.outcome, c.bytes, nil)
		return
	}
	c.span.Finish(c.peer, "rejected", c.bytes, stages.ErrPeerMismatch)
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
	return &mailbox.Definition{Def: def, Image: r.Image, Hash: def.ContentHash, Written: written, Signature: r.Signature}, nil
}

// replyFetch puts what the cluster did for the pass into its result.
func replyFetch(run *passRun, res *PassResult) {
	f := &run.pass.Fetch
	res.Pass.FetchedDefinitions, res.Pass.FetchedBytes, res.Pass.FetchRejected = f.Loaded, f.Bytes, len(f.Rejected)
	run.ops.Add(trace.OpPeerFetch, int64(f.Asked), f.Ns)
	if len(f.Warnings) > 0 {
		res.Warnings = append(res.Warnings[:len(res.Warnings):len(res.Warnings)], f.Warnings...)
	}
}
