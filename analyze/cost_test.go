package analyze

import (
	"math"
	"strings"
	"testing"
)

func ops(kv ...any) map[string]OpFigure {
	m := map[string]OpFigure{}
	for i := 0; i < len(kv); i += 3 {
		m[kv[i].(string)] = OpFigure{Count: int64(kv[i+1].(int)), TotalNs: int64(kv[i+2].(int))}
	}
	return m
}

// Calibrate takes each figure from the counters it names: means of the
// warm operations, medians over the recording passes, and the walk from
// the two control planes (two equations, two unknowns).
func TestCalibrate(t *testing.T) {
	// eager: 1000 tasks a pass (900 submits at 500 ns, 100 allocs at 300),
	// 2 warm passes, control plane 1.5 ms: 1.5 - 0.48 ms of walk.
	eager := Measured{Form: "eager", WarmPasses: 2, ControlPlane: 1_500_000, HostSubmissions: 1000, OrdinaryTasks: 1000,
		WarmOps: ops("submit_task", 1800, 900_000, "alloc_tensors", 200, 60_000)}
	// graph: 10 ordinary + 10 calls a pass, replays at 2 us, control plane
	// 0.1 ms.
	graph := Measured{Form: "graph", WarmPasses: 2, ControlPlane: 100_000, HostSubmissions: 20, OrdinaryTasks: 10, GraphSubmissions: 10,
		WarmOps: ops("submit_task", 20, 10_000, "graph_submit", 20, 40_000),
		Ops:     ops("record_node", 500, 1_000_000, "build_definition", 5, 100_000)}
	// recording: every pass records 500 nodes and 5 Definitions, 60000 bytes.
	rec := Measured{Form: "graph (--no-retain)", ControlPlane: 1_100_000}
	for _, nodeNs := range []int{300, 400, 900} {
		rec.Passes = append(rec.Passes, PassFigure{Ops: ops("record_node", 500, 500*nodeNs, "build_definition", 5, 5*10_000), UploadedBytes: 60_000})
	}
	c, err := Calibrate(eager, &graph, &rec)
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	near("submit", c.SubmitNs, 500)
	near("alloc", c.AllocNs, 300)
	near("replay", c.ReplayNs, 2000)
	near("record_node (median of 300, 400, 900)", c.RecordNodeNs, 400)
	near("build", c.BuildNs, 10_000)
	// Recording adds 1.0 ms a pass: 500 nodes at 400 and 5 builds at 10 us
	// leave 0.75 ms for 60000 bytes.
	near("upload per byte", c.UploadByteNs, 750_000.0/60_000)
	// Walks: eager 1.5 - 0.48 = 1.02 ms over 1000; graph 0.1 - 0.025 =
	// 0.075 ms over 20: t = 0.945 ms / 980, the pass the rest of graph's.
	tw := 945_000.0 / 980
	near("walk per submission", c.TaskWalkNs, tw)
	near("walk per pass", c.PassNs, 75_000-20*tw)
	if len(c.Source) == 0 || !strings.Contains(strings.Join(c.Source, "\n"), "graph (--no-retain)") {
		t.Errorf("sources %q do not name the runs", c.Source)
	}
	// A pass of 10 ordinary tasks and 10 Graph calls, as predicted.
	near("predict", c.Predict(Shape{OrdinaryTasks: 10, GraphCalls: 10}), c.PassNs+10*(500+tw)+10*(2000+tw))

	if _, err := Calibrate(Measured{Form: "eager"}, nil, nil); err == nil {
		t.Error("a calibration that submitted nothing: no error")
	}
	c, err = Calibrate(eager, nil, nil)
	if err != nil || c.Uncalibrated == "" {
		t.Errorf("no Graph form: %v, uncalibrated %q; want the reason", err, c.Uncalibrated)
	}
}
