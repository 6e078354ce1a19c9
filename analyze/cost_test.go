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
	// 0.075 ms over 20; graph's submits at 500, its allocs none (eager's).
	near("walk per submission", c.TaskWalkNs, 1020)
	near("walk per submission, small", c.TaskWalkSmallNs, 3750)
	near("submit, small", c.SubmitSmallNs, 500)
	near("alloc, small", c.AllocSmallNs, 300)
	if len(c.Source) == 0 || !strings.Contains(strings.Join(c.Source, "\n"), "graph (--no-retain)") {
		t.Errorf("sources %q do not name the runs", c.Source)
	}
	// A pass of graph's size takes its figures, one of eager's size
	// eager's, one between them in proportion.
	near("predict small", c.Predict(Shape{OrdinaryTasks: 10, GraphCalls: 10}), 10*(500+3750)+10*(2000+3750))
	near("predict large (eager itself: its control plane)", c.Predict(Shape{OrdinaryTasks: 1000, Allocs: 100}), 1_500_000)
	f := (510.0 - 20) / (1000 - 20)
	walk := 3750 + f*(1020-3750)
	near("predict between", c.Predict(Shape{OrdinaryTasks: 500, GraphCalls: 10}), 500*(500+walk)+10*(2000+walk))

	if _, err := Calibrate(Measured{Form: "eager"}, nil, nil); err == nil {
		t.Error("a calibration that submitted nothing: no error")
	}
	c, err = Calibrate(eager, nil, nil)
	if err != nil || c.Uncalibrated == "" {
		t.Errorf("no Graph form: %v, uncalibrated %q; want the reason", err, c.Uncalibrated)
	}
}

// A warm figure is the median of the per-pass means: one preempted call
// in a pass of a few (an alloc that took 100 us) moves that pass's mean,
// not the figure; the cold pass is left out.
func TestWarmMean(t *testing.T) {
	m := Measured{WarmOps: ops("alloc_tensors", 40, 1)}
	for i, total := range []int{900_000, 3_000, 100_000 + 9_000, 3_300, 2_700} {
		m.Passes = append(m.Passes, PassFigure{Cold: i == 0, Ops: ops("alloc_tensors", 10, total)})
	}
	if v, n := m.warmMean("alloc_tensors"); v != 315 || n != 40 {
		t.Errorf("warm mean %g over %d, want the median 315 over 40", v, n)
	}
}
