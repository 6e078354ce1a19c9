// Package mailbox is the message protocol between hbg's actors and the set-up
// of their mailboxes. Messages flow at the grain of a Graph call, a
// recording, an upload or a run, never per task.
//
// The protocol has two halves. graph.go is the recording pipeline's:
// RecordJob (submission to store, store to a recorder), Built (recorder to
// store), DefinitionReady (store to the rank's uploader) and
// DefinitionUploaded (uploader to the replay); the messages that stay
// between a rank's own actors (the handoff, passDone, learned) are
// unexported in package actors. device.go is the
// device actor's, the one its tests drive: RegisterDevice, Upload, CopyRun,
// Launch, ResetDevice and DeviceStats, each answered by its own type. Who
// sends which, how many a warm pass and a new key cost, and what each
// failure does, is the actors package doc (go doc ./actors).
//
// Registry.Props sets the mailboxes up, bounded (back-pressure) or not, and
// counts every one in its Stats: the message counts the actors' tests
// assert come from here.
package mailbox

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Stats counts what passes through one mailbox. It is a protoactor mailbox
// middleware, so every actor that hbg spawns is instrumented.
type Stats struct {
	Name     string
	posted   atomic.Int64
	received atomic.Int64
	maxDepth atomic.Int64
}

func (s *Stats) MailboxStarted() {}

func (s *Stats) MessagePosted(any) {
	p := s.posted.Add(1)
	if d := p - s.received.Load(); d > s.maxDepth.Load() {
		s.maxDepth.Store(d) // racy max, good enough for a high-water mark
	}
}

func (s *Stats) MessageReceived(any) { s.received.Add(1) }
func (s *Stats) MailboxEmpty()       {}

// Snapshot is a point-in-time copy of a mailbox's counters.
type Snapshot struct {
	Name     string `json:"name"`
	Posted   int64  `json:"posted"`
	Received int64  `json:"received"`
	MaxDepth int64  `json:"max_depth"`
}

// Snapshot reads the counters.
func (s *Stats) Snapshot() Snapshot {
	return Snapshot{Name: s.Name, Posted: s.posted.Load(), Received: s.received.Load(), MaxDepth: s.maxDepth.Load()}
}

// Registry holds the Stats of every mailbox a runtime creates.
type Registry struct {
	mu    sync.Mutex
	stats []*Stats
}

// Props builds actor props with an instrumented mailbox. A bound > 0 gives a
// bounded mailbox (a full one blocks its sender: back-pressure, never a
// dropped message); 0 gives an unbounded one, for actors whose senders must
// never block (the Definition store, which everything replies to).
func (r *Registry) Props(name string, bound int, producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	s := &Stats{Name: name}
	r.mu.Lock()
	r.stats = append(r.stats, s)
	r.mu.Unlock()
	mb := actor.Unbounded(s)
	if bound > 0 {
		mb = actor.Bounded(bound, s)
	}
	return actor.PropsFromProducer(producer, append([]actor.PropsOption{actor.WithMailbox(mb)}, opts...)...)
}

// Snapshots reads every mailbox's counters.
func (r *Registry) Snapshots() []Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Snapshot, len(r.stats))
	for i, s := range r.stats {
		out[i] = s.Snapshot()
	}
	return out
}
