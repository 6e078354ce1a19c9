package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hbg-dev/hbg/stages"
)

// Orchestration makes one form of the model an orchestration to run (with
// actors.Runtime.Pass, say). Its identity, hashed into every full_key, is
// the model's name and the form; a caller that keeps Definitions across
// edits of one model file (a store on disk) should add the file's content
// hash to Name, as hbgrun does.
func (m *Model) Orchestration(form string) (*stages.Orchestration, error) {
	if !slices.Contains(m.Forms(), form) {
		return nil, fmt.Errorf("%s: no form %q (forms: %s)", m.File(), form, strings.Join(m.Forms(), ", "))
	}
	return &stages.Orchestration{
		Name:    m.Name + "/" + form,
		Entry:   m.EntryRoots(),
		Kernels: m.Kernels(),
		Run:     func(o stages.Orchestrator) error { return m.Run(o, form) },
		File:    m.File(),
	}, nil
}
