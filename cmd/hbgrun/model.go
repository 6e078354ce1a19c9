package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/config/models"
)

type modelT = config.Model

// loadModel loads and validates a model config, bounded by --max-tasks; any
// problem with it is the user's, so it exits 2. An empty path is the
// embedded default model.
func loadModel(path string) (*config.Model, error) {
	name, data := models.DefaultName, models.Default
	if path != "" {
		var err error
		if data, err = readInput(path, "a model", maxModelBytes); err != nil {
			return nil, usageError{fmt.Errorf("config: %w", err)}
		}
		name = path
	}
	m, err := config.Parse(name, data)
	if err != nil {
		return nil, usageError{err}
	}
	m.LimitTasks(maxTasksFlag)
	m.LimitEdges(maxEdgesFlag)
	return m, nil
}

// modelArg is the MODEL argument, or "" (the embedded default) when absent.
func modelArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

func modelName(m *config.Model) string { return m.Name }

// orchestrationFor makes one form of a model an orchestration; an unknown
// form, one whose program fails (interpreted once on the ordinary path,
// before any runtime starts) and, unless defects are warnings, one that
// fails a static Graph check (config.Model.GraphChecks: what `hbgrun
// validate` reports, with its file and line) are the user's mistake. As
// warnings, a defect shows when the runtime's second recording finds it.
// What runs but cannot be what was meant (config.Summary.Warnings) is said on
// stderr.
func orchestrationFor(m *config.Model, form string, defectsWarn bool, stderr io.Writer) (*actors.Orchestration, error) {
	o, err := m.Orchestration(form)
	if err != nil {
		return nil, usageError{err}
	}
	warnings, err := config.ValidateForm(m, form)
	if err != nil {
		return nil, usageError{err}
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "hbgrun: warning: %s\n", w)
	}
	if !defectsWarn {
		if err := errors.Join(m.FormChecks(form)...); err != nil {
			return nil, usageError{err}
		}
	}
	return o, nil
}

// Bounds on the files a user names: a model is text the size of the
// problem (DSv4's is 30 KB), and an image says its length in 32 bits.
const (
	maxModelBytes = 64 << 20
	maxImageBytes = math.MaxUint32
)

// readInput reads a file a user names for what: a regular file of at most
// max bytes. A device (/dev/zero) was read until the process ran out of
// memory, and a FIFO blocked the command past its signals.
func readInput(path, what string, max int64) ([]byte, error) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is a %s, not a file (want %s file)", path, fileKind(st.Mode()), what)
	case st.Size() > max:
		return nil, fmt.Errorf("%s is %d bytes, more than %s file can be (%d)", path, st.Size(), what, max)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// It may have grown since the stat.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s is more than %s file can be (%d bytes)", path, what, max)
	}
	return b, err
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file (" + m.Type().String() + ")"
}
