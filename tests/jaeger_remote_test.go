package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hbg-dev/hbg/remote"
	"github.com/hbg-dev/hbg/trace"
)

// jaegerRemoteRun runs `hbgrun run --nodes` against two `hbgrun node`
// processes, all three exporting to Jaeger over OTLP/HTTP, and checks the
// run is one trace: the driver's root, run and pass spans; each pass's
// phase spans from the node its rank lives on, children of that pass's
// span; each process its own service.instance.id.
func jaegerRemoteRun(t *testing.T, jaeger *jaegerServer, bin string) {
	tag := fmt.Sprintf("remote-%d", time.Now().UnixNano())
	since := time.Now().Add(-time.Minute)
	a, b := startTracedNodes(t, bin, jaeger, tag)
	rep := jaegerHbgrunRun(t, bin, tag, append(jaegerRunArgs, "--store", "off", "--otlp", jaeger.OTLPHTTP(),
		"--nodes", a.addr+","+b.addr)...)
	require.Len(t, rep.Passes, 4)
	phases := 0
	for i := range rep.Passes {
		for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
			if rep.Passes[i].Has(ph) {
				phases++
			}
		}
	}
	complete := func(trs []jaegerTrace) bool {
		if len(trs) != 1 {
			return false
		}
		n := map[string]int{}
		for _, s := range trs[0].Spans {
			n[s.OperationName]++
		}
		got := 0
		for ph := trace.Phase(0); ph < trace.NumPhases; ph++ {
			got += n[ph.String()]
		}
		return n[trace.SpanCommand] == 1 && n[trace.SpanRun] == 2 && n[remote.SpanPass] == 4 && got == phases
	}
	trs := jaeger.waitTraces(t, tag, since, complete)
	require.Len(t, trs, 1, "one run is one trace")
	tr := &trs[0]
	assert.Equal(t, rep.TraceID, tr.TraceID)

	instance := func(s *jaegerSpan) string {
		for _, tg := range tr.Processes[s.ProcessID].Tags {
			if tg.Key == "service.instance.id" {
				return fmt.Sprint(tg.Value)
			}
		}
		return ""
	}
	byID := map[string]*jaegerSpan{}
	for i := range tr.Spans {
		byID[tr.Spans[i].SpanID] = &tr.Spans[i]
	}
	var driver string
	nodes := map[string]bool{}
	for i := range tr.Spans {
		s := &tr.Spans[i]
		id := instance(s)
		require.NotEmpty(t, id, "span %s has no service.instance.id", s.OperationName)
		switch s.OperationName {
		case trace.SpanCommand, trace.SpanRun, remote.SpanPass:
			if driver == "" {
				driver = id
			}
			assert.Equal(t, driver, id, "the driver's spans come from one process")
			assert.True(t, strings.HasPrefix(id, "hbgrun@"), id)
		}
		if s.OperationName == remote.SpanPass {
			parent := byID[s.parentID()]
			require.NotNil(t, parent, "a pass span has its parent")
			assert.Equal(t, trace.SpanRun, parent.OperationName)
		}
		if _, err := trace.ParsePhase(s.OperationName); err != nil {
			continue
		}
		// A phase: on a node, under the driver's span of its pass.
		nodes[id] = true
		assert.True(t, strings.HasPrefix(id, "hbgrun-node@"), "phase %s from %s", s.OperationName, id)
		parent := byID[s.parentID()]
		require.NotNil(t, parent, "phase %s has its parent in the trace", s.OperationName)
		require.Equal(t, remote.SpanPass, parent.OperationName, "phase %s", s.OperationName)
		assert.Equal(t, s.intTag(string(trace.KeyRank)), parent.intTag(string(trace.KeyRank)))
		assert.Equal(t, s.intTag(string(trace.KeyRound)), parent.intTag(string(trace.KeyRound)))
		node := parent.strTag(string(remote.KeyNode))
		rank := s.intTag(string(trace.KeyRank))
		assert.Equal(t, []string{a.addr, b.addr}[rank%2], node, "rank %d runs on its node", rank)
	}
	assert.Len(t, nodes, 2, "phase spans from both node processes")
	assert.NotContains(t, nodes, driver)
	// Recordings happen on the nodes, under their host_orch.
	records := 0
	for i := range tr.Spans {
		if s := &tr.Spans[i]; s.OperationName == trace.SpanRecord {
			records++
			assert.Equal(t, "host_orch", byID[s.parentID()].OperationName)
		}
	}
	assert.GreaterOrEqual(t, records, int(rep.Counts.RecordedDefinitions))
}

// startTracedNodes starts two `hbgrun node` processes that export to jaeger,
// their spans tagged with the run's tag (hbg.e2e.run) and no store on disk,
// whatever the test's own environment says.
func startTracedNodes(t *testing.T, bin string, jaeger *jaegerServer, tag string) (a, b *nodeProc) {
	env := []string{"HBG_STORE=off", "OTEL_RESOURCE_ATTRIBUTES=hbg.e2e.run=" + tag}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "HBG_STORE=") {
			env = append(env, kv)
		}
	}
	a = startNodeBin(t, bin, env, "127.0.0.1:0", "--otlp", jaeger.OTLPHTTP())
	b = startNodeBin(t, bin, env, "127.0.0.1:0", "--otlp", jaeger.OTLPHTTP())
	return a, b
}
