package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/mailbox"
)

// A peer's image is checked by recording the Definition here once and
// comparing content hashes: its own hash and decode prove only that the
// sender made it, and a sender can make a Definition that decodes, keeps
// the pass's digest and is wrong (extra fanin edges: slower, reported as a
// match). The recording is cheap beside a pass; the pass waits for it, so
// no pass replays an image before it is checked, and a mismatch is
// reported in the pass that met it.

// peerCheck is a fetched image waiting for the recording that checks it.
type peerCheck struct {
	fetched *fetched
	def     *mailbox.Definition
	note    mailbox.PeerFetch
	// recorded: the check's recording was used in the image's place (the
	// peer's image was wrong), so it is this process's recording.
	recorded bool
}

// checkPeer records job's Definition to check a peer's image (d, verified
// as an image already) against it.
func (s *store) checkPeer(ctx actor.Context, m *fetched, d *mailbox.Definition, note mailbox.PeerFetch) {
	if s.peerChecks == nil {
		s.peerChecks = map[*mailbox.RecordJob]*peerCheck{}
	}
	s.peerChecks[m.job] = &peerCheck{fetched: m, def: d, note: note}
	s.enqueue(ctx, m.job)
}

// peerChecked takes a recording that checks a peer's image: on a match the
// image is kept (memory and disk) and published as fetched; on a mismatch,
// or when the image cannot be checked (the recording failed), the
// recording goes on as this process's own, with the rejection counted and
// named in the pass's warnings. It reports whether it published.
func (s *store) peerChecked(ctx actor.Context, b *mailbox.Built) bool {
	pc := s.peerChecks[b.Job]
	if pc == nil || pc.recorded {
		return false
	}
	job, m, d, note := b.Job, pc.fetched, pc.def, pc.note
	if b.Err == nil && b.Def.Hash == d.Hash {
		delete(s.peerChecks, job)
		m.span.Finish(m.res.Peer, m.res.Outcome, int64(len(d.Image)), nil)
		s.stats.Fetched.Add(1)
		s.stats.FetchedBytes.Add(int64(len(d.Image)))
		note.Fetched, note.Bytes = 1, int64(len(d.Image))
		s.disk.store(ctx, job, d)
		s.publish(ctx, job.StoreKey, d, func(r *mailbox.DefinitionReady) { r.Fetch = note })
		return true
	}
	var err error
	if b.Err != nil {
		err = fmt.Errorf("not kept: recording it here to check it failed")
	} else {
		err = fmt.Errorf("content hash %016x, this node's recording of it %016x: a different Definition", d.Hash, b.Def.Hash)
	}
	m.span.Finish(m.res.Peer, "rejected", int64(len(d.Image)), err)
	s.stats.FetchRejected.Add(1)
	note.Rejected = 1
	note.Warnings = append(note.Warnings, fmt.Sprintf("graph %q: image from peer %s rejected: %v; recorded here", job.Key, m.res.Peer, err))
	s.fetchNotes[job.StoreKey] = note
	// The recording is this process's own from here (built goes on
	// with it), but not the cluster's: the owner granted no claim.
	pc.recorded = true
	return false
}

// checkedPeer says whether job's recording checked a peer's image (and
// forgets it): such a recording is not offered to the cluster.
func (s *store) checkedPeer(job *mailbox.RecordJob) bool {
	pc := s.peerChecks[job]
	delete(s.peerChecks, job)
	return pc != nil
}
