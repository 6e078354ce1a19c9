package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/analyze"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/remote"
	"github.com/hbg-dev/hbg/report"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// runFlags are the flags run and compare share.
type runFlags struct {
	form       string
	rounds     int
	ranks      int
	recorders  int
	noRetain   bool
	skipDevice bool
	json       bool
	otlp       string
	traceOut   string
	html       string
	// devicePasses bounds the passes whose device timeline goes into
	// --trace-out.
	devicePasses int
	// traceFlows draws fanin arrows between the device slices of --trace-out.
	traceFlows bool
	defects    string
	strict     bool
	verbose    bool
	inFlight   int
	race       bool
	reduce     bool
	preload    bool
	store      storeFlags
	// remote places the ranks on nodes (run --nodes); model is MODEL's
	// path, whose bytes the nodes are sent.
	remote remoteFlags
	model  string
	// tamper changes every run image before it is copied (tests of the
	// golden check; no flag sets it).
	tamper func(*stages.RunImage)
	// images is run's --images DIR: where to write what the device got.
	images string
	// keepBytes and keepDefs are the residency budget (--keep-bytes,
	// --keep-definitions).
	keepBytes int64
	keepDefs  int
	// newKeys is --new-keys: wait or ordinary.
	newKeys string
}

func (f *runFlags) register(c *cobra.Command, withForm bool) {
	fl := c.Flags()
	if withForm {
		fl.StringVar(&f.form, "form", "", "which form of the model to run (default: its form named full, else its last; hbgrun validate lists them)")
	}
	fl.IntVar(&f.rounds, "rounds", 5, "passes per rank; the first pass of each rank is reported apart as cold")
	fl.IntVar(&f.ranks, "ranks", 1, "ranks run concurrently, each with its own device")
	fl.IntVar(&f.recorders, "recorders", 0, "size of the prewarmed recorder pool (0: the runtime's default, the processors Go runs on, at least 2)")
	fl.BoolVar(&f.noRetain, "no-retain", false, "drop Definitions after every pass, so each pass records, builds and uploads again (what upstream, the C++ runtime hbg follows, does)")
	fl.BoolVar(&f.skipDevice, "skip-device", false, "stop each pass after the run image is copied: no simulation, no golden check")
	fl.BoolVar(&f.json, "json", false, "write the report as JSON")
	fl.StringVar(&f.otlp, "otlp", "", "export spans over OTLP to ENDPOINT (grpc://host:4317 or http://host:4318); default: the OTEL_EXPORTER_OTLP_* variables, else nowhere")
	fl.StringVar(&f.traceOut, "trace-out", "", "write a Chrome trace-event file (open it in Perfetto); a name ending in .gz is written gzipped")
	fl.BoolVar(&f.traceFlows, "trace-flows", false, "draw an arrow in --trace-out from each device task to every task that waited for it (the fanin; large: tens of thousands per DSv4 pass)")
	fl.IntVar(&f.devicePasses, "trace-device-passes", 3, "passes (the first, per form) whose simulated device timeline goes into --trace-out, about 5 MB each for DSv4 (0: none; -1: every pass)")
	fl.StringVar(&f.html, "html", "", "write the report as one self-contained HTML page to FILE (charts inline, nothing loaded: it opens offline)")
	fl.StringVar(&f.defects, "defects", "error", "what a detected body defect does: error or warn")
	fl.IntVar(&f.inFlight, "in-flight", 2, "passes of one rank in flight: the host orchestrates the next while the device runs the previous (1: they take turns; 0: the runtime's default)")
	fl.BoolVar(&f.strict, "strict", false, "fail a pass when a body records something a Definition cannot hold, instead of running that key on the ordinary path (each task submitted alone, its dependencies resolved against every earlier writer)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print a line on stderr as each pass ends")
	fl.BoolVar(&f.reduce, "reduce-edges", true, "ship the transitive reduction of the task graph's fanin, in the run image and each Definition (--reduce-edges=false ships every edge the TensorMap resolved)")
	fl.BoolVar(&f.race, "race", true, "check every device run for races (--race=false skips the detector; the golden check then compares digests only)")
	fl.BoolVar(&f.preload, "preload", true, "before the first pass, load from the store on disk every Definition an earlier run of this model's form kept (--preload=false: each is loaded when a Graph call first asks for it)")
	fl.Int64Var(&f.keepBytes, "keep-bytes", 0, "residency budget: the bytes of Definitions (their device images) a rank keeps; past it the least recently used are evicted, with one warning, and record again when met (0: no bound)")
	fl.IntVar(&f.keepDefs, "keep-definitions", 0, "residency budget: how many Definitions a rank keeps, evicting the least recently used past it (0: no bound)")
	fl.StringVar(&f.newKeys, "new-keys", "wait", "a Graph call whose key has no Definition yet: wait (a shell; its pass waits for the recording, record_wait) or ordinary (it runs on the ordinary path while a recorder records the key, and a later pass replays it)")
	f.store.register(fl)
}

// preload loads orch's Definitions from the store on disk before its first
// pass (actors.Runtime.Preload), as a service would while it starts; nil
// when there is nothing to preload from (no store, --preload=false,
// --no-retain). An interrupt is errInterrupted.
func preload(ctx context.Context, rt *actors.Runtime, f *runFlags, orch *actors.Orchestration, info trace.RunInfo) (*trace.Preload, error) {
	if !f.preload || f.noRetain || rt.Disk() == nil {
		return nil, nil
	}
	t0 := time.Now()
	l, err := rt.Preload(ctx, orch, info)
	if err != nil {
		if interrupted(ctx) {
			return nil, errInterrupted
		}
		return nil, err
	}
	return &trace.Preload{Definitions: l.Loaded, Bytes: l.Bytes, WallNs: time.Since(t0).Nanoseconds(), Rejected: len(l.Rejected)}, nil
}

func (f *runFlags) check() error {
	switch {
	case f.rounds < 1:
		return usageError{fmt.Errorf("--rounds %d: want at least 1", f.rounds)}
	case f.ranks < 1 || f.ranks > maxRanks:
		return usageError{fmt.Errorf("--ranks %d: want 1 to %d", f.ranks, maxRanks)}
	case f.defects != "error" && f.defects != "warn":
		return usageError{fmt.Errorf("--defects %q: want error or warn", f.defects)}
	case f.newKeys != "wait" && f.newKeys != "ordinary":
		return usageError{fmt.Errorf("--new-keys %q: want wait or ordinary", f.newKeys)}
	case f.devicePasses < -1:
		return usageError{fmt.Errorf("--trace-device-passes %d: want -1 (every pass), 0 (none) or more", f.devicePasses)}
	}
	if err := f.remote.check(); err != nil {
		return err
	}
	if f.remote.far() && f.images != "" {
		return usageError{fmt.Errorf("--images with --nodes: the run images are made on the nodes")}
	}
	if err := f.store.resolve(); err != nil {
		return err
	}
	// The runtime defaults and validates its own options, as it does an
	// embedder's; the command only says which flag set the field it refuses.
	cfg := f.config(nil, f.skipDevice)
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		var ce *actors.ConfigError
		if errors.As(err, &ce) && configFlags[ce.Field] != "" {
			return usageError{fmt.Errorf("%s %v: want %s", configFlags[ce.Field], ce.Value, ce.Want)}
		}
		return usageError{err}
	}
	return nil
}

// maxRanks bounds --ranks: each rank is a die with actors and a simulated
// device of its own (about 0.2 MB at rest), and a host drives a few dozen;
// 4096 is far past any, and a typo of a million would otherwise take
// minutes and gigabytes before failing on an actor start's timeout.
const maxRanks = 4096

// configFlags names the flag that sets each actors.Config field a user can
// get wrong from the command line.
var configFlags = map[string]string{
	"Recorders": "--recorders",
	"InFlight":  "--in-flight",
	"StoreMax":  "--store-max",
	// the residency budget
	"KeepBytes":       "--keep-bytes",
	"KeepDefinitions": "--keep-definitions",
}

func (f *runFlags) config(tr *trace.Tracer, skipDevice bool) actors.Config {
	return actors.Config{
		Recorders:              f.recorders,
		NoRetain:               f.noRetain,
		SkipDevice:             skipDevice,
		FullEdges:              !f.reduce,
		DefectsAsWarnings:      f.defects == "warn",
		StrictRecording:        f.strict,
		InFlight:               f.inFlight,
		Timeline:               f.traceOut != "" || f.html != "",
		Tracer:                 tr,
		StoreDir:               f.store.dir,
		StoreMax:               f.store.max,
		KeepBytes:              f.keepBytes,
		KeepDefinitions:        f.keepDefs,
		OrdinaryWhileRecording: f.newKeys == "ordinary",
		Golden:                 !skipDevice,
		Device:                 npu.Config{NoRace: !f.race, Flows: f.traceFlows && f.traceOut != ""},
		TamperImage:            f.tamper,
	}
}

func init() {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [MODEL]",
		Short: "Run a form of a model for some rounds on some ranks and print its phase table",
		Long: `Run a form of MODEL (which of its blocks run as Graphs: a block recorded
once as a Definition, uploaded once, and replayed at every later call) for
--rounds passes on each of --ranks ranks, each rank with its own simulated
a2a3 device.

It prints a headline, then per phase the min / median / max over the warm
passes (every pass after a rank's first); the first pass of each rank, which
records the Definitions, is reported apart as cold. The control plane is the
host's work per pass: host_orch (the orchestration: every task submitted
alone and every Graph call), graph_upload (waiting for new Definitions,
encoding the pass's run image) and arena_h2d (copying the run image to the device); its total
row is the spread of per-pass sums. Then the per-operation totals, the counts
and the golden check: each pass's device result against its inline twin (the
same program with every Graph call's body submitted inline, as ordinary
tasks) and against the eager form (the model with no Graphs), and every
device run checked for races. A golden mismatch or a race exits 1.
docs/reading-output.md explains every line.
Without MODEL it runs the embedded default, config/models/dsv4_flash_decode.yaml.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return runCmd(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), modelArg(args), &f)
		},
	}
	f.register(c, true)
	f.remote.register(c.Flags())
	c.Flags().StringVar(&f.images, "images", "", "write every run image the device gets (run-NNNN.run) and every Definition they replay (HASH.def) to DIR; hbgrun describe prints them")
	addMaxTasks(c)
	commands = append(commands, c)
}

func runCmd(ctx context.Context, out, stderr io.Writer, path string, f *runFlags) error {
	t0 := time.Now()
	model, err := loadModel(path)
	if err != nil {
		return err
	}
	if f.form == "" {
		f.form = model.DefaultForm()
	}
	if f.form == analyze.AutoForm && f.remote.far() && !slices.Contains(model.Forms(), f.form) {
		// The nodes get the model file's bytes, which hold no form auto.
		return usageError{fmt.Errorf("--form auto with --nodes: the nodes read the model file, which has no form auto (print it with hbgrun analyze MODEL --emit-form auto and add it under forms:)")}
	}
	if err := autoForm(ctx, model, []string{f.form}, stderr); err != nil {
		return err
	}
	orch, err := orchestrationFor(model, f.form, f.defects == "warn", stderr)
	if err != nil {
		return err
	}
	f.model = path
	loaded := time.Now()
	var dump *imageDump
	if f.images != "" {
		if dump, err = newImageDump(f.images, &f.store.dir, f.noRetain); err != nil {
			return err
		}
		defer dump.close()
		f.tamper = dump.observe(f.tamper)
	}
	htmlOut, err := createOutput("--html", f.html)
	if err != nil {
		return err
	}
	s, traceOut, err := openSession(ctx, f, stderr)
	if err != nil {
		htmlOut.discard()
		return err
	}
	info := trace.RunInfo{Model: modelName(model), Form: f.form, Rounds: f.rounds, Ranks: f.ranks}
	cctx, cmdSpan := s.tracer.StartCommandAt(ctx, info, t0)
	s.tracer.LoadedModel(cctx, info.Model, t0, loaded)
	rep, passes, err := runForm(cctx, s, f, orch, info)
	autoWarnings(rep)
	if dump != nil {
		err = errors.Join(err, dump.finish(f.store.dir, stderr))
	}
	var failed error // the golden check's: reported, then exit 1
	if err == nil && !f.skipDevice {
		failed = golden(rep, passes)
	}
	if err != nil && !errors.Is(err, errInterrupted) {
		cmdSpan.Fail(err)
	}
	if sc := cmdSpan.OTel().SpanContext(); rep != nil && sc.IsValid() {
		rep.TraceID = sc.TraceID().String()
	}
	// The root span ends before the flush, so that an interrupted run's
	// trace has it too.
	cmdSpan.End()
	if rep != nil {
		err = errors.Join(err, traceOut.write(func(w io.Writer) error {
			return writeChromeTrace(w, s.provider, [][]*actors.PassResult{passes}, []string{""}, orch.Kernels, f.devicePasses)
		}))
	} else {
		traceOut.discard()
		htmlOut.discard()
	}
	dest, ferr := s.finish()
	if rep == nil {
		return errors.Join(err, ferr)
	}
	rep.Exporter = dest
	rep.Timeline = timelineOf(passes, 0, orch.Kernels)
	var werr error
	if f.json {
		werr = rep.WriteJSON(out)
	} else {
		werr = rep.WriteTextRows(out, f.verbose)
	}
	herr := htmlOut.write(func(w io.Writer) error { return report.Write(w, report.Run(rep)) })
	return errors.Join(err, ferr, werr, herr, failed)
}

// runForm runs one form for f.rounds on f.ranks and builds its report. When
// the command is interrupted it stops the runtime and reports the passes
// that ended, with errInterrupted; it reports none (nil) when none ended,
// and says so in the error (an interruption).
func runForm(ctx context.Context, s *session, f *runFlags, orch *actors.Orchestration, info trace.RunInfo) (*trace.Report, []*actors.PassResult, error) {
	var rt interface {
		Run(context.Context, actors.RunSpec) ([]*actors.PassResult, error)
		Stop(context.Context) error
	}
	local, far, err := startRanks(s, f, orch)
	if err != nil {
		return nil, nil, err
	}
	if far != nil {
		rt = far
	} else {
		rt = local
	}
	st := &stopper{rt: rt}
	defer st.stop()
	var pre *trace.Preload
	if local != nil {
		if pre, err = preload(ctx, local, f, orch, info); err != nil {
			return nil, nil, err
		}
	}
	bar := trace.NewProgress(f.rounds*f.ranks, fmt.Sprintf("%s %s", info.Model, info.Form))
	var mu sync.Mutex
	var ended []*actors.PassResult
	type result struct {
		passes []*actors.PassResult
		err    error
	}
	ran := make(chan result, 1)
	go func() {
		passes, err := rt.Run(ctx, actors.RunSpec{Orchestration: orch, Rounds: f.rounds, Ranks: f.ranks, Info: info,
			OnPass: func(p *actors.PassResult) {
				bar.Add(1)
				mu.Lock()
				defer mu.Unlock()
				ended = append(ended, p)
				if f.verbose {
					digest := ""
					if p.Device != nil {
						digest = fmt.Sprintf(" (digest %016x)", p.Device.Digest)
					}
					fmt.Fprintf(s.stderr, "hbgrun: pass ended: rank %d round %d%s\n", p.Pass.Rank, p.Pass.Round, digest)
				}
			}})
		ran <- result{passes, err}
	}()
	var r result
	select {
	case r = <-ran:
	case <-ctx.Done():
		st.stop()
		select {
		case r = <-ran:
		case <-time.After(stopGrace):
		}
	}
	bar.Finish()
	lost := r.err != nil && errors.Is(r.err, remote.ErrNodeLost)
	if interrupted(ctx) || lost {
		mu.Lock()
		passes := slices.Clone(ended)
		mu.Unlock()
		stop := errInterrupted
		if !interrupted(ctx) {
			stop = r.err
		}
		if len(passes) == 0 {
			if interrupted(ctx) {
				stop = &interruption{ended: 0, total: f.rounds * f.ranks}
			}
			return nil, nil, stop
		}
		slices.SortFunc(passes, func(a, b *actors.PassResult) int {
			return cmp.Or(cmp.Compare(a.Pass.Rank, b.Pass.Rank), cmp.Compare(a.Pass.Round, b.Pass.Round))
		})
		rep := buildReport(info, passes)
		// Each pass that ended was checked as it ended: the report shows
		// those checks (a mismatch among them too), and the exit stays the
		// interrupt's or the lost node's.
		_ = reportGolden(rep, passes)
		why := "interrupted"
		if !interrupted(ctx) {
			why = "a node was lost"
		}
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: %d of %d passes ended; the golden check is theirs", why, len(passes), f.rounds*f.ranks))
		return rep, passes, stop
	}
	if r.err != nil {
		return nil, r.passes, r.err
	}
	rep := buildReport(info, r.passes)
	rep.Preload = pre
	if far != nil {
		// The nodes' warnings (store writes, spans they could not export)
		// come as their runs are released, which a node's flush to a slow
		// collector may hold up to its own bound (10 s): wait past it.
		if err := st.stopWithin(flushTimeout); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%v: the nodes' own warnings are not known", err))
		}
		rep.Warnings = append(rep.Warnings, far.Warnings()...)
		return rep, r.passes, nil
	}
	for _, err := range local.FlushStore() {
		rep.Warnings = append(rep.Warnings, err.Error())
	}
	for _, m := range local.Mailboxes.Snapshots() {
		rep.Mailboxes = append(rep.Mailboxes, trace.MailboxStat(m))
	}
	return rep, r.passes, nil
}

// buildReport computes the report from the passes: every figure in it comes
// from the work that was done.
func buildReport(info trace.RunInfo, passes []*actors.PassResult) *trace.Report {
	tp := make([]trace.Pass, len(passes))
	for i, p := range passes {
		tp[i] = p.Pass
	}
	rep := trace.NewReport(info, tp)
	first := passes[0]
	c := &rep.Counts
	c.HostSubmissions = int64(first.Counts.HostSubmissions)
	c.OrdinaryTasks = int64(first.Counts.OrdinaryTasks)
	c.GraphSubmissions = int64(first.Counts.GraphSubmissions)
	c.Definitions = int64(first.Counts.Definitions)
	c.DeviceTasks = int64(first.Counts.ExpectedDeviceTasks)
	if first.Device != nil {
		c.DeviceTasks = int64(first.Device.Tasks)
	}
	for _, p := range passes {
		c.RecordedDefinitions += int64(p.Pass.BuiltDefinitions)
		c.RecordedNodes += int64(p.Pass.RecordedNodes)
		c.Demoted += int64(p.Counts.Demoted)
		c.BoundaryMismatches += int64(p.Counts.BoundaryMismatches)
		c.LoadedDefinitions += int64(p.Pass.LoadedDefinitions)
		c.LoadedBytes += p.Pass.LoadedBytes
		c.StoreRejected += int64(p.Pass.StoreRejected)
		c.FetchedDefinitions += int64(p.Pass.FetchedDefinitions)
		c.FetchedBytes += p.Pass.FetchedBytes
		c.FetchRejected += int64(p.Pass.FetchRejected)
		servingCounts(&c.Serving, p)
		for _, w := range p.Warnings {
			if !slices.Contains(rep.Warnings, w) {
				rep.Warnings = append(rep.Warnings, w)
			}
		}
	}
	if v := &c.Serving; v.GraphCalls > 0 {
		v.HitRate = float64(v.GraphCalls-v.ShellCalls-v.OrdinaryWhileRecording-c.BoundaryMismatches) / float64(v.GraphCalls)
	}
	return rep
}

// servingCounts adds a pass's keys to the run's: calls, waits, evictions,
// and rank 0's Definitions alive round by round.
func servingCounts(v *trace.Serving, p *actors.PassResult) {
	pc := &p.Counts
	v.GraphCalls += int64(pc.GraphCalls)
	v.ShellCalls += int64(pc.Shells)
	v.EvictedDefinitions += int64(pc.Evicted)
	v.KeysMet += int64(pc.KeysMet)
	v.Rerecorded += int64(pc.Rerecorded)
	if p.Pass.RecordWaitNs > 0 {
		v.RecordWaitPasses++
		v.RecordWaitNs += p.Pass.RecordWaitNs
	}
	v.OrdinaryWhileRecording += int64(pc.OrdinaryWhileRecording)
	v.KeptBytesMax = max(v.KeptBytesMax, pc.KeptBytes)
	v.DeviceBytesMax = max(v.DeviceBytesMax, p.Pass.DeviceDefinitionBytes)
	if p.Pass.Rank == 0 {
		v.DefinitionsAlive = append(v.DefinitionsAlive, pc.Kept)
	}
}

// golden reports the library's golden check of the passes (the first
// failure, else the first pass) and the first pass's simulated device; it
// returns the failure.
func golden(rep *trace.Report, passes []*actors.PassResult) error {
	failed := reportGolden(rep, passes)
	first := passes[0].Device
	rep.Sim = &trace.SimDevice{
		WallNs: first.SimNs, CriticalPathNs: first.CriticalPathNs,
		Tasks: first.Tasks, Kernels: first.Kernels, Skipped: first.Skipped,
		CoreBusyNs: first.CoreBusyNs, AICCores: len(first.CoreBusyNs) / 3,
		FaninEdges: first.FaninEdges, ShippedEdges: first.ShippedEdges,
	}
	for _, ns := range first.AICPUBusyNs {
		rep.Sim.SchedulerNs += ns
	}
	return failed
}

// writeChromeTrace writes the run's spans, each pass's on a slot track of
// its rank (trace.SeparatePasses), and the simulated device timeline of the
// first devicePasses passes of each form (-1: all). forms[i] names
// passes[i]'s form in the device processes ("" for a run of one form).
func writeChromeTrace(w io.Writer, p *trace.Provider, passes [][]*actors.PassResult, forms []string, kernels []stages.Kernel, devicePasses int) error {
	all := trace.SeparatePasses(p.Slices())
	var flows []trace.Flow
	for i, ps := range passes {
		n := 0
		for _, r := range ps {
			if devicePasses >= 0 && n >= devicePasses {
				break
			}
			if r != nil && r.Device != nil {
				sl := deviceSlices(r, forms[i], kernels)
				all = append(all, sl...)
				flows = append(flows, deviceFlows(r, sl)...)
				n++
			}
		}
	}
	return trace.WriteChromeTraceFlows(w, all, flows)
}

// deviceFlows turns a pass's dependencies (npu.Config.Flows) into arrows
// from the producer's last block to the consumer's first, sl being the
// pass's device slices in timeline order. A task that ran on no core (a
// dummy, an alloc, a task predicated off, an outer GRAPH task) has no
// slice, and its arrows are left out.
func deviceFlows(r *actors.PassResult, sl []trace.Slice) []trace.Flow {
	if len(r.Device.Flows) == 0 {
		return nil
	}
	type ends struct{ first, last int }
	at := make(map[npu.TaskRef]*ends, len(sl))
	for i, s := range r.Device.Timeline {
		ref := npu.TaskRef{Task: s.Task, Node: s.Node}
		e := at[ref]
		if e == nil {
			at[ref] = &ends{i, i}
			continue
		}
		if s.Start < r.Device.Timeline[e.first].Start {
			e.first = i
		}
		if s.Start+s.Dur > r.Device.Timeline[e.last].Start+r.Device.Timeline[e.last].Dur {
			e.last = i
		}
	}
	out := make([]trace.Flow, 0, len(r.Device.Flows))
	for _, f := range r.Device.Flows {
		from, to := at[f.From], at[f.To]
		if from == nil || to == nil {
			continue
		}
		a, b := sl[from.last], sl[to.first]
		// The arrow's tail lies inside the producer's slice, its head at the
		// consumer's start, so each binds to its own slice.
		out = append(out, trace.Flow{
			From: trace.FlowEnd{Process: a.Process, Track: a.Track, Ns: a.StartNs + max(a.DurNs-1, 0)},
			To:   trace.FlowEnd{Process: b.Process, Track: b.Track, Ns: b.StartNs},
		})
	}
	return out
}

// deviceSlices turns a pass's simulated per-core timeline into trace
// slices: one process per pass (rank and round), one track per core that
// did work, starting where the pass's device_wall span starts. Simulated
// time is its own clock and can outlast the real wall of the simulation,
// so a pass gets a process of its own, named for its clock, rather than
// sharing one with the rank's next pass, which may start before its
// simulated time ends. A node's slice is named by its Graph key and
// kernel.
func deviceSlices(r *actors.PassResult, form string, kernels []stages.Kernel) []trace.Slice {
	proc := fmt.Sprintf("rank %d device (simulated clock) round %d", r.Pass.Rank, r.Pass.Round)
	if form != "" {
		proc = form + " " + proc
	}
	out := make([]trace.Slice, 0, len(r.Device.Timeline))
	for _, s := range r.Device.Timeline {
		core := trace.CoreName(int(s.Core), len(r.Device.CoreBusyNs)/3)
		name := "task"
		if int(s.Kernel) >= 0 && int(s.Kernel) < len(kernels) {
			name = kernels[s.Kernel].Name
		}
		args := map[string]any{"task": s.Task, "node": s.Node, "block": s.Block, "rank": r.Pass.Rank, "round": r.Pass.Round}
		if s.Key != "" {
			name = s.Key + ": " + name
			args["graph_key"] = s.Key
		}
		out = append(out, trace.Slice{Process: proc, Track: core, Name: name, StartNs: r.DeviceStartNs + s.Start, DurNs: s.Dur, Args: args})
	}
	return out
}

// timelineWidth is the columns a report's device timeline is cut for: the
// HTML page draws it this wide.
const timelineWidth = 1000

// timelineOf cuts down the device timeline of the pass a report draws:
// rank rank0's median warm pass by its device time (device_idle before it
// plus its device wall), what a steady step looks like (the first warm
// pass can be an outlier: a 4.45 ms idle where every other pass had none),
// else its first; nil when no pass kept one.
func timelineOf(passes []*actors.PassResult, rank0 int, kernels []stages.Kernel) *trace.DeviceTimeline {
	var warm []*actors.PassResult
	var pick *actors.PassResult
	for _, p := range passes {
		if p == nil || p.Device == nil || len(p.Device.Timeline) == 0 || p.Pass.Rank != rank0 {
			continue
		}
		if p.Pass.Cold {
			if pick == nil {
				pick = p
			}
			continue
		}
		warm = append(warm, p)
	}
	if len(warm) > 0 {
		span := func(p *actors.PassResult) int64 { return p.Pass.DeviceIdleNs + p.Pass.Phases[trace.PhaseDeviceWall] }
		slices.SortStableFunc(warm, func(a, b *actors.PassResult) int {
			return cmp.Or(cmp.Compare(span(a), span(b)), cmp.Compare(a.Pass.Round, b.Pass.Round))
		})
		pick = warm[(len(warm)-1)/2]
	}
	if pick == nil {
		return nil
	}
	d := pick.Device
	sl := make([]trace.TimelineSlice, len(d.Timeline))
	for i, s := range d.Timeline {
		name := ""
		if int(s.Kernel) >= 0 && int(s.Kernel) < len(kernels) {
			name = kernels[s.Kernel].Name
		}
		sl[i] = trace.TimelineSlice{Core: int(s.Core), StartNs: s.Start, DurNs: s.Dur, Key: s.Key, Kernel: name}
	}
	aic := len(d.CoreBusyNs) / 3
	t := trace.NewDeviceTimeline(sl, d.SimNs, timelineWidth, func(c int) string { return trace.CoreName(c, aic) })
	t.Rank, t.Round = pick.Pass.Rank-rank0, pick.Pass.Round
	t.Median, t.Of = len(warm) > 0, max(len(warm), 1)
	if pick.Pass.Has(trace.PhaseDeviceWall) {
		t.IdleNs = pick.Pass.DeviceIdleNs
	}
	return t
}
