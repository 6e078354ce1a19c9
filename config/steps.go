package config

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// A model whose steps change (steps:) runs another program each round, as
// a decode server's steps are not one step: every request's context grows
// a token a step, requests end and new ones start short, the batch moves
// between sizes. The schedule is drawn from a PCG seeded in the file, so
// every run (and every rank) sees the same rounds; what a round changes is
// program params, which the program's and blocks' expressions read as any
// param, and a form's Graph keys follow where a param shapes a body.

// stepVars are the names a steps param's expression reads besides the
// constants and the program params (the form's values): what the round's
// batch of requests is.
var stepVars = []string{"round", "batch", "max_context", "min_context", "sum_context"}

// steps is a compiled steps: section.
type steps struct {
	seed    uint64
	slots   int
	batch   []int64    // drawn uniformly per round
	context [2]int64   // a new request's context, [min, max]
	decode  [2]int64   // the tokens it decodes before it ends, [min, max]
	params  []stepParm // applied in file order
	mu      sync.Mutex
	// drawn is the schedule so far, round by round: the state of round r
	// depends on every earlier one, so it is drawn once, in order.
	drawn []stepVals
	rng   *rand.Rand
	ctx   []int64 // each slot's request: its context, and tokens left
	left  []int64
}

type stepParm struct {
	slot int // program param env slot
	e    *expr
	line int
}

// stepVals is one round's stepVars, in their order.
type stepVals [5]int64

type stepsDoc struct {
	Seed     *yaml.Node `yaml:"seed"`
	Requests *yaml.Node `yaml:"requests"`
	Params   *yaml.Node `yaml:"params"`
}

type requestsDoc struct {
	Slots   *yaml.Node `yaml:"slots"`
	Batch   *yaml.Node `yaml:"batch"`
	Context *yaml.Node `yaml:"context"`
	Decode  *yaml.Node `yaml:"decode"`
}

// maxStepSlots bounds requests.slots: a decode batch of a few hundred is a
// large server's; the bound keeps a typo from drawing a million requests.
const maxStepSlots = 4096

// stepsSection compiles steps: after the program (its params must exist).
func (l *loader) stepsSection(n *yaml.Node) error {
	var d stepsDoc
	if err := l.decode(n, "steps", &d); err != nil {
		return err
	}
	if k := absent(&d, "seed", "requests", "params"); k != "" {
		return l.errf(n, "steps."+k, "", "missing (steps needs seed, requests and params)")
	}
	s := &steps{}
	seed, err := l.constInt(d.Seed, "steps.seed")
	if err != nil {
		return err
	}
	s.seed = uint64(seed)
	var r requestsDoc
	if err := l.decode(d.Requests, "steps.requests", &r); err != nil {
		return err
	}
	if k := absent(&r, "slots", "batch", "context", "decode"); k != "" {
		return l.errf(d.Requests, "steps.requests."+k, "", "missing (requests needs slots, batch, context and decode)")
	}
	slots, err := l.constInt(r.Slots, "steps.requests.slots")
	if err != nil {
		return err
	}
	if slots < 1 || slots > maxStepSlots {
		return l.errf(r.Slots, "steps.requests.slots", r.Slots.Value, "want 1 to %d requests at once", maxStepSlots)
	}
	s.slots = int(slots)
	items, err := l.seq(r.Batch, "steps.requests.batch")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return l.errf(r.Batch, "steps.requests.batch", "[]", "want at least one batch size")
	}
	for _, it := range items {
		v, err := l.constInt(it, "steps.requests.batch")
		if err != nil {
			return err
		}
		if v < 1 || v > slots {
			return l.errf(it, "steps.requests.batch", it.Value, "want a batch size of 1 to slots (%d)", slots)
		}
		s.batch = append(s.batch, v)
	}
	if s.context, err = l.stepRange(r.Context, "steps.requests.context", 1); err != nil {
		return err
	}
	if s.decode, err = l.stepRange(r.Decode, "steps.requests.decode", 1); err != nil {
		return err
	}
	if err := l.stepParams(s, d.Params); err != nil {
		return err
	}
	l.m.steps = s
	return nil
}

// stepRange is a [min, max] with lo <= min <= max.
func (l *loader) stepRange(n *yaml.Node, key string, lo int64) ([2]int64, error) {
	items, err := l.seq(n, key)
	if err != nil {
		return [2]int64{}, err
	}
	if len(items) != 2 {
		return [2]int64{}, l.errf(n, key, nodeText(n), "want [min, max]")
	}
	var out [2]int64
	for i, it := range items {
		if out[i], err = l.constInt(it, key); err != nil {
			return out, err
		}
	}
	if out[0] < lo || out[1] < out[0] {
		return out, l.errf(n, key, nodeText(n), "want [min, max] with %d <= min <= max", lo)
	}
	return out, nil
}

func (l *loader) stepParams(s *steps, n *yaml.Node) error {
	kvs, err := l.keyValues(n, "steps.params")
	if err != nil {
		return err
	}
	if len(kvs) == 0 {
		return l.errf(n, "steps.params", "{}", "want at least one program param to change")
	}
	nv := len(stepVars)
	res := func(name string) (int64, int, int, bool) {
		for i, v := range stepVars {
			if v == name {
				return 0, i, -1, true
			}
		}
		for i, p := range l.m.progParam {
			if p == name {
				return 0, nv + i, -1, true
			}
		}
		v, ok := l.m.consts[name]
		return v, -1, -1, ok
	}
	for _, kv := range kvs {
		k, v := kv.key, kv.value
		slot := -1
		for i, p := range l.m.progParam {
			if p == k.Value {
				slot = i
			}
		}
		if slot < 0 {
			return l.errf(k, "steps.params", k.Value, "not a program param (want one of: %s)", strings.Join(l.m.progParam, ", "))
		}
		if v.Kind != yaml.ScalarNode {
			return l.errf(v, "steps.params."+k.Value, "", "want an expression")
		}
		e, err := parseExpr(v.Value, res)
		if err != nil {
			return l.errf(v, "steps.params."+k.Value, v.Value, "bad expression: %v (names: the constants, the program params and %s)", err, strings.Join(stepVars, ", "))
		}
		s.params = append(s.params, stepParm{slot: slot, e: e, line: v.Line})
	}
	return nil
}

// vals draws the schedule up to round and returns that round's values.
func (s *steps) vals(round int) stepVals {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.seed, 0x6862677374657073)) // "hbgsteps"
		s.ctx, s.left = make([]int64, s.slots), make([]int64, s.slots)
		for i := range s.ctx {
			s.start(i)
		}
	}
	for len(s.drawn) <= round {
		s.drawn = append(s.drawn, s.step(len(s.drawn)))
	}
	return s.drawn[round]
}

func (s *steps) draw(r [2]int64) int64 { return r[0] + s.rng.Int64N(r[1]-r[0]+1) }

// start begins a new request in slot i.
func (s *steps) start(i int) {
	s.ctx[i], s.left[i] = s.draw(s.context), s.draw(s.decode)
}

// step is one round: a batch size is drawn, the first batch requests
// decode a token each (their contexts at the round's start are the
// round's), and a request that decoded its last token ends, a new one
// starting in its slot.
func (s *steps) step(round int) stepVals {
	b := s.batch[s.rng.IntN(len(s.batch))]
	v := stepVals{int64(round), b, 0, s.ctx[0], 0}
	for i := range int(b) {
		v[2], v[3] = max(v[2], s.ctx[i]), min(v[3], s.ctx[i])
		v[4] += s.ctx[i]
		s.ctx[i]++
		if s.left[i]--; s.left[i] == 0 {
			s.start(i)
		}
	}
	return v
}

// apply sets round's params into env (the program's, the form's values
// there already). A failed expression is an *Error at its line.
func (m *Model) applySteps(env []int64, round int) error {
	s := m.steps
	vals := s.vals(round)
	nv := len(stepVars)
	scratch := make([]int64, nv+len(m.progParam))
	copy(scratch, vals[:])
	copy(scratch[nv:], env[:len(m.progParam)])
	var ee evalErr
	out := make([]int64, len(s.params))
	for i, p := range s.params {
		out[i] = p.e.eval(scratch, &ee)
		if ee.err != nil {
			return &Error{File: m.file, Line: p.line, Key: "steps.params." + m.progParam[p.slot], Value: fmt.Sprint(round), Msg: fmt.Sprintf("round %d: %v", round, ee.err), Err: ee.err}
		}
	}
	for i, p := range s.params {
		env[p.slot] = out[i]
	}
	return nil
}

// Steps reports whether the model's steps change round to round (steps:).
func (m *Model) Steps() bool { return m.steps != nil }

// StepParams is round's program params in form (the form's, with the
// steps' applied), by name: what the round runs.
func (m *Model) StepParams(form string, round int) (map[string]int64, error) {
	f := m.formIdx[form]
	if f == nil {
		return nil, fmt.Errorf("%s: %w %q", m.File(), ErrNoForm, form)
	}
	env := append([]int64(nil), f.params...)
	if m.steps != nil {
		if err := m.applySteps(env, round); err != nil {
			return nil, err
		}
	}
	out := make(map[string]int64, len(m.progParam))
	for i, p := range m.progParam {
		out[p] = env[i]
	}
	return out, nil
}

// stepName names round's program in form: its params, which the golden
// check's reference is made per (two rounds of one name run one program).
func (m *Model) stepName(form string, round int) string {
	ps, err := m.StepParams(form, round)
	if err != nil {
		return fmt.Sprintf("round %d", round)
	}
	var b strings.Builder
	for i, p := range m.progParam {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", p, ps[p])
	}
	return b.String()
}

// RunRound is Run for one round of a model whose steps change: the
// program runs with the round's params. A model without steps: runs the
// same program every round.
func (m *Model) RunRound(o stages.Submitter, form string, round int) error {
	_, err := m.runAt(o, form, round)
	return err
}
