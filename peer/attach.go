package peer

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hbg-dev/hbg/actors"
)

// attached is the Node of each actor system Attach was given.
var attached struct {
	sync.Mutex
	nodes map[*actor.ActorSystem]*Node
}

// Attach returns sys's Node's DefinitionSource for a cluster (Cluster),
// starting the Node with cfg on first use. It is for hosts that start a
// runtime per placement (`hbgrun node`): the node's claims and the images
// it holds outlive each runtime, and one peer actor serves them all.
func Attach(sys *actor.ActorSystem, cfg Config, self string, nodes []string) (actors.DefinitionSource, error) {
	attached.Lock()
	defer attached.Unlock()
	n := attached.nodes[sys]
	if n == nil {
		var err error
		if n, err = Start(sys, cfg); err != nil {
			return nil, err
		}
		if attached.nodes == nil {
			attached.nodes = map[*actor.ActorSystem]*Node{}
		}
		attached.nodes[sys] = n
	}
	return n.Cluster(self, nodes)
}
