package config

import (
	"sync"
	"sync/atomic"

	"github.com/hbg-dev/hbg/stages"
)

// Model is a loaded, validated model config, compiled into slices so that
// Run interprets it without per-task lookups.
type Model struct {
	Name string
	file string
	// contentHash is the model file's content hash (hex), part of every
	// form's orchestration identity.
	contentHash string

	consts map[string]int64
	// constArrays are the constants that are lists (NAME[i] in
	// expressions: upstream's static const int arrays).
	constArrays map[string][]int64
	// entryScalars are the entry scalars' values in order: scalar(i).
	entryScalars []int64
	entry        []entryTensor
	entryViews   []stages.View
	kernels      []stages.Kernel
	// kernelLaunch is each kernel's launch flags (the kernel table's early
	// and sync_start): the default of every task of it, which an op's own
	// early or sync_start overrides.
	kernelLaunch []stages.Launch
	kernelIdx    map[string]stages.KernelID
	races        []DeclaredRace
	blocks       []*block
	blockIdx     map[string]*block
	program      *block
	progParam    []string
	progDef      []int64
	forms        []*form
	formIdx      map[string]*form
	runners      sync.Pool
	// maxTasks is the model's own bound on a pass (max_tasks:), taskLimit
	// its user's (LimitTasks), sizes the forms checked against a bound.
	maxTasks  int64
	taskLimit int64
	// maxEdges is the model's own bound on a pass's dependency edges
	// (max_edges:), edgeLimit its user's (LimitEdges).
	maxEdges, edgeLimit int64
	sizeMu              sync.Mutex
	sizes               map[string]sizeCheck
	// steps is how the program's params change round to round (steps:),
	// nil when every round runs the same program.
	steps *steps
}

type entryTensor struct {
	name     string
	dtype    stages.DType
	shape    []int64
	role     string
	kind     stages.RootKind
	value    int64
	hasValue bool
	// manualDep: the entry tensor's descriptor is manual_dep (its views
	// are not, unless they say so).
	manualDep bool
	// data is the tensor's contents (entry tensor data:), or nil.
	data []int64
	line int
}

// block is a compiled block template (the program is one too, with no
// boundary).
type block struct {
	idx         int
	name        string
	line        int
	params      []string // int params; env slots 0..len-1
	variants    []string
	variantSlot int // env slot of the variant index, -1 without variants
	tensors     []string
	// valueOnly are its reads' names that no count may read (hostdata.go).
	valueOnly []valueOnly
	boundary  []*boundSlot
	// fastBoundary[s] is boundary slot s's fast form (runner.boundary);
	// rowSlots, the env slots its slotRow slots read.
	fastBoundary []fastSlot
	rowSlots     []int32
	auto         bool
	scalars      []*bscalar
	// variantScalars[v], in a block whose scalars are per variant, is the
	// boundary scalars variant v passes (indices into scalars, in its
	// order); nil when every variant passes them all.
	variantScalars     [][]int
	variantScalarsLine int
	allScalars         []int  // 0..len(scalars)-1
	scalarTerms        []term // each scalar's value as one term, when it is one
	scalarBase         int    // env slot of the first boundary scalar
	body               []*op
	envSize            int       // env slots: params, variant, boundary scalars, loop vars
	slotNames          []string  // tensor slots: boundary slots (or tensor params of an auto block), then locals
	fixedSlots         int       // tensor slots filled at entry (boundary slots / tensor params / entry tensors)
	ids                []string  // op ids (id: NAME), the tasks of each kept in frame.idTasks
	calls              []*callOp // top-level calls, in order (auto boundary)
	// structural[slot] is the first line where the body's structure depends
	// on env slot `slot` (a param or the variant); 0 if it never does.
	structural []int
	baked      []bakedUse
	// inputWrites are the body's tasks that write a boundary slot the
	// boundary tags in.
	inputWrites []inputWrite
	isProgram   bool
	// Task values: taskParams are the block's task params (bound by each call
	// to tasks the caller made: a Graph call's external dependencies),
	// taskLists its task lists (declared by a tasks op, filled by ids like
	// out[i]), in declaration order.
	taskParams []string
	taskLists  []string
	// lists are the tensor lists (alloc NAME[k] items, let NAME: [...]),
	// newest last; nonLocal marks let slots that view a tensor the block
	// does not allocate (a boundary slot, say).
	lists    []tensorList
	nonLocal map[int]bool
}

// tensorList is a named list of tensor slots, indexed by expression.
type tensorList struct {
	name  string
	slots []int
	line  int
}

type inputWrite struct {
	line      int
	slot, arg string
}

type bakedUse struct {
	line   int
	scalar string
	key    string // what uses it: "scalars" (a task scalar), "args", "let.NAME", ...
	expr   string
}

type boundSlot struct {
	name  string
	tag   stages.Tag
	view  *viewExpr
	dtype stages.DType
	shape []int64
	line  int
}

type bscalar struct {
	name  string
	value *expr
	src   string
	line  int
}

// callScalars is the boundary scalars a call of the block with env passes,
// as indices into b.scalars: all of them, or its variant's.
func (b *block) callScalars(env []int64) []int {
	if b.variantScalars != nil {
		return b.variantScalars[env[b.variantSlot]]
	}
	return b.allScalars
}

type opKind uint8

const (
	opAlloc opKind = iota
	opTask
	opScope
	opLoop
	opIf
	opCall
	opRead
	opLet
	opTasks
	opSet
	opLocal
	opWrite
)

type op struct {
	kind      opKind
	line      int
	cond      *expr
	body      []*op
	mode      stages.ScopeMode
	loopSlot  int
	from, to  *expr
	step      *expr // nil: 1
	loopIDs   []int
	allocs    []allocItem
	task      []*taskOp // per variant; one entry when no variant differs
	call      *callOp
	readRoot  int
	allocID   int // an alloc op's id (index into block.ids), or -1
	reads     []readItem
	lets      []letItem
	taskDecls []taskDecl
	sets      []setItem
	locals    []localItem
	writes    []writeItem
}

// localItem is one host local of a local op: env slot = the expression's
// value, computed when the op runs (a C++ int of the host program; an
// existing local or read name is assigned, so a value computed in a loop
// outlives it).
type localItem struct {
	slot int
	name string
	e    *expr
}

// readItem is one host read of a read op: env slot = element [indices...]
// of entry tensor root, which has contents (data:).
type readItem struct {
	slot    int
	name    string
	root    int
	indices []*expr
	src     string
	// view is the tensor of a read of any other tensor than an entry
	// tensor with data (root -1): its value is the host's (hostdata.go).
	view *viewExpr
}

// writeItem is one host write of a write op: element [indices...] of
// view's tensor = value (upstream's set_tensor_data).
type writeItem struct {
	view    *viewExpr
	indices []*expr
	value   *expr
	src     string
	entry   bool // the tensor is an entry tensor with data, by name
}

// valueOnly is a read's name whose value the host knows only as the run
// goes (a tensor the host writes): no count may read it, since the sizer
// bounds a pass before it runs.
type valueOnly struct {
	slot int
	name string
	line int
}

// letItem binds a name (or each element of a tensor list) to a view
// evaluated when the op runs.
type letItem struct {
	slots []int
	views []*viewExpr
}

type allocItem struct {
	slot      int
	name      string
	elem      int // element index of a tensor list (NAME[k]), or -1
	dtype     stages.DType
	shape     []*expr
	manualDep bool
	// initial is set_initial_value's fill, where hasInitial.
	initial    int64
	hasInitial bool
	constShape []int64 // the shape when constant (retained by Alloc)
	constView  stages.View
}

type taskOp struct {
	kind        stages.Kind
	kernel      [3]stages.KernelID
	kernelList  [][3]stages.KernelID // k: "[a, b, c][EXPR]": kernels by index
	kernelIndex *expr
	name        string
	blockNum    int32
	args        []argOp
	scalars     []*expr
	deps        []*taskRef
	id          int
	store       *taskTarget // id: NAME[i] or NAME[i:+n]
	pred        *predOp
	hasOutputs  bool
	// launch is the op's launch flags where launchSet says it gives them
	// (bit by bit: early, sync_start); the rest come from the kernel.
	launch, launchSet stages.Launch
}

type argOp struct {
	tag  stages.Tag
	view *viewExpr
	out  *allocItem // runtime-allocated output (tag out)
}

type predOp struct {
	view    *viewExpr
	indices []*expr
	op      stages.PredOp
	target  *expr
}

type callOp struct {
	callee     *block
	params     []*expr
	paramTerms []term // each param as one term, when it is one
	variant    int
	tensorArgs []*viewExpr
	tasks      [][]*taskRef // per callee task param: the task values it is bound to
	line       int
	index      int // position among the caller's top-level calls
	// localSlots[s]: callee boundary slot s resolves to a tensor the caller
	// allocates itself (known statically); such slots are not part of an
	// auto boundary.
	localSlots []bool
	// tmpls is this call site's boundary templates (runner.callLocs),
	// shared by the runners of every rank: a template is immutable, so one
	// that a rank made serves all.
	tmpls atomic.Pointer[siteTemplates]
}

type form struct {
	name   string
	line   int
	params []int64      // program param values
	graphs []*graphSpec // by block idx; nil = inline
	// step, if set, makes the whole program one Graph call (step.go), its
	// block calls that graphs names Graphs inside it.
	step *graphSpec
	// generated is a tool's form's text hash ("+hex", AddForm), part of its
	// orchestration identity; hidden ones are not listed by Forms.
	generated string
	hidden    bool
}

type graphSpec struct {
	block  *block
	key    string
	parts  []keyPart
	config []int  // env slots hashed into full_key: config's, then the key's others
	inKey  uint64 // env slots in config or interpolated into the key
	// complete: the static Graph checks found nothing in this form's use of
	// the block, so its calls are GraphCall.KeyComplete.
	complete bool
	line     int
}

type keyPart struct {
	lit  string
	slot int // -1: literal
}

// Forms lists the model's form names in file order.
func (m *Model) Forms() []string {
	out := make([]string, 0, len(m.forms))
	for _, f := range m.forms {
		if !f.hidden {
			out = append(out, f.name)
		}
	}
	return out
}

// DefaultForm is the form a tool runs when not told which: the one named
// full, else the last (a model lists its forms from eager to the most
// Graphs, as the shipped ones do).
func (m *Model) DefaultForm() string {
	forms := m.Forms()
	for _, f := range forms {
		if f == "full" {
			return f
		}
	}
	return forms[len(forms)-1]
}

// Kernels is the kernel table; a KernelID is an index into it.
func (m *Model) Kernels() []stages.Kernel { return m.kernels }

// EntryRoots is the entry tensors, RootIDs 0..N-1 in order.
func (m *Model) EntryRoots() []stages.Root {
	out := make([]stages.Root, len(m.entry))
	for i, e := range m.entry {
		out[i] = stages.Root{Name: e.name, Kind: e.kind, DType: e.dtype, Shape: e.shape, Elems: prod(e.shape), Creator: stages.NoTask, Data: e.data}
	}
	return out
}

// Blocks lists the block names in file order.
func (m *Model) Blocks() []string {
	out := make([]string, len(m.blocks))
	for i, b := range m.blocks {
		out[i] = b.name
	}
	return out
}

// File is the path (or name) the model was loaded from.
func (m *Model) File() string { return m.file }

func prod(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}
