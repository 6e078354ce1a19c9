package analyze

import (
	"fmt"
	"slices"

	"github.com/hbg-dev/hbg/stages"
)

// OpFigure is one operation's count and summed cost, as the runtime's
// operation counters report it (trace.OpTotal).
type OpFigure struct {
	Count   int64 `json:"count"`
	TotalNs int64 `json:"total_ns"`
}

// Mean is the operation's mean cost, 0 when none ran.
func (o OpFigure) Mean() float64 {
	if o.Count == 0 {
		return 0
	}
	return float64(o.TotalNs) / float64(o.Count)
}

// Measured is what one calibration run of a form reported: its operation
// counters and phase medians (package trace's report, as plain numbers).
type Measured struct {
	Form string `json:"form"`
	// Ops is over every pass, WarmOps over the warm ones.
	Ops, WarmOps map[string]OpFigure
	WarmPasses   int   `json:"warm_passes"`
	ControlPlane int64 `json:"warm_control_plane_median_ns"`
	// ColdGraphUpload is the first pass's graph_upload (median over ranks),
	// and UploadedBytes the Definition bytes that pass uploaded.
	ColdGraphUpload int64 `json:"cold_graph_upload_median_ns"`
	UploadedBytes   int64 `json:"uploaded_definition_bytes"`
	// Passes is each pass's figures, in order.
	Passes []PassFigure `json:"passes"`
	// Per pass of one rank.
	HostSubmissions  int64 `json:"host_submissions"`
	OrdinaryTasks    int64 `json:"ordinary_tasks"`
	GraphSubmissions int64 `json:"graph_submissions"`
}

// PassFigure is one pass's counters.
type PassFigure struct {
	Cold          bool                `json:"cold"`
	Ops           map[string]OpFigure `json:"ops"`
	GraphUploadNs int64               `json:"graph_upload_ns"`
	UploadedBytes int64               `json:"uploaded_definition_bytes"`
}

// medianOver is the median over m's passes of f, among the passes where
// f is defined (ok).
func medianOver(m *Measured, f func(PassFigure) (float64, bool)) (float64, int) {
	var v []float64
	for _, p := range m.Passes {
		if x, ok := f(p); ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], len(v)
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, len(v)
}

// warmMean is op's mean cost: the median over the warm passes of each
// pass's mean, where m has its passes (one preempted call among a pass's
// few dozen moves a plain mean by its whole length), else the warm total
// over the warm count.
func (m Measured) warmMean(op string) (float64, int64) {
	o := m.WarmOps[op]
	if v, n := medianOver(&m, func(p PassFigure) (float64, bool) { x := p.Ops[op]; return x.Mean(), !p.Cold && x.Count > 0 }); n > 0 {
		return v, o.Count
	}
	return o.Mean(), o.Count
}

// opsPerPass is the warm passes' counted operations, per pass.
func (m Measured) opsPerPass() float64 {
	if m.WarmPasses == 0 {
		return 0
	}
	var s int64
	for _, o := range m.WarmOps {
		s += o.TotalNs
	}
	return float64(s) / float64(m.WarmPasses)
}

// Costs is the cost model: what each kind of host work costs on this
// machine, from the runtime's own counters.
type Costs struct {
	// SubmitNs and AllocNs: an ordinary task and an alloc task
	// (submit_task, alloc_tensors); ReplayNs a Graph call that replays
	// (graph_submit).
	SubmitNs float64 `json:"submit_task_ns"`
	AllocNs  float64 `json:"alloc_tensors_ns"`
	ReplayNs float64 `json:"graph_submit_ns"`
	// RecordNodeNs and BuildNs: a recorded node and a Definition's build
	// (record_node, build_definition); UploadByteNs the first pass's
	// graph_upload over the Definition bytes it uploaded (an upper bound:
	// that phase also waits for the recordings it uploads).
	RecordNodeNs float64 `json:"record_node_ns"`
	BuildNs      float64 `json:"build_definition_ns"`
	UploadByteNs float64 `json:"upload_byte_ns"`
	// TaskWalkNs is the warm control plane no counter covers (the
	// interpreter's walk, the run image's encoding and copy, the handoffs)
	// per host submission: the warm control-plane median less the counted
	// operations, over the pass's host submissions.
	TaskWalkNs float64 `json:"task_walk_ns"`
	// SubmitNs, AllocNs and TaskWalkNs are measured at the eager pass's
	// size (LargeSubmissions host submissions); the Small figures at the
	// Graph form's (SmallSubmissions), where a pass's tables stay in the
	// caches. A pass between the two takes figures in proportion to its
	// host submissions; a block's saving is priced at the small size, the
	// size of the passes a proposal makes.
	SubmitSmallNs    float64 `json:"submit_task_small_ns"`
	AllocSmallNs     float64 `json:"alloc_tensors_small_ns"`
	TaskWalkSmallNs  float64 `json:"task_walk_small_ns"`
	LargeSubmissions int64   `json:"large_submissions"`
	SmallSubmissions int64   `json:"small_submissions"`
	// Uncalibrated says why the Graph figures are missing ("" when they
	// are measured).
	Uncalibrated string `json:"uncalibrated,omitempty"`
	// Source says where each figure came from.
	Source []string `json:"source"`
}

// Calibrate makes the cost model from two calibration runs of a model: its
// eager form (ordinary submissions only) and a form with Graphs (replays,
// recordings, builds, uploads).
// graph is nil when no block call could be made a Graph to measure: then
// the cost model has no replay (Uncalibrated), and no Graph is proposed.
// recording, when not nil, is a run that records every pass (no Definition
// kept): the recording figures are medians over its passes, where one
// cold pass of graph would give one sample.
func Calibrate(eager Measured, graph, recording *Measured) (Costs, error) {
	var c Costs
	sub, alloc := eager.WarmOps["submit_task"], eager.WarmOps["alloc_tensors"]
	if sub.Count == 0 || eager.HostSubmissions == 0 {
		return c, fmt.Errorf("analyze: the calibration run of %s submitted no task", eager.Form)
	}
	c.SubmitNs, _ = eager.warmMean("submit_task")
	c.AllocNs, _ = eager.warmMean("alloc_tensors")
	if c.AllocNs == 0 {
		c.AllocNs = c.SubmitNs
	}
	restE := float64(eager.ControlPlane) - eager.opsPerPass()
	c.TaskWalkNs = max(0, restE/float64(eager.HostSubmissions))
	c.LargeSubmissions = eager.HostSubmissions
	c.SubmitSmallNs, c.AllocSmallNs, c.TaskWalkSmallNs, c.SmallSubmissions = c.SubmitNs, c.AllocNs, c.TaskWalkNs, eager.HostSubmissions
	c.Source = append(c.Source,
		fmt.Sprintf("submit_task %.0f ns, alloc_tensors %.0f ns: medians of the per-pass means over the warm passes of %s (%d submit_task, %d alloc_tensors)", c.SubmitNs, c.AllocNs, eager.Form, sub.Count, alloc.Count))
	if graph == nil {
		c.Source = append(c.Source, fmt.Sprintf("walk %.0f ns a host submission: %s's warm control-plane median less its counted operations, over its %d host submissions", c.TaskWalkNs, eager.Form, eager.HostSubmissions))
		c.Uncalibrated = "no block call can be a Graph (the unit-cost proposal makes none), so no replay was measured"
		c.Source = append(c.Source, c.Uncalibrated)
		return c, nil
	}
	rep := graph.WarmOps["graph_submit"]
	rec, build := graph.Ops["record_node"], graph.Ops["build_definition"]
	if rep.Count == 0 || rec.Count == 0 || build.Count == 0 {
		return c, fmt.Errorf("analyze: the calibration run of %s replayed %d, recorded %d nodes and built %d Definitions (want some of each)", graph.Form, rep.Count, rec.Count, build.Count)
	}
	c.ReplayNs, _ = graph.warmMean("graph_submit")
	c.RecordNodeNs, c.BuildNs = rec.Mean(), build.Mean()
	if graph.UploadedBytes > 0 {
		c.UploadByteNs = float64(graph.ColdGraphUpload) / float64(graph.UploadedBytes)
	}
	recSrc := fmt.Sprintf("every pass of %s (%d nodes, %d Definitions)", graph.Form, rec.Count, build.Count)
	upSrc := fmt.Sprintf("%s's cold graph_upload median %.3f ms over the %d Definition bytes it uploaded", graph.Form, float64(graph.ColdGraphUpload)/1e6, graph.UploadedBytes)
	if recording != nil {
		mean := func(op string) func(PassFigure) (float64, bool) {
			return func(p PassFigure) (float64, bool) { o := p.Ops[op]; return o.Mean(), o.Count > 0 }
		}
		if v, n := medianOver(recording, mean("record_node")); n > 0 {
			c.RecordNodeNs = v
			bv, _ := medianOver(recording, mean("build_definition"))
			c.BuildNs = bv
			recSrc = fmt.Sprintf("medians of the per-pass means over the %d passes of %s without kept Definitions (each records)", n, recording.Form)
		}
		// What recording adds to a pass's control plane, measured: the
		// recording run's warm median over the kept run's. The per-byte
		// upload is what that leaves once the nodes and builds are paid,
		// so that the three together make the measured excess (graph_upload
		// itself waits for the recordings, so its own figure counts them
		// twice).
		var bytes, nodes, defs float64
		for _, p := range recording.Passes {
			bytes = max(bytes, float64(p.UploadedBytes))
			nodes = max(nodes, float64(p.Ops["record_node"].Count))
			defs = max(defs, float64(p.Ops["build_definition"].Count))
		}
		excess := float64(recording.ControlPlane - graph.ControlPlane)
		if bytes > 0 {
			c.UploadByteNs = max(0, excess-nodes*c.RecordNodeNs-defs*c.BuildNs) / bytes
			upSrc = fmt.Sprintf("what recording adds to a pass (%s's warm control-plane median less the kept run's: %.3f ms) less its %.0f nodes and %.0f builds, over the %.0f Definition bytes each pass uploads",
				recording.Form, excess/1e6, nodes, defs, bytes)
		}
	}
	restG := float64(graph.ControlPlane) - graph.opsPerPass()
	if graph.HostSubmissions > 0 && graph.HostSubmissions < eager.HostSubmissions {
		c.SmallSubmissions = graph.HostSubmissions
		c.TaskWalkSmallNs = max(0, restG/float64(graph.HostSubmissions))
		if v, n := graph.warmMean("submit_task"); n > 0 {
			c.SubmitSmallNs = v
		}
		if v, n := graph.warmMean("alloc_tensors"); n > 0 {
			c.AllocSmallNs = v
		}
	}
	c.Source = append(c.Source,
		fmt.Sprintf("graph_submit %.0f ns: median of the per-pass means over the warm passes of %s (%d replays)", c.ReplayNs, graph.Form, rep.Count),
		fmt.Sprintf("record_node %.0f ns, build_definition %.0f ns: %s", c.RecordNodeNs, c.BuildNs, recSrc),
		uploadSource(c.UploadByteNs, upSrc),
		fmt.Sprintf("walk %.0f ns a host submission: %s's warm control-plane median less its counted operations, %.3f ms over %d submissions", c.TaskWalkNs, eager.Form, restE/1e6, eager.HostSubmissions),
		fmt.Sprintf("at %s's size (%d host submissions a pass): submit_task %.0f ns, alloc_tensors %.0f ns, walk %.0f ns (%.3f ms less its counted operations)",
			graph.Form, c.SmallSubmissions, c.SubmitSmallNs, c.AllocSmallNs, c.TaskWalkSmallNs, restG/1e6))
	return c, nil
}

// at is the per-task figures for a pass of n host submissions: the small
// pass's and the large's in proportion, the nearer ones beyond them.
func (c *Costs) at(n int) (submit, alloc, walk float64) {
	f := 1.0
	if d := c.LargeSubmissions - c.SmallSubmissions; d > 0 {
		f = min(1, max(0, float64(int64(n)-c.SmallSubmissions)/float64(d)))
	}
	lerp := func(small, large float64) float64 { return small + f*(large-small) }
	return lerp(c.SubmitSmallNs, c.SubmitNs), lerp(c.AllocSmallNs, c.AllocNs), lerp(c.TaskWalkSmallNs, c.TaskWalkNs)
}

// ordinary is what a call costs per warm pass on the ordinary path, in a
// pass of n host submissions.
func (c *Costs) ordinary(tasks, allocs, n int) float64 {
	s, a, w := c.at(n)
	return float64(tasks-allocs)*(s+w) + float64(allocs)*(a+w)
}

// replay is what a Graph call costs per warm pass, in a pass of n host
// submissions. A Graph call is a host submission too: its outer task's
// descriptor goes through the same walk (the run image's encoding and
// copy).
func (c *Costs) replay(n int) float64 {
	_, _, w := c.at(n)
	return c.ReplayNs + w
}

// small is the pass size a proposal is priced at.
func (c *Costs) small() int { return int(c.SmallSubmissions) }

// cold is what recording one Definition costs, once.
func (c *Costs) cold(nodes, bytes int) float64 {
	return float64(nodes)*c.RecordNodeNs + c.BuildNs + float64(bytes)*c.UploadByteNs
}

// Shape is what a form's pass submits on the host: ordinary tasks (allocs
// among them) and Graph calls.
type Shape struct {
	OrdinaryTasks int `json:"ordinary_tasks"`
	Allocs        int `json:"allocs"`
	GraphCalls    int `json:"graph_calls"`
}

// HostSubmissions is ordinary tasks plus outer GRAPH tasks.
func (s Shape) HostSubmissions() int { return s.OrdinaryTasks + s.GraphCalls }

// Predict is the warm control plane the cost model predicts for a pass of
// that shape.
func (c *Costs) Predict(s Shape) float64 {
	n := s.HostSubmissions()
	return c.ordinary(s.OrdinaryTasks, s.Allocs, n) + float64(s.GraphCalls)*c.replay(n)
}

// FormShape is what one pass of a model's form submits on the host: its
// ordinary tasks (those outside any Graph call) and its Graph calls.
func FormShape(m interface {
	Run(o stages.Submitter, form string) error
	EntryRoots() []stages.Root
}, form string) (Shape, error) {
	c := &shapeCounter{o: stages.NewOrdinaryPath(m.EntryRoots())}
	err := m.Run(c, form)
	return c.s, err
}

type shapeCounter struct {
	o     *stages.OrdinaryPath
	s     Shape
	depth int
}

func (c *shapeCounter) NumRoots() int { return c.o.NumRoots() }
func (c *shapeCounter) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	if c.depth == 0 {
		c.s.OrdinaryTasks++
		c.s.Allocs++
	}
	return c.o.Alloc(specs)
}
func (c *shapeCounter) Submit(t *stages.Task) stages.TaskID {
	if c.depth == 0 {
		c.s.OrdinaryTasks++
	}
	return c.o.Submit(t)
}
func (c *shapeCounter) ScopeBegin(mode stages.ScopeMode) { c.o.ScopeBegin(mode) }
func (c *shapeCounter) ScopeEnd()                        { c.o.ScopeEnd() }
func (c *shapeCounter) Graph(g *stages.GraphCall) stages.TaskID {
	if c.depth == 0 {
		c.s.GraphCalls++
	}
	c.depth++
	defer func() { c.depth-- }()
	return c.o.Graph(g)
}

// uploadSource says where the per-byte upload came from; a rate the
// calibration left at 0 (recording added no more than its nodes and
// builds) is no figure, and says so.
func uploadSource(ns float64, src string) string {
	if ns == 0 {
		return "upload —: too small to measure here (" + src + ")"
	}
	return fmt.Sprintf("upload %.3f ns/byte: %s", ns, src)
}
