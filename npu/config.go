// Package npu simulates one a2a3 die per rank: a deterministic
// discrete-event simulation on virtual time of the AICPU scheduler, the AI
// cores and the device memory, fed by the images the host ships (run image,
// Definition images).
//
// Nothing in this package reads the wall clock, sleeps, starts a goroutine
// or iterates a map on a path that decides an outcome: the same inputs give
// the same timeline and the same digests, bit for bit, on any machine and
// under any Go scheduler interleaving. Die is plain state with methods;
// the device actor (actors/device.go) owns one and serializes its requests.
//
// Topology (upstream-runtime.md §5.2): 24 clusters of 1 AIC + 2 AIV cores.
// Core numbering: AIC of cluster c is core c (0..23); its AIVs are cores
// 24+2c and 25+2c (24..71). Scheduler thread s (of 3) owns the clusters
// c with c%3 == s (round robin, AIC and its two AIVs kept together); the
// fourth AICPU thread is the core-less completion resolver.
package npu

import (
	"errors"
	"fmt"
	"math"

	"github.com/hbg-dev/hbg/stages"
)

// Config holds the device model's parameters. DefaultConfig gives a2a3-like
// values. Each field says what it means and where its default comes from,
// which is one of three sources:
//
//   - upstream: a figure from hw-native-sys/simpler's code or documents
//     (the background notes name the file);
//   - calibrated: HBMBytesPerSec alone, fitted once to one measurement
//     (Qwen3-14B decode's 39.3 ms device wall) and then checked, with no
//     further fitting, against a second (DSv4 flash decode's 35.47 ms);
//     docs/benchmarks-history.md, "Cost model calibration";
//   - assumed: this simulator's estimate, no measurement behind it (the
//     upstream repository has no per-kernel timing table, workloads.md §5).
//     The assumed figures shape the timeline but do not set either wall:
//     both steps are memory bound, and halving or doubling any one of them
//     moves either wall by at most 4.3% (CoreBytesPerSec halved, DSv4),
//     where the HBM bandwidth moves them by 43-96% (docs/benchmarks-history.md).
//
// A kernel block's time is DispatchNs + max(bytes / bandwidth share, ops /
// core throughput) (sim_cost.go), its bytes being what the kernel reads of
// its arguments: the whole view, or what the model's access hints
// (stages.Kernel.Touch) say it reads. The hints are model data, not
// parameters: a kernel that reads one expert's weights out of 32, or one
// group's columns out of 8, says so in the model file.
type Config struct {
	// Clusters is the number of AIC+2×AIV clusters. Upstream: a2a3
	// platform_config.h, PLATFORM_CORES_PER_BLOCKDIM = 3, at most 24
	// clusters.
	Clusters int
	// Schedulers is the number of AICPU scheduler threads; one more
	// thread resolves completions. Upstream: hbg runs 3S+1P
	// (scheduler_context.h, assign_cores_to_threads).
	Schedulers int

	// HBMBytesPerSec is the die's sustained HBM bandwidth, shared by every
	// running core. Calibrated: 1.2 TB/s, 75% of the ~1.6 TB/s peak of an
	// Ascend 910B-class die's HBM2e (a sustained streaming fraction), is
	// the value that brings Qwen3-14B decode's simulated wall (graph form)
	// to upstream's measured 39.3 ms; DSv4 full, fitted to nothing, then
	// simulates within 13% of upstream's 35.47 ms.
	HBMBytesPerSec float64
	// CoreBytesPerSec caps one core's share of HBM bandwidth. Assumed: one
	// core's DMA engines cannot draw more than ~1/6 of the die's HBM.
	CoreBytesPerSec float64
	// AICOpsPerSec is one AIC's cube throughput. Assumed: ~256 T ops/s
	// fp16/int8-class per die over 24 AIC cores, ≈ 10.7 T ops/s a core.
	AICOpsPerSec float64
	// AIVOpsPerSec is one AIV's vector throughput. Assumed: 128 fp16 lanes
	// × 2 ops × ~1.8 GHz ≈ 0.46 T ops/s a core.
	AIVOpsPerSec float64
	// AICIntensity and AIVIntensity are the operations per byte read of a
	// kernel whose stages.Kernel.Intensity is 0. Assumed: a decode-time
	// matmul over 8 tokens does 2×8 = 16 ops per weight byte; a vector
	// kernel ~2 ops a byte. With them every decode kernel is memory bound
	// (16 ops/B × 1.2 TB/s / 24 cores = 0.8 T ops/s, under one AIC's 10.7).
	AICIntensity float64
	AIVIntensity float64

	// DispatchNs is the overhead every block pays on its core before its
	// own work. Upstream: the a2a3 core switch gap, ≈ 0.8 µs
	// (2026-07-aicore-swimlane-switch-overhead investigation, workloads.md
	// §5).
	DispatchNs int64

	// The AICPU threads' action costs. Assumed, all of them: the AICPU is
	// an ARM core writing task tokens to core registers, polling COND
	// registers and walking wake lists in device memory; each figure is a
	// few uncached accesses (~50-150 ns a device-memory round trip). They
	// add up to the simulated scheduler time (Result.AICPUBusyNs).
	//
	// SchedDispatchNs: a scheduler claims one block of a ready task and
	// writes its token to a core.
	SchedDispatchNs int64
	// SchedCollectNs: a scheduler notices one finished subtask on its core
	// (COND register poll) and frees the core.
	SchedCollectNs int64
	// ResolveNs: the resolver completes one task (its completion flag, the
	// wake-list exchange).
	ResolveNs int64
	// FaninNs: the resolver resolves one fanin edge, per consumer of a
	// completed task (upstream's consumer-pull: the consumer's fanin state
	// re-checked, its unmet count decremented, routed when it reaches
	// zero). The device resolves every edge it is shipped, so the host's
	// transitive reduction (stages/reduce.go) shows here as less resolver
	// time; where the resolver is the bottleneck, as a shorter wall.
	FaninNs int64
	// RetireNs: the resolver retires one dummy, alloc or predicated-off
	// task (upstream routes them to the dummy queue, retired by P).
	RetireNs int64
	// PredicateNs: evaluating one predicate when its task becomes ready
	// (upstream #1926: the scheduler reads the element and compares).
	PredicateNs int64
	// ClassifyNs: boot classification per task, spread over every AICPU
	// thread (upstream classify_partition, aicpu_executor.cpp).
	ClassifyNs int64
	// GraphLocalizeNs: the first slice of a GRAPH task (validate the
	// submission, verify the shared Definition once, bind the topology).
	GraphLocalizeNs int64
	// MaterializeNodeNs: per node materialized (build its storage, rebind
	// its tensors and scalars, resolve its predicate).
	MaterializeNodeNs int64
	// MaterializeSlice is the nodes materialized per scheduler action.
	// Upstream: GRAPH_MATERIALIZE_SLICE_NODES = 4 (pto_scheduler.h).
	MaterializeSlice int
	// GraphActivateNs: popping an outer GRAPH task whose fanin is met and
	// setting its activation gate.
	GraphActivateNs int64

	// Timeline records every subtask as a (core, task, kernel, start, dur)
	// slice in Result.Timeline, for a Perfetto trace.
	Timeline bool
	// Flows records every dependency a task's completion released, as
	// (producer, consumer) in Result.Flows: a trace's fanin arrows.
	Flows bool
	// TaskDigests records every device task's input digest in
	// Result.TaskDigests, in submission order with each GRAPH task expanded
	// in place: two forms of a model line up task for task, so the first
	// difference names the first task that saw different data.
	TaskDigests bool
	// NoRace turns the race detector off (race.go): by default every
	// launch checks its task graph and lists the races in Result.Races.
	NoRace bool
	// MaxRaces caps Result.Races (0: 256); Result.RaceCount counts all.
	MaxRaces int
	// MaxRaceWork bounds the race detector's steps in one launch (0:
	// DefaultMaxRaceWork): past it the launch fails with ErrRaceWork
	// rather than take minutes, or call a graph it did not finish
	// checking race-free.
	MaxRaceWork int64
}

// DefaultConfig returns a2a3-like parameters.
func DefaultConfig() Config {
	return Config{
		Clusters:          stages.A2A3Clusters,
		Schedulers:        3,
		HBMBytesPerSec:    1.2e12,
		CoreBytesPerSec:   200e9,
		AICOpsPerSec:      256e12 / 24,
		AIVOpsPerSec:      0.46e12,
		AICIntensity:      16,
		AIVIntensity:      2,
		DispatchNs:        800,
		SchedDispatchNs:   150,
		SchedCollectNs:    60,
		ResolveNs:         100,
		FaninNs:           30,
		RetireNs:          80,
		PredicateNs:       50,
		ClassifyNs:        20,
		GraphLocalizeNs:   1000,
		MaterializeNodeNs: 150,
		MaterializeSlice:  4,
		GraphActivateNs:   200,
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid device config")

// ConfigError names a configuration field that does not validate, its
// value and what was expected. It is hbg's one such type: npu.Config's
// Validate returns it, and so does actors.Config's (actors.ConfigError is
// this type), so a command can name its own flag for any field.
// DefaultMaxRaceWork is the race detector's bound on steps when
// Config.MaxRaceWork is 0: a few seconds of checking; DSv4's and Qwen3's
// launches take under a million.
const DefaultMaxRaceWork int64 = 1 << 29

func (c *Config) maxRaceWork() int64 {
	if c.MaxRaceWork > 0 {
		return c.MaxRaceWork
	}
	return DefaultMaxRaceWork
}

type ConfigError struct {
	Field string
	Value any
	Want  string
	// Err is what the error matches with errors.Is: ErrInvalidConfig for a
	// device field (nil means that too); the runtime's ErrInvalidConfig
	// for its fields, joined with the device's error for a device field
	// it passes on, so both sentinels stay in the chain.
	Err error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s %v: want %s", e.Field, e.Value, e.Want)
}

func (e *ConfigError) Unwrap() error {
	if e.Err == nil {
		return ErrInvalidConfig
	}
	return e.Err
}

// EnsureDefaults gives every zero field its DefaultConfig value, so a
// caller sets only what it changes. It leaves a negative value alone, for
// Validate to refuse: a typo must not run as the default.
func (c *Config) EnsureDefaults() {
	d := DefaultConfig()
	c.forEachNumber(&d, func(_ string, p, def *float64) {
		if *p == 0 {
			*p = *def
		}
	}, func(_ string, p, def *int64) {
		if *p == 0 {
			*p = *def
		}
	})
}

// Validate reports the first field a device cannot run with: every count,
// rate and cost must be positive (and finite), and no scheduler thread may
// be left without a cluster to serve. MaxRaces may be 0 (the default cap).
func (c *Config) Validate() error {
	if c.MaxRaceWork < 0 {
		return &ConfigError{Field: "MaxRaceWork", Value: c.MaxRaceWork, Want: "0 (the default bound) or more"}
	}
	if c.MaxRaces < 0 {
		return &ConfigError{Field: "MaxRaces", Value: c.MaxRaces, Want: "0 (the default cap) or more"}
	}
	var err error
	c.forEachNumber(nil, func(name string, p, _ *float64) {
		if err == nil && !(*p > 0 && !math.IsInf(*p, 1)) {
			err = &ConfigError{Field: name, Value: *p, Want: "a positive finite number"}
		}
	}, func(name string, p, _ *int64) {
		if err == nil && *p <= 0 {
			err = &ConfigError{Field: name, Value: *p, Want: "at least 1"}
		}
	})
	if err == nil && c.Schedulers > c.Clusters {
		err = &ConfigError{Field: "Schedulers", Value: c.Schedulers, Want: fmt.Sprintf("at most Clusters (%d): a scheduler serves whole clusters", c.Clusters)}
	}
	return err
}

// forEachNumber calls fl and in on each numeric parameter with its name and,
// when d is not nil, the same field of d. The int-typed counts go through
// in as int64 copies written back, so one list names every parameter once.
func (c *Config) forEachNumber(d *Config, fl func(string, *float64, *float64), in func(string, *int64, *int64)) {
	if d == nil {
		d = &Config{}
	}
	fl("HBMBytesPerSec", &c.HBMBytesPerSec, &d.HBMBytesPerSec)
	fl("CoreBytesPerSec", &c.CoreBytesPerSec, &d.CoreBytesPerSec)
	fl("AICOpsPerSec", &c.AICOpsPerSec, &d.AICOpsPerSec)
	fl("AIVOpsPerSec", &c.AIVOpsPerSec, &d.AIVOpsPerSec)
	fl("AICIntensity", &c.AICIntensity, &d.AICIntensity)
	fl("AIVIntensity", &c.AIVIntensity, &d.AIVIntensity)
	for _, f := range []struct {
		name string
		p, d *int64
	}{
		{"DispatchNs", &c.DispatchNs, &d.DispatchNs},
		{"SchedDispatchNs", &c.SchedDispatchNs, &d.SchedDispatchNs},
		{"SchedCollectNs", &c.SchedCollectNs, &d.SchedCollectNs},
		{"ResolveNs", &c.ResolveNs, &d.ResolveNs},
		{"FaninNs", &c.FaninNs, &d.FaninNs},
		{"RetireNs", &c.RetireNs, &d.RetireNs},
		{"PredicateNs", &c.PredicateNs, &d.PredicateNs},
		{"ClassifyNs", &c.ClassifyNs, &d.ClassifyNs},
		{"GraphLocalizeNs", &c.GraphLocalizeNs, &d.GraphLocalizeNs},
		{"MaterializeNodeNs", &c.MaterializeNodeNs, &d.MaterializeNodeNs},
		{"GraphActivateNs", &c.GraphActivateNs, &d.GraphActivateNs},
	} {
		in(f.name, f.p, f.d)
	}
	for _, f := range []struct {
		name string
		p, d *int
	}{
		{"Clusters", &c.Clusters, &d.Clusters},
		{"Schedulers", &c.Schedulers, &d.Schedulers},
		{"MaterializeSlice", &c.MaterializeSlice, &d.MaterializeSlice},
	} {
		v, dv := int64(*f.p), int64(*f.d)
		in(f.name, &v, &dv)
		*f.p = int(v)
	}
}

func (c *Config) Cores() int { return 3 * c.Clusters }

// shapeOf maps a kernel task's kind to its ready queue.
func shapeOf(k stages.Kind) int {
	switch k {
	case stages.KindAIC:
		return shapeAIC
	case stages.KindAIV:
		return shapeAIV
	}
	return shapeMIX
}

const (
	shapeAIC = iota
	shapeAIV
	shapeMIX
)
