package config

import (
	"errors"
	"fmt"
	"os"
)

// LoadChecked reads a model config and checks it as hbgrun run and hbgrun
// validate do before any pass: it compiles the file (Parse), interprets
// every form on the ordinary path (Validate: views inside their roots,
// shapes, predicates, task lists, a pass within max_tasks) and runs the
// static Graph checks (GraphChecks: a structure that depends on a param
// outside its key, a value computed from a boundary scalar, a boundary slot
// tagged in that a task writes, two blocks whose keys can be the same text).
//
// Load alone compiles the file and stops there, so a model the CLI refuses
// at its line could run through Load and fail later without a position, or
// not fail at all. An embedder that loads models a user wrote should call
// LoadChecked. Every error names the file and line (a *Error, or one of the
// Graph checks' typed errors: errors.As finds each in the joined error);
// the Summary's Warnings are what runs but cannot be what was meant, which
// the CLI prints as warnings. maxTasks bounds a pass as --max-tasks does (0:
// the model's max_tasks, else 4194304).
func LoadChecked(path string, maxTasks int64) (*Model, *Summary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	return ParseChecked(path, data, maxTasks)
}

// ParseChecked is LoadChecked of a model's bytes; name is used in error
// positions.
func ParseChecked(name string, data []byte, maxTasks int64) (*Model, *Summary, error) {
	m, err := Parse(name, data)
	if err != nil {
		return nil, nil, err
	}
	if maxTasks < 0 {
		return nil, nil, errors.New("config: a negative bound on a pass's tasks")
	}
	m.LimitTasks(maxTasks)
	sum, err := Validate(m)
	if err != nil {
		return nil, nil, err
	}
	return m, sum, nil
}
