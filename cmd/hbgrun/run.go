package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/actors"
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
	defects    string
	strict     bool
	store      storeFlags
}

func (f *runFlags) register(c *cobra.Command, withForm bool) {
	fl := c.Flags()
	if withForm {
		fl.StringVar(&f.form, "form", "full", "which form of the model to run (hbgrun validate lists them)")
	}
	fl.IntVar(&f.rounds, "rounds", 5, "passes per rank; the first pass of each rank is reported apart as cold")
	fl.IntVar(&f.ranks, "ranks", 1, "ranks run concurrently, each with its own device")
	fl.IntVar(&f.recorders, "recorders", 8, "size of the prewarmed recorder pool")
	fl.BoolVar(&f.noRetain, "no-retain", false, "drop Definitions after every pass, so each pass records, builds and uploads again (upstream's behaviour)")
	fl.BoolVar(&f.skipDevice, "skip-device", false, "stop each pass after the run image is copied: no simulation, no golden check")
	fl.BoolVar(&f.json, "json", false, "write the report as JSON")
	fl.StringVar(&f.otlp, "otlp", "", "export spans over OTLP to ENDPOINT (grpc://host:4317 or http://host:4318); default: the OTEL_EXPORTER_OTLP_* variables, else nowhere")
	fl.StringVar(&f.traceOut, "trace-out", "", "write a Chrome trace-event file (open it in Perfetto)")
	fl.StringVar(&f.defects, "defects", "error", "what a detected body defect does: error or warn")
	fl.BoolVar(&f.strict, "strict", false, "fail a pass when a body records something unsupported, instead of running that key on the ordinary path")
	f.store.register(fl)
}

func (f *runFlags) check() error {
	switch {
	case f.rounds < 1:
		return usageError{fmt.Errorf("--rounds %d: want at least 1", f.rounds)}
	case f.ranks < 1:
		return usageError{fmt.Errorf("--ranks %d: want at least 1", f.ranks)}
	case f.recorders < 1:
		return usageError{fmt.Errorf("--recorders %d: want at least 1", f.recorders)}
	case f.defects != "error" && f.defects != "warn":
		return usageError{fmt.Errorf("--defects %q: want error or warn", f.defects)}
	}
	return f.store.resolve()
}

func (f *runFlags) config(tr *trace.Tracer, skipDevice bool) actors.Config {
	return actors.Config{
		Recorders:         f.recorders,
		NoRetain:          f.noRetain,
		SkipDevice:        skipDevice,
		DefectsAsWarnings: f.defects == "warn",
		StrictRecording:   f.strict,
		Timeline:          f.traceOut != "",
		Tracer:            tr,
		StoreDir:          f.store.dir,
		StoreMax:          f.store.max,
	}
}

func init() {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [MODEL]",
		Short: "Run a model form for some rounds on some ranks and print upstream's phase table",
		Long: `Run MODEL's form on the host path, the Graph pipeline and the simulated
a2a3 device, and report per phase the min / median / max over the warm passes
(the first pass of each rank apart, as cold), the control-plane total, the
per-operation totals, the counts and the golden check against the eager form.
Without MODEL it runs the embedded default, config/models/dsv4_flash_decode.yaml.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return runCmd(c.Context(), c.OutOrStdout(), modelArg(args), &f)
		},
	}
	f.register(c, true)
	commands = append(commands, c)
}

// session is one invocation's tracing and actor system.
type session struct {
	sys      *actor.ActorSystem
	provider *trace.Provider
	shutdown func(context.Context) error
	tracer   *trace.Tracer
}

func newSession(ctx context.Context, f *runFlags) (*session, error) {
	p, shutdown, err := trace.Setup(ctx, trace.Config{Endpoint: f.otlp, Timeline: f.traceOut != ""})
	if err != nil {
		return nil, usageError{fmt.Errorf("tracing: %w", err)}
	}
	return &session{sys: actors.NewActorSystem(nil), provider: p, shutdown: shutdown, tracer: p.Tracer()}, nil
}

func (s *session) close(ctx context.Context) error {
	s.sys.Shutdown()
	return s.shutdown(ctx)
}

// withSession runs f in a session and flushes its spans afterwards; a
// failed flush is reported only when f itself succeeded.
func withSession(ctx context.Context, f *runFlags, fn func(s *session) error) (err error) {
	s, err := newSession(ctx, f)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.close(context.Background()); err == nil && cerr != nil {
			err = fmt.Errorf("flushing spans: %w", cerr)
		}
	}()
	return fn(s)
}

func runCmd(ctx context.Context, out io.Writer, path string, f *runFlags) error {
	model, err := loadModel(path)
	if err != nil {
		return err
	}
	orch, err := orchestrationFor(model, f.form)
	if err != nil {
		return err
	}
	return withSession(ctx, f, func(s *session) error {
		info := trace.RunInfo{Model: modelName(model), Form: f.form, Rounds: f.rounds, Ranks: f.ranks}
		cctx, cmdSpan := s.tracer.StartCommand(ctx, info)
		defer cmdSpan.End()
		rep, passes, err := runForm(cctx, s, f, orch, info)
		if err != nil {
			cmdSpan.Fail(err)
			return err
		}
		if !f.skipDevice {
			if err := golden(cctx, s, f, model, rep, passes); err != nil {
				return err
			}
		}
		if sc := cmdSpan.OTel().SpanContext(); sc.IsValid() {
			rep.TraceID = sc.TraceID().String()
		}
		rep.Exporter = s.provider.Destination()
		if f.traceOut != "" {
			if err := writeTraceOut(f.traceOut, s.provider, passes, orch.Kernels); err != nil {
				return err
			}
		}
		if f.json {
			return rep.WriteJSON(out)
		}
		return rep.WriteText(out)
	})
}

// runForm runs one form for f.rounds on f.ranks and builds its report.
func runForm(ctx context.Context, s *session, f *runFlags, orch *actors.Orchestration, info trace.RunInfo) (*trace.Report, []*actors.PassResult, error) {
	rt, err := actors.Start(s.sys, f.config(s.tracer, f.skipDevice))
	if err != nil {
		return nil, nil, err
	}
	defer rt.Stop()
	bar := trace.NewProgress(f.rounds*f.ranks, fmt.Sprintf("%s %s", info.Model, info.Form))
	passes, err := rt.Run(ctx, actors.RunSpec{Orch: orch, Rounds: f.rounds, Ranks: f.ranks, Info: info,
		OnPass: func(*actors.PassResult) { bar.Add(1) }})
	bar.Finish()
	if err != nil {
		return nil, passes, err
	}
	rep := buildReport(info, passes)
	for _, m := range rt.Mailboxes.Snapshots() {
		rep.Mailboxes = append(rep.Mailboxes, trace.MailboxStat(m))
	}
	return rep, passes, nil
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
		for _, w := range p.Warnings {
			if !slices.Contains(rep.Warnings, w) {
				rep.Warnings = append(rep.Warnings, w)
			}
		}
	}
	return rep
}

// golden checks the form's digests against the eager form's: one eager pass
// on a device of its own, then every pass of every rank must end with its
// digest and run as many kernel and dummy tasks. Alloc tasks may differ: a
// Graph form can allocate at a call site (DSv4's layer 42 does, as
// upstream's).
func golden(ctx context.Context, s *session, f *runFlags, model *modelT, rep *trace.Report, passes []*actors.PassResult) error {
	first := passes[0].Device
	eager := first
	if f.form != "eager" {
		orch, err := orchestrationFor(model, "eager")
		if err != nil {
			return err
		}
		rt, err := actors.Start(s.sys, actors.Config{Recorders: 1})
		if err != nil {
			return err
		}
		defer rt.Stop()
		res, err := rt.Pass(ctx, orch, 0, 0, trace.Carrier{})
		if err != nil {
			return fmt.Errorf("golden eager pass: %w", err)
		}
		eager = res.Device
	}
	match := true
	for _, p := range passes {
		d := p.Device
		if d.Digest != eager.Digest || d.Tasks-d.Allocs != eager.Tasks-eager.Allocs {
			match = false
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("golden mismatch: rank %d round %d: digest %016x, %d non-alloc tasks; eager %016x, %d",
				p.Pass.Rank, p.Pass.Round, d.Digest, d.Tasks-d.Allocs, eager.Digest, eager.Tasks-eager.Allocs))
		}
	}
	rep.Golden = &trace.Golden{Digest: trace.Digest(first.Digest), EagerDigest: trace.Digest(eager.Digest), Match: match}
	rep.Sim = &trace.SimDevice{
		WallNs: first.SimNs, CriticalPathNs: first.CriticalPathNs,
		Tasks: first.Tasks, Kernels: first.Kernels, Skipped: first.Skipped,
		CoreBusyNs: first.CoreBusyNs, AICCores: len(first.CoreBusyNs) / 3,
	}
	return nil
}

func writeTraceOut(path string, p *trace.Provider, passes []*actors.PassResult, kernels []stages.Kernel) error {
	all := p.Slices()
	next := map[int]int64{} // per rank: where the next pass's device time starts
	for _, r := range passes {
		if r.Device == nil {
			continue
		}
		// Simulated time is its own clock and can outlast the real wall of
		// the simulation, so a rank's passes are laid end to end on it,
		// starting under the first device_wall.
		at, ok := next[r.Pass.Rank]
		if !ok {
			at = r.DeviceStartNs
		}
		all = append(all, deviceSlices(r, kernels, at)...)
		next[r.Pass.Rank] = at + r.Device.SimNs
	}
	fh, err := os.Create(path)
	if err != nil {
		return usageError{fmt.Errorf("--trace-out: %w", err)}
	}
	if err := trace.WriteChromeTrace(fh, all); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// deviceSlices turns a pass's simulated per-core timeline into trace
// slices: one process per rank, one track per core that did work, the
// pass's simulated time starting at at.
func deviceSlices(r *actors.PassResult, kernels []stages.Kernel, at int64) []trace.Slice {
	proc := fmt.Sprintf("rank %d device (simulated)", r.Pass.Rank)
	out := make([]trace.Slice, 0, len(r.Device.Timeline))
	for _, s := range r.Device.Timeline {
		core := fmt.Sprintf("aic %d", s.Core)
		if s.Core >= 24 {
			core = fmt.Sprintf("aiv %d", s.Core-24)
		}
		name := "task"
		if int(s.Kernel) >= 0 && int(s.Kernel) < len(kernels) {
			name = kernels[s.Kernel].Name
		}
		out = append(out, trace.Slice{Process: proc, Track: core, Name: name, StartNs: at + s.Start, DurNs: s.Dur,
			Args: map[string]any{"task": s.Task, "node": s.Node, "block": s.Block, "round": r.Pass.Round}})
	}
	return out
}
