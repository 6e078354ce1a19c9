package stages

import "fmt"

// Kernel is one entry of a model's kernel table.
type Kernel struct {
	Name string
	Core Kind // KindAIC or KindAIV: the core a kernel's code runs on
	// Code identifies the kernel's code: two kernels with the same Code run
	// the same function (the device hashes it into every output digest).
	Code string
	Sig  string // declared signature over i/o/x, informational
	// Folded is the scalars this kernel's code holds as literals where
	// another kernel of the same Code takes them as leading scalars
	// (upstream's gate_3 folds GATE_N_BLOCKS=4, gate_2 takes it): the device
	// hashes Folded ahead of the passed scalars, so the two compute the same
	// function exactly when the passed value equals the folded one.
	Folded []uint64
	// Intensity is the kernel's operations per byte touched; 0 takes the
	// device's default for its core type.
	Intensity float64
	// RaceGroup, when not 0, declares that this kernel may race with the
	// other kernels of its group (the model says why): the device counts
	// those races apart, and only the others fail a run.
	RaceGroup int32
	// Touch lists the arguments this kernel's code reads only part of (rows,
	// or a 2-D tile of rows and columns), at most one entry per argument; an
	// argument not listed is read whole.
	// It is a property of the kernel, not of a call site, because the
	// kernel's code decides what it reads: the routed-expert matmuls
	// receive all 32 experts' weights and read the one a scalar selects.
	// Touch is timing only: the device's cost model counts fewer bytes,
	// while dependencies (the TensorMap) and digests still see the whole
	// view, because which rows and columns are read is decided on the
	// device.
	Touch []Touch
}

// Touch is an access hint: of argument Arg's view (Arg indexes the task's
// argument list), the kernel reads only Rows rows of dim 0 and, of each,
// only Cols columns of the last dim (a 2-D tile of a weight matrix),
// wherever they are. The device counts that argument as Rows × (the
// elements of one dim-0 row of the view) × Cols / (the last dim's extent)
// × element size, never more than the whole view. Rows <= 0 (or not fewer
// than the view has) means every row, Cols <= 0 every column; Cols counts
// only on a view of rank 2 or more, and a hint on a rank-0 view is ignored.
// A kernel in a MIX task shares the task's arguments with the other kernels
// of the task, so an argument of a MIX task is narrowed only when each of
// its kernels hints it, in each dimension.
type Touch struct {
	Arg  int
	Rows int64
	Cols int64
}

// Submitter is the submission API that an orchestration (a Go function, or
// a model config interpreted as one) drives. The ordinary path, the recorder
// and the trace writer all implement it.
type Submitter interface {
	// Alloc submits one alloc task that creates len(specs) roots, with
	// consecutive ids starting at the returned RootID.
	Alloc(specs []RootSpec) (TaskID, RootID)
	// Submit submits a kernel or dummy task. Output-tagged args create new
	// roots: Submit writes each new root into that arg's View.Root (and
	// offset 0) in t.Args, so the caller learns it.
	Submit(t *Task) TaskID
	ScopeBegin(mode ScopeMode)
	ScopeEnd()
	// Graph submits a Graph call: record, replay, or (when not possible)
	// run the body on the ordinary path.
	Graph(call *GraphCall) TaskID
}

// RootCounter is a Submitter that tells the RootID its next new root
// gets: Submit numbers a task's runtime-allocated outputs (tag out)
// consecutively from NumRoots, in argument order, so an interpreter can
// name them before Submit returns (config asks it). Each Submitter of the
// repository counts its roots, checked at compile time beside it.
type RootCounter interface {
	NumRoots() int
}

var (
	_ RootCounter = (*OrdinaryPath)(nil)
	_ RootCounter = (*Recorder)(nil)
)

// BoundaryWriter is a Submitter that lends a Graph call's boundary:
// GraphBoundary lends the caller n argument slots, to evaluate the boundary
// straight into and pass as the call's Boundary, which then is not copied.
// The slots are the caller's until its next call on the Submitter (the
// Graph call they are for).
type BoundaryWriter interface {
	GraphBoundary(n int) []Arg
}

// GraphCall is one Graph(key, boundary, body) call.
type GraphCall struct {
	// Key is the graph key (the block's name, say).
	Key string
	// Config is every construction value that can change the body's
	// structure; it is hashed into full_key.
	Config []uint64
	// Boundary is the tensors the body receives, in slot order.
	Boundary []Arg
	// Template and Locs, when Template is set, stand for Boundary (nil
	// then): slot i is Template's slot i at Locs[i]. Only a LocWriter is
	// passed such a call, and it reads Locs only during the call.
	Template *BoundaryTemplate
	Locs     []Loc
	// Scalars is the boundary scalars; each body use of Scalars[i] carries
	// Src=i so that replay can patch it.
	Scalars []uint64
	// ScalarSrc, for a call made inside a Graph body, is the boundary
	// scalar of the body each Scalars[i] passes as it is (its Src), -1 for
	// a value of the body's own: a recording binds a nested call's scalars
	// to the parent's patched slots through it. Nil: none is the body's.
	ScalarSrc []int32
	// ExtDeps is the call site's external dependencies: tasks outside the
	// body (made by the caller before the call) that body tasks may name in
	// their explicit Deps, in slot order. A Definition records, per slot,
	// which nodes wait on it; the outer GRAPH task takes them as explicit
	// dependencies, as upstream does, so a replay honours them through the
	// outer task's fanin. A body dependency on an outside task that is not
	// listed here is unsupported (the call runs on the ordinary path).
	ExtDeps []TaskID
	// Body submits the block's tasks. It must only reference the boundary
	// tensors and roots it allocates itself. A body that cannot go on
	// returns an error: the pass fails with it, naming the key (a panic is
	// a bug, reported the same way).
	Body BodyFunc
	// Detach, if set, returns a body that owns its environment: the
	// runtime calls it when it keeps the body past the Graph call, to record
	// it on another actor. Without Detach, Body itself must stay valid after
	// Graph returns. Either way the runtime reads Boundary, Scalars and
	// Config only during the call, so a caller may reuse them (and the
	// GraphCall) for its next call: a replay allocates nothing.
	Detach func() BodyFunc
	// KeyComplete says the caller has proven (by a static check of the
	// body, as the model config does) that the body's structure depends on
	// nothing outside Config and bakes no value derived from a boundary
	// scalar. The runtime then skips its own check, a second recording of
	// the key's first call that passes other values.
	KeyComplete bool
}

// BodyFunc is a Graph body.
type BodyFunc func(o Submitter, b *Boundary) error

// PanicError is a recovered panic's value as an error: the value itself
// when it is one, so that errors.Is reaches what a body or an
// orchestration panicked with, as it reaches what one returns.
func PanicError(p any) error {
	if err, ok := p.(error); ok {
		return err
	}
	return fmt.Errorf("%v", p)
}

// KeptBody is the body to keep past the call: Detach's, or Body.
func (c *GraphCall) KeptBody() BodyFunc {
	if c.Detach != nil {
		return c.Detach()
	}
	return c.Body
}

// Boundary is what a body receives: the caller's boundary views and the
// boundary scalars with their provenance.
type Boundary struct {
	Tensors []Arg
	Scalars []Scalar
}

// NewBoundary builds the body's view of a call.
func (c *GraphCall) NewBoundary() *Boundary {
	b := &Boundary{Tensors: c.Boundary, Scalars: make([]Scalar, len(c.Scalars))}
	for i, v := range c.Scalars {
		b.Scalars[i] = Scalar{Value: v, Src: int32(i)}
	}
	return b
}
