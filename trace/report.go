package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReportSchema is the version of the Report's JSON shape. It changes only
// when a field is renamed or removed or its meaning changes; adding a field
// keeps it.
//
// 2: counts split into per_pass and per_run; a pass's phases named with
// their unit (host_orch_ns); sim.core_busy names each core.
const ReportSchema = 2

// Device values of Report.Device.
const (
	DeviceSim     = "sim"     // the simulated a2a3 ran every pass
	DeviceSkipped = "skipped" // no device run: device_wall and golden are absent
)

// Report is what `hbgrun run` reports about a run, as JSON (--json) and as
// text. Its JSON field names are a contract with scripts and the tests:
// rename nothing; add fields freely.
type Report struct {
	Schema int    `json:"schema"`
	Model  string `json:"model"`
	Form   string `json:"form"`
	Rounds int    `json:"rounds"`
	Ranks  int    `json:"ranks"`
	// Device is DeviceSim or DeviceSkipped.
	Device string `json:"device"`
	Counts Counts `json:"counts"`
	// Phases is the warm passes' table, ColdPhases the first pass of each
	// rank. Each holds every phase (n = 0 when not measured) and
	// control_plane, the spread of per-pass sums.
	Phases     PhaseStats `json:"phases"`
	ColdPhases PhaseStats `json:"cold_phases"`
	// Ops is the per-operation totals over all passes; WarmOps over the warm
	// passes only.
	Ops     Ops `json:"ops"`
	WarmOps Ops `json:"warm_ops"`
	// Golden is the golden check of the first pass of rank 0 against its
	// reference (the inline twin), or of the first pass that failed it;
	// null when the device was skipped.
	Golden *Golden `json:"golden"`
	// Races is that pass's races (at most the device's cap; golden.races
	// counts them all); never null.
	Races []Race `json:"races"`
	// Sim is the simulated device of the first pass of rank 0 (every pass
	// of a form runs the same work, so the same timeline); null when the
	// device was skipped.
	Sim *SimDevice `json:"sim,omitempty"`
	// Mailboxes is every actor mailbox of the run: messages posted and
	// received, and the deepest it got (messages flow per Graph call,
	// recording, upload and pass, never per task).
	Mailboxes []MailboxStat `json:"mailboxes,omitempty"`
	// TraceID is the run's trace (search it in Jaeger), "" when no span was
	// recorded; Exporter is where spans went, "" when nowhere.
	TraceID  string `json:"trace_id,omitempty"`
	Exporter string `json:"exporter,omitempty"`
	// Preload is what was loaded from the store on disk before the first
	// pass; null when nothing was preloaded.
	Preload *Preload `json:"preload,omitempty"`
	// Warnings is every warning of the run (demotions, boundary mismatches,
	// phases missing from some passes…); never null.
	Warnings []string `json:"warnings"`
	// Passes is every pass, in the order given to NewReport.
	Passes []Pass `json:"passes"`
	// Timeline is one pass's simulated device cut down for a picture (the
	// HTML report draws it); present when the run kept device timelines
	// (--html, --trace-out).
	Timeline *DeviceTimeline `json:"timeline,omitempty"`
	// Baseline is the form this one is compared with (compare's first,
	// usually eager) and its warm host_orch median: the ordinary path the
	// form's control plane replaces; absent when not measured in this run.
	Baseline *Baseline `json:"baseline,omitempty"`
}

// Baseline is the ordinary path a form's control plane is measured against.
type Baseline struct {
	Form       string `json:"form"`
	HostOrchNs int64  `json:"host_orch_ns"`
	// Saving is HostOrchNs over the form's warm control-plane median.
	Saving *float64 `json:"saving,omitempty"`
}

// Counts are exact counters of a run: noise-free signals, unlike times. In
// JSON they are split by what they count: "per_pass" (PassCounts, one pass
// of one rank) and "per_run" (RunCounts, summed over every rank and round).
// The Go fields are promoted, so c.DeviceTasks reads as before.
type Counts struct {
	PassCounts `json:"per_pass"`
	RunCounts  `json:"per_run"`
}

// PassCounts are one pass of one rank: every pass of a form submits the same
// work, and every form of a model must match its eager form's device_tasks.
type PassCounts struct {
	// DeviceTasks is the tasks the device ran in one pass, GRAPH tasks
	// expanded into their nodes (DSv4 eager: 15971).
	DeviceTasks int64 `json:"device_tasks"`
	// HostSubmissions is the tasks the host submitted in one pass: ordinary
	// tasks plus outer GRAPH tasks.
	HostSubmissions  int64 `json:"host_submissions"`
	OrdinaryTasks    int64 `json:"ordinary_tasks"`
	GraphSubmissions int64 `json:"graph_submissions"`
}

// Preload is an orchestration's Definitions loaded from the store on disk
// before its first pass (actors.Runtime.Preload). The passes that use them
// count them among their loaded_definitions.
type Preload struct {
	Definitions int   `json:"definitions"`
	Bytes       int64 `json:"bytes"`
	// WallNs is the preload's wall time, before the first pass.
	WallNs int64 `json:"wall_ns"`
	// Rejected is the entries found bad (moved aside; each recorded again
	// by the pass that calls it, and a warning there).
	Rejected int `json:"rejected"`
}

// RunCounts add up over the whole run, all ranks and rounds, but for
// Definitions.
type RunCounts struct {
	// Definitions is the distinct Definitions the first pass used (every
	// pass of a form uses the same ones).
	Definitions int64 `json:"definitions"`
	// RecordedDefinitions and RecordedNodes count recordings over the run
	// (with Definitions kept across runs, all in the cold passes).
	RecordedDefinitions int64 `json:"recorded_definitions"`
	RecordedNodes       int64 `json:"recorded_nodes"`
	// Demoted is Graph calls that ran on the ordinary path for want of a
	// recording slot; hbg's design keeps it 0.
	Demoted int64 `json:"demoted"`
	// BoundaryMismatches is replays refused because the boundary broke its
	// contract (each also a warning).
	BoundaryMismatches int64 `json:"boundary_mismatches"`
	// LoadedDefinitions and LoadedBytes count Definitions loaded from the
	// store on disk instead of recorded; StoreRejected the entries found
	// bad there (moved aside, recorded again, each also a warning).
	LoadedDefinitions int64 `json:"loaded_definitions"`
	LoadedBytes       int64 `json:"loaded_bytes"`
	StoreRejected     int64 `json:"store_rejected"`
	// FetchedDefinitions and FetchedBytes count Definitions fetched from
	// another node of the cluster instead of recorded; FetchRejected the
	// images a peer sent that failed verification (recorded here instead,
	// each also a warning).
	FetchedDefinitions int64 `json:"fetched_definitions"`
	FetchedBytes       int64 `json:"fetched_bytes"`
	FetchRejected      int64 `json:"fetch_rejected"`
	Serving
}

// Serving is what a run whose keys change (a model's steps:, a residency
// budget) did with them: how often a Graph call met a key with no
// Definition, how long passes waited for recordings, what was evicted and
// how many Definitions stayed alive.
type Serving struct {
	// GraphCalls is every Graph call of the run; ShellCalls those of a key
	// not yet recorded (the call waited for the recording); HitRate the
	// share of calls that replayed a Definition.
	GraphCalls int64   `json:"graph_calls"`
	ShellCalls int64   `json:"shell_calls"`
	HitRate    float64 `json:"hit_rate"`
	// KeysMet is the distinct keys the run's calls named (per rank, added
	// up); Rerecorded the keys recorded again after an eviction.
	KeysMet    int64 `json:"keys_met"`
	Rerecorded int64 `json:"rerecorded"`
	// RecordWaitNs is the time passes waited for recordings (record_wait:
	// Pass.RecordWaitNs summed); RecordWaitPasses counts the passes that
	// waited.
	RecordWaitNs     int64 `json:"record_wait_ns"`
	RecordWaitPasses int64 `json:"record_wait_passes"`
	// OrdinaryWhileRecording is Graph calls run on the ordinary path
	// because their key was being recorded.
	OrdinaryWhileRecording int64 `json:"ordinary_while_recording"`
	// EvictedDefinitions is the Definitions the residency budget evicted.
	EvictedDefinitions int64 `json:"evicted_definitions"`
	// DefinitionsAlive is, per round of rank 0, the Definitions the rank
	// kept after it; KeptBytesMax the most device bytes they took.
	DefinitionsAlive []int `json:"definitions_alive,omitempty"`
	KeptBytesMax     int64 `json:"kept_bytes_max"`
	// DeviceBytesMax is the most bytes of Definition objects a device held
	// at a launch (the budget frees evicted ones there too); 0 with the
	// device skipped.
	DeviceBytesMax int64 `json:"device_definition_bytes_max"`
}

// Digest is a 64-bit output digest. It is JSON text (16 hex digits), since
// JSON numbers lose integers above 2^53.
type Digest uint64

// MarshalText gives 16 hex digits.
func (d Digest) MarshalText() ([]byte, error) { return []byte(hex16(uint64(d))), nil }

// UnmarshalText reads hex digits.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 16, 64)
	if err != nil {
		return fmt.Errorf("trace: digest %q: %w", b, err)
	}
	*d = Digest(v)
	return nil
}

// Golden is the golden check: the form's output digests against its
// reference's, the inline twin (each Graph call's body run inline, ordered
// as the call orders it), and against the eager form's.
type Golden struct {
	// Reference names what the form was checked against.
	Reference       string `json:"reference"`
	Digest          Digest `json:"digest"`
	ReferenceDigest Digest `json:"reference_digest"`
	// Match: same digest and device task count as the reference.
	Match bool `json:"match"`
	// Verdict is match, mismatch or racy (a race in the form or its
	// reference, which makes digests prove nothing either way); anything
	// but match fails the run.
	Verdict        string `json:"verdict"`
	Tasks          int    `json:"tasks"`
	ReferenceTasks int    `json:"reference_tasks"`
	// Races and ReferenceRaces count each run's races (the report's races
	// lists the form's).
	Races          int `json:"race_count"`
	ReferenceRaces int `json:"reference_race_count"`
	// DeclaredRaces counts the form's races among kernels the model
	// declares may race (its races: section, each class with its reason):
	// they are reported and do not fail the run.
	DeclaredRaces int `json:"declared_race_count"`
	// Diff is where the form first differs from the reference.
	Diff *GoldenDiff `json:"diff,omitempty"`
	// EagerDigest is the eager form's (the program with its Graph calls
	// run as plain code); EagerMatch whether the form ends with it.
	EagerDigest Digest `json:"eager_digest"`
	EagerMatch  bool   `json:"eager_match"`
	EagerRaces  int    `json:"eager_race_count"`
	// EagerRaceList is the eager form's races when it has some.
	EagerRaceList []Race `json:"eager_race_list,omitempty"`
}

// GoldenDiff is the first element interval of an output root where two
// runs end with different contents, and its last writer in each.
type GoldenDiff struct {
	Root            int    `json:"root"`
	Name            string `json:"name"`
	Lo              int64  `json:"lo"`
	Hi              int64  `json:"hi"`
	Writer          string `json:"writer"`
	ReferenceWriter string `json:"reference_writer"`
}

// Race is two device tasks touching overlapping elements of one root, one
// of them writing, with no dependency path between them.
type Race struct {
	// Kind is write-write or read-write.
	Kind string   `json:"kind"`
	A    RaceTask `json:"a"`
	B    RaceTask `json:"b"`
	// Root is the root raced on, -1 for a root internal to a Graph
	// instance (Graph is then its outer task, Internal its index).
	Root     int   `json:"root"`
	Graph    int   `json:"graph,omitempty"`
	Internal int   `json:"internal,omitempty"`
	Lo       int64 `json:"lo"`
	Hi       int64 `json:"hi"`
	// Text is the race in one line.
	Text string `json:"text"`
}

// RaceTask is one side of a race: the submission index (the outer GRAPH
// task for a body node), the node (-1 for none) and the Graph key, the
// kernel, and the argument (-1: the predicate) with its tag.
type RaceTask struct {
	Task   int    `json:"task"`
	Node   int    `json:"node"`
	Key    string `json:"key,omitempty"`
	Kernel string `json:"kernel"`
	Arg    int    `json:"arg"`
	Tag    string `json:"tag"`
	// Op is the model file:line of the op that made the task, when known.
	Op string `json:"op,omitempty"`
}

// MailboxStat is one actor mailbox's traffic over a run.
type MailboxStat struct {
	Name     string `json:"name"`
	Posted   int64  `json:"posted"`
	Received int64  `json:"received"`
	MaxDepth int64  `json:"max_depth"`
}

// SimDevice is one simulated device run: its wall, its critical path and
// how busy each core was.
type SimDevice struct {
	WallNs         int64 `json:"wall_ns"`
	CriticalPathNs int64 `json:"critical_path_ns"`
	Tasks          int   `json:"tasks"`
	Kernels        int   `json:"kernels"`
	// Skipped is predicated tasks whose predicate was false on the device.
	Skipped int `json:"skipped"`
	// CoreBusyNs is each core's busy time: AIC cores first, then AIV. In
	// JSON it is "core_busy", each core named ("aic 0", "aiv 47") as on
	// the Chrome trace's tracks.
	CoreBusyNs []int64 `json:"-"`
	AICCores   int     `json:"aic_cores"`
	// FaninEdges is the run's dependency edges as the host's TensorMap
	// resolved them, every Graph instance's included; ShippedEdges those
	// the host shipped, its transitive reduction having dropped the edges
	// other paths imply (all of them with --reduce-edges=false).
	FaninEdges   int `json:"fanin_edges"`
	ShippedEdges int `json:"shipped_edges"`
	// SchedulerNs is the AICPU threads' simulated busy time, summed: the
	// schedulers' dispatches and collections and the resolver's
	// completions, one fanin edge at a time.
	SchedulerNs int64 `json:"scheduler_ns"`
}

// CoreBusy is one core's busy time over a simulated device run.
type CoreBusy struct {
	Core   string `json:"core"`
	BusyNs int64  `json:"busy_ns"`
}

// CoreName names core i of a device whose first aicCores cores are AIC:
// "aic 3", then "aiv 0" onward.
func CoreName(i, aicCores int) string {
	if i < aicCores {
		return "aic " + strconv.Itoa(i)
	}
	return "aiv " + strconv.Itoa(i-aicCores)
}

type simDevicePlain SimDevice

type simDeviceJSON struct {
	simDevicePlain
	CoreBusy []CoreBusy `json:"core_busy"`
}

// MarshalJSON labels each core's busy time with the core's name.
func (d SimDevice) MarshalJSON() ([]byte, error) {
	j := simDeviceJSON{simDevicePlain: simDevicePlain(d), CoreBusy: make([]CoreBusy, len(d.CoreBusyNs))}
	for i, b := range d.CoreBusyNs {
		j.CoreBusy[i] = CoreBusy{Core: CoreName(i, d.AICCores), BusyNs: b}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes; the cores are in order.
func (d *SimDevice) UnmarshalJSON(b []byte) error {
	var j simDeviceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = SimDevice(j.simDevicePlain)
	if j.CoreBusy != nil {
		d.CoreBusyNs = make([]int64, len(j.CoreBusy))
		for i, c := range j.CoreBusy {
			d.CoreBusyNs[i] = c.BusyNs
		}
	}
	return nil
}

// busy is the mean utilisation of cores [lo, hi) over the wall.
func (d *SimDevice) busy(lo, hi int) float64 {
	if d.WallNs == 0 || hi <= lo {
		return 0
	}
	var sum int64
	for _, b := range d.CoreBusyNs[lo:hi] {
		sum += b
	}
	return float64(sum) / float64(d.WallNs) / float64(hi-lo)
}

// NewReport builds a report from a run's passes: the phase tables and op
// totals (Summarize), and a warning per phase missing from some passes.
// Device is DeviceSim when any pass measured device_wall. The caller fills
// Counts, Golden, TraceID, Exporter and adds its own Warnings.
func NewReport(info RunInfo, passes []Pass) *Report {
	t := Summarize(passes)
	r := &Report{
		Schema: ReportSchema,
		Model:  info.Model, Form: info.Form, Rounds: info.Rounds, Ranks: info.Ranks,
		Device:     DeviceSkipped,
		Phases:     t.Warm,
		ColdPhases: t.Cold,
		Ops:        t.Ops,
		WarmOps:    t.WarmOps,
		Warnings:   []string{},
		Passes:     passes,
	}
	if t.Warm.Phases[PhaseDeviceWall].N+t.Cold.Phases[PhaseDeviceWall].N > 0 {
		r.Device = DeviceSim
	}
	for _, c := range []struct {
		name string
		st   *PhaseStats
	}{{"warm", &t.Warm}, {"cold", &t.Cold}} {
		for _, ph := range c.st.Partial {
			r.Warnings = append(r.Warnings, fmt.Sprintf("phase %s measured in %d of %d %s passes", ph, c.st.Phases[ph].N, c.st.Passes, c.name))
		}
	}
	if r.Passes == nil {
		r.Passes = []Pass{}
	}
	r.Races = []Race{}
	return r
}

// Table is the report's phase table.
func (r *Report) Table() Table {
	return Table{Warm: r.Phases, Cold: r.ColdPhases, Ops: r.Ops, WarmOps: r.WarmOps}
}

// WriteText renders the report for people with every row: a header, the
// phase table (as upstream's hbg_bind_phases), the per-operation totals,
// the counts, the golden check line, then warnings.
func (r *Report) WriteText(w io.Writer) error { return r.writeText(w, false, true) }

// WriteTextRows is WriteText led by the headline (Headline), what `hbgrun
// run` prints; without all (-v), rows and count lines that are all zero
// (an op no pass ran, no Definition loaded or fetched, an empty preload)
// are left out.
func (r *Report) WriteTextRows(w io.Writer, all bool) error { return r.writeText(w, true, all) }

func (r *Report) writeText(w io.Writer, headline, all bool) error {
	var b strings.Builder
	if headline {
		b.WriteString(r.Headline())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "model %s, form %s, %s x %s, device %s\n", r.Model, r.Form, Plural(int64(r.Rounds), "round"), Plural(int64(r.Ranks), "rank"), r.Device)
	t := r.Table()
	if err := t.writeText(&b, all); err != nil {
		return err
	}
	c := &r.Counts
	fmt.Fprintf(&b, "counts (per pass of one rank): device_tasks %d, host_submissions %d (ordinary %d, graph %d)\n",
		c.DeviceTasks, c.HostSubmissions, c.OrdinaryTasks, c.GraphSubmissions)
	fmt.Fprintf(&b, "counts (whole run): definitions %d, recorded_definitions %d, recorded_nodes %d, demoted %d, boundary_mismatches %d\n",
		c.Definitions, c.RecordedDefinitions, c.RecordedNodes, c.Demoted, c.BoundaryMismatches)
	if all || c.LoadedDefinitions != 0 || c.LoadedBytes != 0 || c.StoreRejected != 0 {
		fmt.Fprintf(&b, "counts (whole run): loaded_definitions %d (%d bytes), store_rejected %d\n", c.LoadedDefinitions, c.LoadedBytes, c.StoreRejected)
	}
	if p := r.Preload; p != nil && (all || p.Definitions != 0 || p.Rejected != 0) {
		fmt.Fprintf(&b, "preload (before the first pass): %s (%d bytes) from the store on disk in %s ms, %d rejected\n", Plural(int64(p.Definitions), "Definition"), p.Bytes, ms(p.WallNs), p.Rejected)
	}
	if all || c.FetchedDefinitions != 0 || c.FetchedBytes != 0 || c.FetchRejected != 0 {
		fmt.Fprintf(&b, "counts (whole run): fetched_definitions %d (%d bytes), fetch_rejected %d\n", c.FetchedDefinitions, c.FetchedBytes, c.FetchRejected)
	}
	if v := &c.Serving; all || v.EvictedDefinitions != 0 || v.RecordWaitPasses > 1 || v.OrdinaryWhileRecording != 0 {
		alive := 0
		if n := len(v.DefinitionsAlive); n > 0 {
			alive = v.DefinitionsAlive[n-1]
		}
		fmt.Fprintf(&b, "keys (whole run): keys_met %d, graph_calls %d, shell_calls %d (hit rate %.2f%%), ordinary_while_recording %d, record_wait %s ms over %d passes, evicted_definitions %d, rerecorded %d, definitions alive at the end %d (at most %d bytes, %d on a device)\n",
			v.KeysMet, v.GraphCalls, v.ShellCalls, 100*v.HitRate, v.OrdinaryWhileRecording, ms(v.RecordWaitNs), v.RecordWaitPasses, v.EvictedDefinitions, v.Rerecorded, alive, v.KeptBytesMax, v.DeviceBytesMax)
	}
	r.writeGolden(&b)
	if d := r.Sim; d != nil {
		fmt.Fprintf(&b, "device (simulated, rank 0, first pass): wall %s ms, critical path %s ms, %d tasks (%d kernels, %d predicated off), busy AIC %.0f%% AIV %.0f%%\n",
			ms(d.WallNs), ms(d.CriticalPathNs), d.Tasks, d.Kernels, d.Skipped,
			100*d.busy(0, d.AICCores), 100*d.busy(d.AICCores, len(d.CoreBusyNs)))
		if d.FaninEdges > 0 {
			fmt.Fprintf(&b, "device (simulated, rank 0, first pass): fanin_edges %d, shipped_edges %d, scheduler time %s ms\n",
				d.FaninEdges, d.ShippedEdges, ms(d.SchedulerNs))
		}
	}
	if r.TraceID != "" {
		fmt.Fprintf(&b, "trace: %s (%s)\n", r.TraceID, exportedTo(r.Exporter))
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", warn)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("trace: write report: %w", err)
	}
	return nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("trace: write report JSON: %w", err)
	}
	return nil
}

// The JSON shapes below spell out every phase and op as a field so that the
// output's key order is fixed (upstream's order, not alphabetical) and the
// contract is visible in one place.

type phaseStatsJSON struct {
	Args         Stat `json:"args"`
	HostOrch     Stat `json:"host_orch"`
	GraphUpload  Stat `json:"graph_upload"`
	ArenaH2D     Stat `json:"arena_h2d"`
	DeviceWall   Stat `json:"device_wall"`
	ControlPlane Stat `json:"control_plane"`
	DeviceIdle   Stat `json:"device_idle"`
}

// MarshalJSON gives {<phase>: stat, …, control_plane: stat}.
func (s PhaseStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(phaseStatsJSON{
		s.Phases[PhaseArgs], s.Phases[PhaseHostOrch], s.Phases[PhaseGraphUpload],
		s.Phases[PhaseArenaH2D], s.Phases[PhaseDeviceWall], s.ControlPlane, s.DeviceIdle,
	})
}

// UnmarshalJSON reads what MarshalJSON writes. Passes is restored as the
// largest n (exact when some phase was measured in every pass); Partial is
// not restored.
func (s *PhaseStats) UnmarshalJSON(b []byte) error {
	var j phaseStatsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = PhaseStats{ControlPlane: j.ControlPlane, DeviceIdle: j.DeviceIdle}
	s.Phases = [NumPhases]Stat{j.Args, j.HostOrch, j.GraphUpload, j.ArenaH2D, j.DeviceWall}
	for _, st := range s.Phases {
		s.Passes = max(s.Passes, st.N)
	}
	return nil
}

type opsJSON struct {
	SubmitTask      OpTotal `json:"submit_task"`
	AllocTensors    OpTotal `json:"alloc_tensors"`
	RecordNode      OpTotal `json:"record_node"`
	GraphSubmit     OpTotal `json:"graph_submit"`
	BuildDefinition OpTotal `json:"build_definition"`
	StoreLoad       OpTotal `json:"store_load"`
	PeerFetch       OpTotal `json:"peer_fetch"`
}

// MarshalJSON gives {<op>: {count, total_ns}, …}.
func (o Ops) MarshalJSON() ([]byte, error) {
	return json.Marshal(opsJSON{o[OpSubmitTask], o[OpAllocTensors], o[OpRecordNode], o[OpGraphSubmit], o[OpBuildDefinition], o[OpStoreLoad], o[OpPeerFetch]})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (o *Ops) UnmarshalJSON(b []byte) error {
	var j opsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*o = Ops{j.SubmitTask, j.AllocTensors, j.RecordNode, j.GraphSubmit, j.BuildDefinition, j.StoreLoad, j.PeerFetch}
	return nil
}

// phaseNsJSON holds one pass's measured phases in ns (device_wall in
// simulated ns); unmeasured ones are absent.
type phaseNsJSON struct {
	Args        *int64 `json:"args_ns,omitempty"`
	HostOrch    *int64 `json:"host_orch_ns,omitempty"`
	GraphUpload *int64 `json:"graph_upload_ns,omitempty"`
	ArenaH2D    *int64 `json:"arena_h2d_ns,omitempty"`
	DeviceWall  *int64 `json:"device_wall_ns,omitempty"`
}

func (j *phaseNsJSON) fields() [NumPhases]**int64 {
	return [NumPhases]**int64{&j.Args, &j.HostOrch, &j.GraphUpload, &j.ArenaH2D, &j.DeviceWall}
}

type passJSON struct {
	Rank                    int         `json:"rank"`
	Round                   int         `json:"round"`
	Cold                    bool        `json:"cold"`
	Phases                  phaseNsJSON `json:"phases"`
	RecordedNodes           int         `json:"recorded_nodes"`
	BuiltDefinitions        int         `json:"built_definitions"`
	UploadedDefinitionBytes int64       `json:"uploaded_definition_bytes"`
	RunImageBytes           int64       `json:"run_image_bytes"`
	RunImageSentBytes       int64       `json:"run_image_sent_bytes"`
	LoadedDefinitions       int         `json:"loaded_definitions"`
	LoadedBytes             int64       `json:"loaded_bytes"`
	StoreRejected           int         `json:"store_rejected"`
	FetchedDefinitions      int         `json:"fetched_definitions"`
	FetchedBytes            int64       `json:"fetched_bytes"`
	FetchRejected           int         `json:"fetch_rejected"`
	SimulationNs            int64       `json:"simulation_ns"`
	RecordWaitNs            int64       `json:"record_wait_ns"`
	DeviceDefinitionBytes   int64       `json:"device_definition_bytes"`
	DeviceIdleNs            *int64      `json:"device_idle_ns,omitempty"`
	Ops                     Ops         `json:"ops"`
}

// MarshalJSON gives the pass with its measured phases by name.
func (p Pass) MarshalJSON() ([]byte, error) {
	j := passJSON{
		Rank: p.Rank, Round: p.Round, Cold: p.Cold,
		RecordedNodes: p.RecordedNodes, BuiltDefinitions: p.BuiltDefinitions,
		UploadedDefinitionBytes: p.UploadedDefinitionBytes, SimulationNs: p.SimulationNs, RecordWaitNs: p.RecordWaitNs, DeviceDefinitionBytes: p.DeviceDefinitionBytes,
		RunImageBytes: p.RunImageBytes, RunImageSentBytes: p.RunImageSentBytes,
		LoadedDefinitions: p.LoadedDefinitions, LoadedBytes: p.LoadedBytes, StoreRejected: p.StoreRejected,
		FetchedDefinitions: p.FetchedDefinitions, FetchedBytes: p.FetchedBytes, FetchRejected: p.FetchRejected,
		Ops: p.Ops,
	}
	if p.Has(PhaseDeviceWall) {
		j.DeviceIdleNs = &p.DeviceIdleNs
	}
	f := j.Phases.fields()
	for ph := Phase(0); ph < NumPhases; ph++ {
		if p.Has(ph) {
			v := p.Phases[ph]
			*f[ph] = &v
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Pass) UnmarshalJSON(b []byte) error {
	var j passJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Pass{
		Rank: j.Rank, Round: j.Round, Cold: j.Cold,
		RecordedNodes: j.RecordedNodes, BuiltDefinitions: j.BuiltDefinitions,
		UploadedDefinitionBytes: j.UploadedDefinitionBytes, SimulationNs: j.SimulationNs, RecordWaitNs: j.RecordWaitNs, DeviceDefinitionBytes: j.DeviceDefinitionBytes,
		RunImageBytes: j.RunImageBytes, RunImageSentBytes: j.RunImageSentBytes,
		LoadedDefinitions: j.LoadedDefinitions, LoadedBytes: j.LoadedBytes, StoreRejected: j.StoreRejected,
		FetchedDefinitions: j.FetchedDefinitions, FetchedBytes: j.FetchedBytes, FetchRejected: j.FetchRejected,
		Ops: j.Ops,
	}
	for ph, v := range j.Phases.fields() {
		if *v != nil {
			p.Set(Phase(ph), **v)
		}
	}
	if j.DeviceIdleNs != nil {
		p.DeviceIdleNs = *j.DeviceIdleNs
	}
	return nil
}

// exportedTo says where spans went, for the report's trace line.
func exportedTo(exporter string) string {
	if exporter == "" {
		// Also when an endpoint was given and no span reached it: stderr
		// then says where and why.
		return "not exported (no OTLP endpoint, or no span reached it)"
	}
	return "exported to " + exporter
}

// maxRaceLines bounds the races the text report lists.
const maxRaceLines = 10

// writeGolden renders the golden check: its verdict line, the first
// difference, and the first races.
func (r *Report) writeGolden(b *strings.Builder) {
	g := r.Golden
	if g == nil {
		if r.Device == "skipped" {
			fmt.Fprintf(b, "golden: not checked (device skipped)\n")
		} else {
			fmt.Fprintf(b, "golden: not checked (no pass that ended has a device result to check)\n")
		}
		return
	}
	eager := fmt.Sprintf("eager %s", hex16(uint64(g.EagerDigest)))
	switch {
	case g.EagerRaces > 0:
		eager += fmt.Sprintf(" racy, %d races", g.EagerRaces)
	case g.EagerMatch:
		eager += " equal"
	default:
		eager += " differs"
	}
	switch g.Verdict {
	case "match":
		fmt.Fprintf(b, "golden: match (digest %s = %s %s; %s)\n", hex16(uint64(g.Digest)), g.Reference, hex16(uint64(g.ReferenceDigest)), eager)
	case "racy":
		fmt.Fprintf(b, "golden: RACY (%d races in this form, %d in its %s; digest %s, reference %s; %s)\n",
			g.Races, g.ReferenceRaces, g.Reference, hex16(uint64(g.Digest)), hex16(uint64(g.ReferenceDigest)), eager)
	default:
		fmt.Fprintf(b, "golden: MISMATCH (digest %s, %s %s; %d device tasks, reference %d; %s)\n",
			hex16(uint64(g.Digest)), g.Reference, hex16(uint64(g.ReferenceDigest)), g.Tasks, g.ReferenceTasks, eager)
	}
	if g.DeclaredRaces > 0 {
		fmt.Fprintf(b, "golden: %d races among kernels the model declares may race (its races: section says why); not failed\n", g.DeclaredRaces)
	}
	if d := g.Diff; d != nil {
		fmt.Fprintf(b, "golden: first difference in root %d (%s) elements [%d, %d): last written by %s here, by %s in the reference\n",
			d.Root, d.Name, d.Lo, d.Hi, d.Writer, d.ReferenceWriter)
	}
	for i, rc := range r.Races {
		if i == maxRaceLines {
			fmt.Fprintf(b, "race: ... %d more\n", g.Races-maxRaceLines)
			break
		}
		fmt.Fprintf(b, "race: %s\n", rc.Text)
	}
	if g.Races == 0 {
		for i, rc := range g.EagerRaceList {
			if i == maxRaceLines {
				fmt.Fprintf(b, "eager race: ... %d more\n", g.EagerRaces-maxRaceLines)
				break
			}
			fmt.Fprintf(b, "eager race: %s\n", rc.Text)
		}
	}
}
