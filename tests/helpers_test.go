package tests

import (
	"context"
	"testing"
	"time"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
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
	return &actors.Orchestration{
		Name: m.Name + "/" + form, Entry: m.EntryRoots(), Kernels: m.Kernels(),
		Run: func(o stages.Orchestrator) error { return m.Run(o, form) },
	}
}

func startRuntime(t testing.TB, cfg actors.Config) *actors.Runtime {
	t.Helper()
	sys := actors.NewActorSystem(nil)
	rt, err := actors.Start(sys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(); sys.Shutdown() })
	return rt
}

func runPasses(t testing.TB, rt *actors.Runtime, orch *actors.Orchestration, rounds int) []*actors.PassResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out []*actors.PassResult
	for r := 0; r < rounds; r++ {
		res, err := rt.Pass(ctx, orch, 0, r, trace.Carrier{})
		if err != nil {
			t.Fatalf("%s round %d: %v", orch.Name, r, err)
		}
		out = append(out, res)
	}
	return out
}
