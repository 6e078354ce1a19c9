package remote

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNodeLost marks a pass that failed because its rank's node died, could
// not be reached, or stopped answering within Config.NodeTimeout. The
// error is a *NodeError naming the node and its ranks.
var ErrNodeLost = errors.New("node lost")

// NodeError is a pass (or a placement) that failed with its node.
type NodeError struct {
	// Node is the node's address (host:port).
	Node string
	// Ranks is every rank placed on the node: all of them fail.
	Ranks []int
	// Rank and Round are the pass that failed; -1 for a placement.
	Rank, Round int
	// Cause says how the node was found lost.
	Cause string
}

func (e *NodeError) Error() string {
	var b strings.Builder
	if e.Rank >= 0 {
		fmt.Fprintf(&b, "rank %d round %d: ", e.Rank, e.Round)
	}
	fmt.Fprintf(&b, "node %s lost: %s", e.Node, e.Cause)
	if len(e.Ranks) > 0 {
		rs := make([]string, len(e.Ranks))
		for i, r := range e.Ranks {
			rs[i] = strconv.Itoa(r)
		}
		fmt.Fprintf(&b, " (its ranks: %s)", strings.Join(rs, ", "))
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNodeLost) hold.
func (e *NodeError) Is(target error) bool { return target == ErrNodeLost }

// forPass is the node's loss as the error of one of its passes.
func (e *NodeError) forPass(rank, round int) *NodeError {
	c := *e
	c.Rank, c.Round = rank, round
	return &c
}
