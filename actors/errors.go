package actors

import (
	"errors"
	"fmt"

	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// ErrStopped is returned by Pass (and Run) once Stop has begun: for passes
// in flight or queued at that moment, and for every later call.
var ErrStopped = errors.New("hbg runtime stopped")

// ErrInvalidPass marks a pass that cannot be asked for: a nil
// orchestration, one without a Run function, or a negative rank or round. Pass returns
// it at once, without sending anything.
var ErrInvalidPass = errors.New("invalid pass request")

// ErrRankBusy marks a pass refused because its rank's queue is full (see
// Config.QueueDepth). The error is a *RankBusyError.
var ErrRankBusy = errors.New("rank busy")

// RankBusyError names the rank whose queue was full.
type RankBusyError struct {
	Rank  int
	Round int
	// Queued is the passes that were waiting (Config.QueueDepth).
	Queued int
}

func (e *RankBusyError) Error() string {
	return fmt.Sprintf("rank %d round %d: %d passes already queued on this rank (Config.QueueDepth)", e.Rank, e.Round, e.Queued)
}

// Is makes errors.Is(err, ErrRankBusy) hold.
func (e *RankBusyError) Is(target error) bool { return target == ErrRankBusy }

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid runtime config")

// ConfigError names the Config field that does not validate ("Device."
// first for npu.Config's), so a command can name its own flag for it. It
// is npu's type: one for the runtime's fields and the device's.
type ConfigError = npu.ConfigError

// configError is a runtime field's ConfigError.
func configError(field string, value any, want string) *ConfigError {
	return &ConfigError{Field: field, Value: value, Want: want, Err: ErrInvalidConfig}
}

// deviceConfigError passes on the device config's error as the runtime's,
// its field named under Device and both sentinels kept in the chain; a
// device error of another type passes on whole.
func deviceConfigError(err error) *ConfigError {
	chain := errors.Join(ErrInvalidConfig, err)
	var de *npu.ConfigError
	if !errors.As(err, &de) {
		return &ConfigError{Field: "Device", Value: "config", Want: err.Error(), Err: chain}
	}
	return &ConfigError{Field: "Device." + de.Field, Value: de.Value, Want: de.Want, Err: chain}
}

// ErrBodyPanicked and ErrBodyExited mark a pass failed by a Graph body
// that never returned while it was recorded: it panicked, or it called
// runtime.Goexit (as t.Fatal does). The error names the key; the recorder
// is restarted and serves the next job.
var (
	ErrBodyPanicked = errors.New("body panicked")
	ErrBodyExited   = errors.New("body exited its goroutine (runtime.Goexit) instead of returning")
)

// ErrOrchestrationExited marks a pass failed by an orchestration that
// called runtime.Goexit outside any Graph call; the rank serves the next
// pass.
var ErrOrchestrationExited = errors.New("orchestration exited its goroutine (runtime.Goexit) instead of returning")

// panicError is stages.PanicError, for the shells' recovers.
var panicError = stages.PanicError
