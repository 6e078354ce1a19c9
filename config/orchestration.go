package config

import (
	"fmt"
	"strings"

	"github.com/hbg-dev/hbg/stages"
)

// Orchestration makes one form of the model an orchestration to run (with
// actors.Runtime.Pass, say). Its identity, hashed into every full_key, is
// the model's name, the form and the model file's content hash, so a
// Definition kept on disk is only ever replayed for the very file it was
// recorded from.
func (m *Model) Orchestration(form string) (*stages.Orchestration, error) {
	if m.formIdx[form] == nil { // a hidden form (AddForm) runs too
		return nil, fmt.Errorf("%s: %w %q (forms: %s)", m.File(), ErrNoForm, form, strings.Join(m.Forms(), ", "))
	}
	o := &stages.Orchestration{
		Name:    m.Name + "/" + form + "@" + m.contentHash + m.formIdx[form].generated,
		Entry:   m.EntryRoots(),
		Kernels: m.Kernels(),
		Run:     func(o stages.Submitter) error { return m.Run(o, form) },
		File:    m.File(),
		// A model's bound holds until a command or a node sets its own.
		MaxEdges: m.MaxEdges(),
	}
	if m.steps != nil {
		base := *o
		o.At = func(round int) *stages.Orchestration {
			r := base
			r.Run = func(o stages.Submitter) error { return m.RunRound(o, form, round) }
			r.Step = m.stepName(form, round)
			return &r
		}
		o.Step = m.stepName(form, 0)
	}
	return o, nil
}
