package stages

import "fmt"

// DType is an element type. Sizes are in bytes.
type DType uint8

const (
	DTypeInvalid DType = iota
	BF16
	FP16
	FP32
	INT8
	INT32
	INT64
	UINT8
	UINT32
	UINT64
)

var dtypeNames = [...]string{"invalid", "bf16", "fp16", "fp32", "int8", "int32", "int64", "uint8", "uint32", "uint64"}
var dtypeSizes = [...]int64{0, 2, 2, 4, 1, 4, 8, 1, 4, 8}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

// Size is the element size in bytes.
func (d DType) Size() int64 { return dtypeSizes[d] }

// ParseDType accepts the names the reference traces use.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if i > 0 && n == s {
			return DType(i), nil
		}
	}
	return DTypeInvalid, fmt.Errorf("unknown dtype %q (want one of bf16, fp16, fp32, int8, int32, int64, uint8, uint32, uint64)", s)
}

// Tag is an argument's direction, which decides its dependency semantics
// (upstream-runtime.md §1.4).
type Tag uint8

const (
	TagInvalid Tag = iota
	// TagInput reads: creator edge plus a TensorMap lookup.
	TagInput
	// TagOutput is a runtime-allocated output: it creates a new root owned by
	// the task; no lookup, not registered.
	TagOutput
	// TagOutputExisting writes an existing tensor: creator edge, registers.
	TagOutputExisting
	// TagInOut reads and writes: creator edge, lookup, registers; an inout
	// that covers an older entry retires it.
	TagInOut
	// TagNoDep: creator edge only.
	TagNoDep
)

var tagNames = [...]string{"?", "i", "o", "oe", "x", "nd"}

// String gives the reference trace's short name.
func (t Tag) String() string { return tagNames[t] }

// Writes reports whether the tag makes the task a producer of the region.
func (t Tag) Writes() bool { return t == TagOutputExisting || t == TagInOut || t == TagOutput }

// ParseTag accepts the trace's short names and the config's long ones.
func ParseTag(s string) (Tag, error) {
	switch s {
	case "i", "in", "input":
		return TagInput, nil
	case "o", "out", "output":
		return TagOutput, nil
	case "oe", "out_existing", "output_existing":
		return TagOutputExisting, nil
	case "x", "inout":
		return TagInOut, nil
	case "nd", "no_dep":
		return TagNoDep, nil
	}
	return TagInvalid, fmt.Errorf("unknown tag %q (want in, out, out_existing, inout or no_dep)", s)
}

// Kind is a task's core shape.
type Kind uint8

const (
	KindInvalid Kind = iota
	KindAIC
	KindAIV
	KindMIX // 1 AIC + 2 AIV of one cluster
	KindDummy
	KindAlloc
	// KindGraph is the outer task of a Graph submission: no core, expanded
	// into its Definition's nodes on the device.
	KindGraph
)

var kindNames = [...]string{"?", "aic", "aiv", "mix", "dummy", "alloc", "graph"}

func (k Kind) String() string { return kindNames[k] }

// ParseKind accepts the trace's names.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if i > 0 && n == s {
			return Kind(i), nil
		}
	}
	return KindInvalid, fmt.Errorf("unknown core type %q (want aic, aiv, mix, dummy or alloc)", s)
}

// ScopeMode is auto (TensorMap tracking) or manual (explicit deps only).
type ScopeMode uint8

const (
	ScopeAuto ScopeMode = iota
	ScopeManual
)

// TaskID is a task's submission index in a run (ordinary tasks and outer
// GRAPH tasks share the sequence). Inside a recording, node i of the body is
// privateTaskBase+i.
type TaskID int32

// NoTask marks "no creator" (entry tensors) and unused slots.
const NoTask TaskID = -1

// privateTaskBase numbers the tasks a Graph body submits while it records
// (node i is privateTaskBase+i), so that a body's explicit dependency on a
// task of its caller can never pass for one on its own node.
const privateTaskBase TaskID = 1 << 30

// KernelID names a kernel in the model's kernel table; -1 is an unused slot.
type KernelID int32

// RootID names a root: an entry tensor or a runtime allocation. Roots created
// inside a recording live in a private namespace (IsPrivate).
type RootID int32

// privateRootBase starts the namespace of roots created inside a Graph body
// during recording, so they can never collide with the caller's roots.
const privateRootBase RootID = 1 << 30

// IsPrivate reports whether the root was created inside a recording.
func (r RootID) IsPrivate() bool { return r >= privateRootBase }

// RootKind says where a root comes from.
type RootKind uint8

const (
	RootEntry       RootKind = iota // an entry argument ("ext")
	RootEntryOutput                 // an entry output ("out")
	RootAlloc                       // a runtime allocation ("alloc")
)

var rootKindNames = [...]string{"ext", "out", "alloc"}

func (k RootKind) String() string { return rootKindNames[k] }

// Root is an entry-level buffer; every view derives from one.
type Root struct {
	Name  string
	Kind  RootKind
	DType DType
	Shape []int64
	Elems int64
	// Creator is the task that allocated the root (NoTask for entry tensors):
	// every later non-output use of the root depends on it (creator retention).
	Creator TaskID
	// ManualDep opts the root out of TensorMap tracking (upstream manual_dep).
	ManualDep bool
	// Data is an entry root's contents where the model gives them (small
	// integer tables: context lengths, a block table), row-major, one value
	// per element; nil for every other root. The host reads them
	// (get_tensor_data) and the device evaluates predicates on them.
	Data []int64
}

// Bytes is the root's size.
func (r *Root) Bytes() int64 { return r.Elems * r.DType.Size() }

// RootSpec describes a root to allocate.
type RootSpec struct {
	Name      string
	DType     DType
	Shape     []int64
	ManualDep bool
}

// Elems is the product of the shape.
func (s RootSpec) Elems() int64 { return prod(s.Shape) }

// MaxDims bounds a view's rank (upstream ChipTensor: 5).
const MaxDims = 5

// The a2a3 die: A2A3Clusters clusters of one AIC and A2A3AIVPerCluster
// AIV cores (upstream's platform_config.h: at most 24 clusters of
// PLATFORM_CORES_PER_BLOCKDIM = 3 cores). A model is written for it
// (rt_available_cluster_count()), and the simulated device has it by
// default.
const (
	A2A3Clusters      = 24
	A2A3AIVPerCluster = 2
)

// View is a window over a root: element offset, shape, strides, dtype.
// It is a value type with no pointers so task arguments copy without
// allocating.
type View struct {
	Root   RootID
	Offset int64
	DType  DType
	NDims  uint8
	// ManualDep is upstream's ChipTensor::manual_dep on this descriptor
	// (make_tensor_external(..., true), view(shapes, offsets, true)): an
	// argument through it waits on its root's creator only and records no
	// write, whatever its root. A view derived from it does not inherit it,
	// as upstream's view() and reshape() reset it to their own argument.
	ManualDep bool
	Shape     [MaxDims]int64
	Strides   [MaxDims]int64
}

// NewView builds a contiguous view.
func NewView(root RootID, off int64, dt DType, shape ...int64) View {
	if len(shape) > MaxDims {
		panic(fmt.Sprintf("stages: view of rank %d exceeds %d", len(shape), MaxDims))
	}
	v := View{Root: root, Offset: off, DType: dt, NDims: uint8(len(shape))}
	copy(v.Shape[:], shape)
	stride := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		v.Strides[i] = stride
		stride *= shape[i]
	}
	return v
}

// Elems is the product of the shape.
func (v *View) Elems() int64 {
	n := int64(1)
	for i := 0; i < int(v.NDims); i++ {
		n *= v.Shape[i]
	}
	return n
}

// Bytes is the view's logical size.
func (v *View) Bytes() int64 { return v.Elems() * v.DType.Size() }

// End is one past the last element of the view's region. The region is the
// interval [Offset, Offset+Span): the dependency rule compares intervals, not
// strided footprints (reference README, "The dependency rule"), so a strided
// view (a tile of a wider tensor) covers the rows it spans whole.
func (v *View) End() int64 { return v.Offset + v.Span() }

// Span is the number of elements from the view's first to one past its
// last: Elems for a contiguous view, more for a strided one (a [rows, n]
// tile of a [rows, block] tensor keeps the row stride block, and spans
// (rows-1)*block + n). 0 for an empty view. Strides that would span fewer
// elements than the view has (none a model makes) count as contiguous.
func (v *View) Span() int64 {
	span, elems := int64(1), int64(1)
	for i := 0; i < int(v.NDims) && i < MaxDims; i++ {
		if v.Shape[i] == 0 {
			return 0
		}
		span += (v.Shape[i] - 1) * v.Strides[i]
		elems *= v.Shape[i]
	}
	return max(span, elems)
}

// Contiguous reports whether v's strides are the row-major strides of its
// shape, so that its elements are the interval it spans.
func (v *View) Contiguous() bool { return contiguous(v) }

// ShapeSlice returns the used part of Shape.
func (v *View) ShapeSlice() []int64 { return v.Shape[:v.NDims] }

// SameLayout reports whether two views agree on everything but root and
// offset: the part of a boundary slot a replay may not change.
func (v *View) SameLayout(o *View) bool {
	if v.DType != o.DType || v.NDims != o.NDims || v.ManualDep != o.ManualDep {
		return false
	}
	// Dims past NDims are zero in every view built here; compare only the
	// used ones (a replay's hot loop compares thousands of slots).
	for i := 0; i < int(v.NDims) && i < MaxDims; i++ {
		if v.Shape[i] != o.Shape[i] || v.Strides[i] != o.Strides[i] {
			return false
		}
	}
	return true
}

// Arg is one tensor argument of a task.
type Arg struct {
	Tag  Tag
	View View
}

// Scalar is a u64 argument with its provenance: Src is the boundary scalar
// slot it was passed straight from, or -1 when it is a static value. A value
// computed from a boundary scalar loses its provenance and is baked into a
// Definition (the hazard upstream-runtime.md §3.4 names).
type Scalar struct {
	Value uint64
	Src   int32
}

// Static is a scalar with no boundary provenance.
func Static(v uint64) Scalar { return Scalar{Value: v, Src: -1} }

// PredOp compares a predicate's element with its target.
type PredOp uint8

const (
	PredGT PredOp = iota // reference pred.op 0
	PredGE
	PredEQ
	PredNE
	PredLT
	PredLE
)

// Predicate gates dispatch on a device value: the task runs only if element
// Index of the view compares true against Target. Evaluated on the device.
type Predicate struct {
	Valid  bool
	Op     PredOp
	View   View // Index counts elements from View.Offset
	Index  int64
	Target int64
}

// Launch is a task's launch flags, upstream's launch spec setters. Neither
// changes what a task computes or what it waits on; both are carried from
// submission to the device and written by traces.
type Launch uint8

const (
	// LaunchEarly is set_allow_early_resolve(true): the task may be
	// dispatched speculatively before its producers complete (disabled in
	// host_build_graph, RUNTIME_LOGIC.md §6, and by this device: carried
	// and traced only).
	LaunchEarly Launch = 1 << iota
	// LaunchSyncStart is launch_spec.set_require_sync_start(true): the
	// task's block_num blocks start together, as one cohort, once enough
	// cores are free for all of them (the device models it).
	LaunchSyncStart

	// launchAll is every defined flag; images carry no other bit.
	launchAll = LaunchEarly | LaunchSyncStart
)

// Valid reports whether l has only defined flags.
func (l Launch) Valid() bool { return l&^launchAll == 0 }

func (l Launch) String() string {
	switch l {
	case 0:
		return ""
	case LaunchEarly:
		return "early"
	case LaunchSyncStart:
		return "sync_start"
	case LaunchEarly | LaunchSyncStart:
		return "early,sync_start"
	}
	return fmt.Sprintf("launch(%#x)", uint8(l))
}

// Task is one submission: a kernel task, a dummy fence or an alloc. The
// slices belong to the caller and are copied by Submit, so a caller may reuse
// them across submissions.
type Task struct {
	Kind     Kind
	Kernel   [3]KernelID // AIC, AIV0, AIV1
	BlockNum int32       // SPMD width; -1 = not set
	Launch   Launch
	Args     []Arg
	Scalars  []Scalar
	Deps     []TaskID
	Pred     Predicate
	// Line is the model file line of the op that made the task (0: not
	// from a model file); host only, never in an image.
	Line int32
	// OutNames names the roots the task's TagOutput args make, in argument
	// order (missing or "": unnamed), so a trace writes the model's name;
	// host only, never in an image.
	OutNames []string
}

func prod(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}
