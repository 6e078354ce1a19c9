package stages

import (
	"errors"
	"fmt"
)

// A pass is bounded by its work, not only by its tasks: 16,000 tasks that
// each read what 16,000 others wrote are 256M dependency edges, gigabytes
// of fanin and minutes of race detection, from a model of a few lines. The
// model interpreter refuses what it can see before a pass starts
// (config's sizer); this bound is the backstop for what it cannot: the
// TensorMap's edges are counted as they are resolved, and the pass (or the
// recording) ends at the bound, before its fanin outgrows memory.

// DefaultMaxEdges bounds the dependency edges of one run image or one
// Definition when the orchestration sets no bound of its own (DSv4's pass
// resolves about 44k, Qwen3's about 30k).
const DefaultMaxEdges int64 = 1 << 24

// ErrTooManyEdges is a pass or a recording past its bound on dependency
// edges (EdgeBoundError says which, and where).
var ErrTooManyEdges = errors.New("too many dependency edges")

// EdgeBoundError is a run image or a Definition whose resolved fanin
// passed Limit edges at task (or node) Task.
type EdgeBoundError struct {
	// Graph is the key being recorded ("": the ordinary path's run image).
	Graph string
	Task  int
	Edges int64
	Limit int64
}

func (e *EdgeBoundError) Error() string {
	where := "the pass's run image"
	if e.Graph != "" {
		where = fmt.Sprintf("graph %q", e.Graph)
	}
	return fmt.Sprintf("%v: %s has %d after task %d, past the bound of %d (raise it with --max-edges; a model's max_edges: may only lower it)", ErrTooManyEdges, where, e.Edges, e.Task, e.Limit)
}

func (e *EdgeBoundError) Unwrap() error { return ErrTooManyEdges }

// edgeBound is a run image's or a Definition's bound (0: DefaultMaxEdges).
type edgeBound int64

func (b edgeBound) limit() int64 {
	if b > 0 {
		return int64(b)
	}
	return DefaultMaxEdges
}

// check ends the orchestration (or the body) that submitted task once the
// fanin holds more than the bound: the caller's code is not ours to return
// an error through, so this panics with the error, which every runner of
// caller code (actors' submission and recorder, golden's reference) turns
// back into the pass's error.
func (b edgeBound) check(graph string, task int, edges int) {
	if l := b.limit(); int64(edges) > l {
		panic(&EdgeBoundError{Graph: graph, Task: task, Edges: int64(edges), Limit: l})
	}
}
