package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/config/models"
	"github.com/hbg-dev/hbg/stages"
)

type modelT = config.Model

// loadModel loads and validates a model config; any problem with it is the
// user's, so it exits 2. An empty path is the embedded default model.
func loadModel(path string) (*config.Model, error) {
	var m *config.Model
	var err error
	if path == "" {
		m, err = config.Parse(models.DefaultName, models.Default)
	} else {
		m, err = config.Load(path)
	}
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

// orchestrationFor makes one form of a model an orchestration. Its identity
// (hashed into every full_key) is the model and the form.
func orchestrationFor(m *config.Model, form string) (*actors.Orchestration, error) {
	if !slices.Contains(m.Forms(), form) {
		return nil, usageError{fmt.Errorf("%s: no form %q (forms: %s)", m.File(), form, strings.Join(m.Forms(), ", "))}
	}
	return &actors.Orchestration{
		Name:    m.Name + "/" + form,
		Entry:   m.EntryRoots(),
		Kernels: m.Kernels(),
		Run:     func(o stages.Orchestrator) error { return m.Run(o, form) },
	}, nil
}
