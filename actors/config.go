package actors

import (
	"fmt"
	"runtime"
	"time"

	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// MaxRecorders bounds Config.Recorders: recorders past the processors only
// time-share them, and each is an actor started with the runtime, so a
// pool of a million takes gigabytes and outlasts Start's own timeout.
const MaxRecorders = 4096

// Config configures a runtime.
type Config struct {
	// Recorders is the size of the prewarmed recorder pool (default: the
	// processors Go runs on, GOMAXPROCS, at least 2). It bounds how many
	// bodies record at once, never which keys record. A recording is CPU
	// work: recorders beyond the processors only time-share them, and each
	// touches its own buffers, fresh memory in a cold pass (DSv4 full's
	// first pass on 2 cores: 2.23 ms with 8 recorders, 1.96 ms with 2).
	// At most MaxRecorders.
	Recorders int
	// NoRetain drops every Definition after each pass, so each pass records,
	// builds and uploads again (upstream's behaviour, for comparison).
	NoRetain bool
	// SkipDevice stops each pass after the run image is copied.
	SkipDevice bool
	// FullEdges ships every fanin edge the TensorMap resolved, in the run
	// image and in each Definition, instead of their transitive reduction
	// (stages/reduce.go; hbgrun's --reduce-edges=false).
	FullEdges bool
	// DefectsAsWarnings reports the body defects (input written, baked
	// scalar, structure not in key) as warnings instead of failing the pass.
	DefectsAsWarnings bool
	// StrictRecording fails the pass when a body records something
	// unsupported, instead of running that key's calls on the ordinary path.
	StrictRecording bool
	// Timeline asks the device for its per-core timeline.
	Timeline bool
	// CountKernels fills PassResult.KernelTasks: how many device tasks each
	// kernel runs in a pass, Graph nodes included.
	CountKernels bool
	// Device configures each rank's simulated a2a3 die.
	Device npu.Config
	// Golden checks every pass against its golden reference (package golden)
	// and fills PassResult.Golden.
	Golden bool
	// TamperImage, if set, changes every run image before it is copied:
	// for tests that the golden check catches a wrong replay.
	TamperImage func(*stages.RunImage)
	// Tracer makes the spans; nil traces nothing.
	Tracer *trace.Tracer
	// PassTimeout bounds one pass (default 10 minutes).
	PassTimeout time.Duration
	// InFlight bounds the passes of one rank handed to its replay and not
	// yet answered (default 2): the submission orchestrates pass N+1 while
	// pass N is copied and run. 1 makes host and device take turns.
	InFlight int
	// QueueDepth bounds the passes of one rank waiting to start beyond
	// InFlight (default 1024); a pass past it fails at once with a
	// *RankBusyError. The queue is first come, first served.
	QueueDepth int
	// StoreDir is the Definition store on disk (package diskstore) that
	// Definitions outlive the process in, shared by every process that
	// names it; "" or "off" keeps them in memory only. hbgrun's default is
	// diskstore.DefaultDir().
	StoreDir string
	// StoreMax bounds the store on disk in bytes (0: diskstore.DefaultMax).
	StoreMax int64
	// KeepBytes and KeepDefinitions are the residency budget: the bytes
	// of Definitions (their device images) and how many a rank keeps, 0
	// for no bound (stages.PassConfig's). Past it the least recently used
	// are evicted, from the rank and the store in memory, with one warning
	// per rank; an evicted key records again when met.
	KeepBytes       int64
	KeepDefinitions int
	// OrdinaryWhileRecording runs a Graph call whose key has no
	// Definition yet on the ordinary path while a recorder records it, so
	// no pass waits for a recording and a later pass replays the key;
	// false makes the call a shell its pass waits for (record_wait).
	// stages.PassConfig's; without retention every pass waits.
	OrdinaryWhileRecording bool
	// SpinFor is how long a worker goroutine that ends an actor's turn
	// spins for the next one before it parks (0: it parks at once; 250 µs
	// covers a warm DSv4 full turn). A handoff to a spinning worker wakes
	// no OS thread: on a 2-core VM it took the warm full control plane
	// from ~125 to ~70 µs while the other core was free, and made it
	// worse (and doubled the CPU a pass) while the host shared that core
	// with other work, so it is off unless asked for. Spinning stops by
	// itself when the OS preempts a spinner and when runs outnumber
	// spinners (actors/dispatch.go).
	SpinFor time.Duration
	// Peers is where the store looks for a Definition it misses, after the
	// store on disk and before recording it: the other nodes of a cluster
	// (package peer), so that a Definition is recorded once per cluster.
	// nil: nowhere (a single process records what it misses).
	Peers DefinitionSource
}

// EnsureDefaults gives each zero field its default (Recorders GOMAXPROCS,
// PassTimeout 10 minutes, InFlight 2, QueueDepth 1024, the device's
// DefaultConfig), leaving a negative value for Validate to refuse.
func (c *Config) EnsureDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Recorders, max(2, runtime.GOMAXPROCS(0)))
	def(&c.InFlight, 2)
	def(&c.QueueDepth, 1024)
	if c.PassTimeout == 0 {
		c.PassTimeout = 10 * time.Minute
	}
	c.Device.EnsureDefaults()
}

// Validate reports the first field a runtime cannot start with, as a
// *ConfigError (errors.Is ErrInvalidConfig). Start calls EnsureDefaults
// first; a caller that validates alone (a command checking its flags)
// refuses zero where Start would take the default.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Recorders", c.Recorders}, // the pool bounds how many bodies record at once
		{"InFlight", c.InFlight},
		{"QueueDepth", c.QueueDepth},
	} {
		if f.v < 1 {
			return configError(f.name, f.v, "at least 1")
		}
	}
	if c.Recorders > MaxRecorders {
		return configError("Recorders", c.Recorders, fmt.Sprintf("at most %d", MaxRecorders))
	}
	if c.SpinFor < 0 {
		return configError("SpinFor", c.SpinFor, "0 (no spinning) or a positive duration")
	}
	if c.PassTimeout <= 0 {
		return configError("PassTimeout", c.PassTimeout, "a positive duration")
	}
	if c.KeepBytes < 0 {
		return configError("KeepBytes", c.KeepBytes, "0 (no bound) or more bytes")
	}
	if c.KeepDefinitions < 0 {
		return configError("KeepDefinitions", c.KeepDefinitions, "0 (no bound) or more Definitions")
	}
	if c.StoreMax < 0 {
		return configError("StoreMax", c.StoreMax, "0 (the default bound) or more bytes")
	}
	if err := c.Device.Validate(); err != nil {
		return deviceConfigError(err)
	}
	return nil
}

// Start starts the runtime inside an existing actor system: the supervisor,
// the store and the prewarmed recorder pool. Ranks (submission,

// passConfig is the part of the configuration a pass's logic reads.
func (rt *Runtime) passConfig() stages.PassConfig {
	return stages.PassConfig{
		NoRetain: rt.cfg.NoRetain, DefectsAsWarnings: rt.cfg.DefectsAsWarnings,
		StrictRecording: rt.cfg.StrictRecording, SkipDevice: rt.cfg.SkipDevice, CountKernels: rt.cfg.CountKernels,
		FullEdges: rt.cfg.FullEdges, KeepBytes: rt.cfg.KeepBytes, KeepDefinitions: rt.cfg.KeepDefinitions,
		OrdinaryWhileRecording: rt.cfg.OrdinaryWhileRecording,
	}
}
