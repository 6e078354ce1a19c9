package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/config/models"
)

type modelT = config.Model

// modelHashes is each loaded model's file content hash. It is part of the
// model's orchestration identity, so of every full_key: a Definition kept on
// disk is only ever replayed for the very file it was recorded from.
var modelHashes = map[*config.Model]string{}

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
	sum := sha256.Sum256(data)
	modelHashes[m] = hex.EncodeToString(sum[:8])
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
// (hashed into every full_key) is the model, the form and the model file's
// content hash.
func orchestrationFor(m *config.Model, form string) (*actors.Orchestration, error) {
	o, err := m.Orchestration(form)
	if err != nil {
		return nil, usageError{err}
	}
	o.Name += "@" + modelHashes[m]
	return o, nil
}
