package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/config/models"
)

type modelT = config.Model

// loadModel loads and validates a model config; any problem with it is the
// user's, so it exits 2. An empty path is the embedded default model.
func loadModel(path string) (*config.Model, error) {
	name, data := models.DefaultName, models.Default
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, usageError{fmt.Errorf("config: %w", err)}
		}
		name = path
	}
	m, err := config.Parse(name, data)
	if err != nil {
		return nil, usageError{err}
	}
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
