// Package impure breaks every purity rule once, so TestPurityRuleCatches can
// show that the rule catches each kind of breach.
package impure

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel"
)

var mu sync.Mutex

func Later() {
	go func() { _ = time.Now() }()
	_ = actor.NewActorSystem
	_ = otel.Tracer
	mu.Lock()
}
