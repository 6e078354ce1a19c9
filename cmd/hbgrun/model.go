package main

import (
	"fmt"
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
// form, or one whose program fails (interpreted once on the ordinary path,
// before any runtime starts), is the user's mistake.
func orchestrationFor(m *config.Model, form string) (*actors.Orchestration, error) {
	o, err := m.Orchestration(form)
	if err != nil {
		return nil, usageError{err}
	}
	if err := config.ValidateForm(m, form); err != nil {
		return nil, usageError{err}
	}
	return o, nil
}
