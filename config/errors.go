package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoForm is asking a model for a form it does not have (a --form or
// --setting flag's mistake), whichever of Run, Orchestration, Size or
// FormParams was asked.
var ErrNoForm = errors.New("no form")

// Error is a mistake in a model config: where it is (file:line), which key,
// the bad value, and what was expected.
type Error struct {
	File  string
	Line  int
	Key   string
	Value string
	Msg   string
	Err   error // underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	if e.Key != "" {
		b.WriteString(e.Key)
		if e.Value != "" {
			fmt.Fprintf(&b, " %q", shorten(e.Value))
		}
		b.WriteString(": ")
	} else if e.Value != "" {
		fmt.Fprintf(&b, "%q: ", shorten(e.Value))
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// StructureError is a Graph body whose structure (a loop range, a condition,
// an alloc shape, a kernel choice, a baked view or scalar) depends on a block
// param that the form does not put into the Graph's key: every call would
// replay the first call's structure (upstream bug #1939). The runtime decides
// whether it is an error or a warning.
type StructureError struct {
	File  string
	Line  int // where the body uses the param
	Form  string
	Block string
	Param string
}

func (e *StructureError) Error() string {
	return fmt.Sprintf("%s:%d: form %s: structure depends on %s, not in the key of %s (add %s to the form's config for %s)",
		e.File, e.Line, e.Form, e.Param, e.Block, e.Param, e.Block)
}

// BakedScalarError is a value in a Graph body computed from a boundary
// scalar rather than passed straight through as a task scalar: a task scalar
// computed from it (upstream's loop MoE epoch hazard), or a view, shape,
// loop range, condition, kernel choice, predicate or task index that uses
// it. A recording bakes the value into the Definition, so every replay
// reuses the recording call's value.
type BakedScalarError struct {
	File   string
	Line   int
	Form   string
	Block  string
	Scalar string // the boundary scalar it is computed from
	Key    string // what uses it: "scalars" (a task scalar), "args", "let.NAME", "loop.to", ...
	Expr   string
}

func (e *BakedScalarError) Error() string {
	if e.Key == "scalars" {
		return fmt.Sprintf("%s:%d: form %s: scalar %q in %s is computed from boundary scalar %s and would be baked into the Definition (pass %s straight through, or make the computed value a boundary scalar)",
			e.File, e.Line, e.Form, e.Expr, e.Block, e.Scalar, e.Scalar)
	}
	return fmt.Sprintf("%s:%d: form %s: %s %q in %s uses boundary scalar %s, whose value the recording would bake into the Definition: every replay would reuse the first call's (a replay patches a boundary scalar only where a task passes it as a scalar as it is; make %s a block param in the Graph's key, or pass the view it selects through the boundary)",
		e.File, e.Line, e.Form, e.Key, e.Expr, e.Block, e.Scalar, e.Scalar)
}

// InputWrittenError is a Graph body task that writes a boundary slot its
// boundary tags in: the caller's outer task would not be the producer of
// what the body wrote, so a later reader would not wait for it (the
// recorder's input-written defect, found before any recording).
type InputWrittenError struct {
	File  string
	Line  int
	Form  string
	Block string
	Slot  string // the boundary slot
	Arg   string // the task argument that writes it
}

func (e *InputWrittenError) Error() string {
	return fmt.Sprintf("%s:%d: form %s: args %q in %s writes boundary slot %s, which the boundary tags in (tag it inout, or write a tensor the body allocates)",
		e.File, e.Line, e.Form, e.Arg, e.Block, e.Slot)
}

// SharedKeyError is two blocks whose Graph keys in one form can be the same
// text (the same key, or templates such as "L{a}" and "L1{b}", which both
// make L10): full_key hashes the key and the construction values, not the
// block, so calls of both would share one Definition, and one block's calls
// would replay the other's body. A Graph key names one block's body.
type SharedKeyError struct {
	File      string
	Line      int // the later of the two blocks' graphs entries
	Form      string
	Block     string // the block at Line
	Key       string // its key, as written ({param}s unfilled)
	Other     string // the block of the earlier entry
	OtherKey  string
	OtherLine int
	Text      string // a key text both can make
}

func (e *SharedKeyError) Error() string {
	const why = "calls of both would share one Definition, and one block's calls would replay the other's body (give each block its own key)"
	if e.Key == e.Text && e.OtherKey == e.Text {
		return fmt.Sprintf("%s:%d: form %s: Graph key %q of %s is also the key of %s (%s:%d): %s",
			e.File, e.Line, e.Form, e.Key, e.Block, e.Other, e.File, e.OtherLine, why)
	}
	return fmt.Sprintf("%s:%d: form %s: Graph key %q of %s can be %q, as can key %q of %s (%s:%d): %s",
		e.File, e.Line, e.Form, e.Key, e.Block, e.Text, e.OtherKey, e.Other, e.File, e.OtherLine, why)
}
