package tests

import (
	"context"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

const dsv4 = "../config/models/dsv4_flash_decode.yaml"

func loadDSv4(t testing.TB) *config.Model {
	t.Helper()
	m, err := config.Load(dsv4)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func orchestration(m *config.Model, form string) *actors.Orchestration {
	o, err := m.Orchestration(form)
	if err != nil {
		panic(err) // the tests name forms that exist
	}
	return o
}

func startRuntime(t testing.TB, cfg actors.Config) *actors.Runtime {
	t.Helper()
	sys := actors.NewActorSystem(nil)
	rt, err := actors.Start(sys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()); sys.Shutdown() })
	return rt
}

func runPasses(t testing.TB, rt *actors.Runtime, orch *actors.Orchestration, rounds int) []*actors.PassResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out []*actors.PassResult
	for r := 0; r < rounds; r++ {
		res, err := rt.Pass(ctx, orch, 0, r)
		if err != nil {
			t.Fatalf("%s round %d: %v", orch.Name, r, err)
		}
		out = append(out, res)
	}
	return out
}

// definitionsOf records the body of the first call of every key of a form,
// as the Graph pipeline's recorders do, and encodes each Definition.
func definitionsOf(t testing.TB, m *config.Model, form string) [][]byte {
	t.Helper()
	o := &collector{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots()), seen: map[uint64]bool{}}
	if err := m.Run(o, form); err != nil {
		t.Fatal(err)
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.images
}

type collector struct {
	*stages.OrdinaryPath
	rec    stages.Recorder
	seen   map[uint64]bool
	images [][]byte
	err    error
	// identity is the orchestration name hashed into full keys; "" means
	// "collector".
	identity string
}

func (c *collector) Graph(call *stages.GraphCall) stages.TaskID {
	id := c.identity
	if id == "" {
		id = "collector"
	}
	fk := stages.FullKey(id, call.Key, call.Config)
	if !c.seen[fk] {
		c.seen[fk] = true
		d, err := c.rec.Record(call.Key, fk, call.Boundary, c.BoundaryRoots(call.Boundary), call.Scalars, call.ExtDeps, call.Body)
		if err != nil && c.err == nil {
			c.err = err
		}
		if d != nil {
			c.images = append(c.images, stages.EncodeDefinition(d))
		}
	}
	return c.OrdinaryPath.Graph(call)
}
