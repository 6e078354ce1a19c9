package config

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// A form's step (forms.NAME.step: {key: TEXT}) makes the whole program one
// Graph call: its boundary is every entry tensor, whole, tagged inout (the
// step reads and writes them, and nothing else in the pass does), and its
// body is the program's, in which the block calls the form's graphs name are
// Graphs of their own, child Definitions of the step's (a Graph of Graphs,
// stages.Recorder.Graph). A warm pass is then one replay. The step's key is
// hashed with every program param (the form fixes them); the program's
// host reads are reads of the model file's entry tables, which full_key's
// identity covers, so they hold in the step's body as in the program.

// stepSpec compiles a form's step entry.
func (l *loader) stepSpec(fm *form, n *yaml.Node) (*graphSpec, error) {
	var d graphDoc
	if err := l.decode(n, "step", &d); err != nil {
		return nil, err
	}
	p := l.m.program
	g := &graphSpec{block: p, key: "step", line: n.Line}
	if k := d.Key; k != nil {
		if k.Value == "" || len(k.Value) > maxKeyLen || strings.ContainsAny(k.Value, "{}") {
			return nil, l.errf(k, "forms."+fm.name+".step.key", shorten(k.Value), "want a literal key of 1 to %d bytes (the step's values are the program params, all hashed into its full_key)", maxKeyLen)
		}
		g.key = k.Value
	}
	if d.Config != nil {
		return nil, l.errf(d.Config, "forms."+fm.name+".step.config", "", "the step hashes every program param; leave config out")
	}
	g.parts = []keyPart{{lit: g.key, slot: -1}}
	for i := range p.params {
		g.config = append(g.config, i)
		g.inKey |= 1 << uint(i)
	}
	g.complete = true
	return g, nil
}

// stepCall makes the program frame fr's pass one Graph call of the form's
// step.
func (r *runner) stepCall(o *sub, fr *frame) {
	m, f := r.model, r.form
	gc := &fr.graphCall
	if gc.Body == nil || fr.stepOf != f {
		// Made once per form on this frame: Body reads only the model and
		// the form, both immutable, so it is valid after the call too (a
		// recorder runs it later) and needs no Detach.
		fr.stepOf = f
		*gc = stages.GraphCall{Body: m.stepBody(f)}
		for i := range m.entryViews {
			gc.Boundary = append(gc.Boundary, stages.Arg{Tag: stages.TagInOut, View: m.entryViews[i]})
		}
		for _, v := range f.params {
			gc.Config = append(gc.Config, uint64(v))
		}
	}
	gc.Key, gc.KeyComplete = f.step.key, f.step.complete
	o.Graph(gc)
}

// stepBody is the step's body: the program, on a runner of its own, over
// the boundary's entry tensors, as a Graph body (inGraph: its Graph calls
// are children).
func (m *Model) stepBody(f *form) stages.BodyFunc {
	return func(bo stages.Submitter, b *stages.Boundary) error {
		br := m.newRunner(f)
		fr := br.frame(m.program)
		copy(fr.env, f.params)
		for i := range m.entryViews {
			fr.tensors[i] = b.Tensors[i].View
		}
		fr.resetTasks()
		fr.inGraph = true
		br.body(subOf(bo), fr, m.program.body)
		fr.inGraph = false
		if br.err != nil {
			return &BodyError{Key: f.step.key, Err: br.err}
		}
		return nil
	}
}
