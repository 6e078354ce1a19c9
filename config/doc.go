// Package config loads a model config (YAML, written for people) and
// interprets it as an orchestration: a new model is a new YAML file, no Go
// code. See models/dsv4_flash_decode.yaml and models/qwen3_14b_decode.yaml
// for complete examples. A file is one YAML document, without anchors or
// aliases (repetition is said with blocks, loops and let), nulls (~, null
// or an empty value: write the value, or {} or []) or tags but the
// standard ones that agree with the text (!!str; !!int on a decimal
// integer; !!bool on true or false; !!map; !!seq).
//
// # Schema
//
//	model: NAME
//	source: {repo: OWNER/NAME, commit: HEX, path: FILE}   # optional: the upstream program it was written from
//	max_tasks: N                          # bound on a pass's device tasks (default and most 4194304; --max-tasks raises it)
//	max_edges: N                          # bound on a pass's dependency edges, run image and each Definition (default and most 16777216; --max-edges raises it)
//	constants: {NAME: INT, ...}          # usable in every expression
//	constants: {NAME: [INT, ...]}        # a constant array: NAME[i] in expressions
//	entry:
//	  tensors:                            # RootIDs 0..N-1, in this order
//	    - {name, dtype, shape, role, out: bool, value: INT}   # value: what a bare read: NAME returns
//	    - {name, dtype, shape, data: [v0, v1, ...]}           # contents, row-major (integer dtypes)
//	    - {name, dtype, shape, data: {seed, min, max}}        # contents drawn from [min, max], seeded
//	    - {name, dtype, shape, manual_dep: true}              # make_tensor_external(..., manual_dep=true)
//	  scalars: [{name, value}]            # entry scalars; constants too
//	kernels:                              # KernelID = position
//	  - {name, core: aic|aiv, code, sig: "iox..", intensity, early: bool, sync_start: bool}
//	                                      # early, sync_start: the launch flags of its tasks
//	blocks:
//	  NAME:
//	    params: [p, ...]                  # integer construction values
//	    variants: [v0, v1, ...]           # optional kernel/tag columns; a call picks one
//	    tensors: [t, ...]                 # tensor params, bound by the call
//	    tasks: [p, ...]                   # task params: tasks the caller made that the body may wait on
//	    boundary:                         # slot order = Graph boundary order
//	      - {name, tag, view, dtype, shape}   # view is evaluated in the caller (default: name)
//	    boundary: auto                    # or: the union of the body's calls' boundaries
//	    scalars: [{name, value}, NAME]    # boundary scalars (value: an expression of the block's params and
//	                                      # the constants, evaluated at the call; NAME: the param NAME)
//	    scalars: {v0: [...], v1: [...]}   # or per variant: each variant passes its own list
//	    body: [OP, ...]
//	program:
//	  params: {NAME: INT}                 # defaults; forms override
//	  body: [OP, ...]
//	forms:
//	  NAME:
//	    params: {NAME: INT}
//	    graphs:                           # block calls that are Graphs
//	      BLOCK: {key: "text{param}", config: [param, ...]}
//	steps:                                # optional: program params that change round to round
//	  seed: N                             # the schedule's PCG seed: the same rounds in every run
//	  requests: {slots: N, batch: [b, ...], context: [min, max], decode: [min, max]}
//	  params: {NAME: EXPR}                # a program param per round, over the constants, the
//	                                      # program params and round, batch, max_context,
//	                                      # min_context, sum_context
//
// OPs, in submission order:
//
//	body:
//	  - alloc: ["NAME DTYPE[d0, d1] [manual_dep] [initial V]", ...]    # one alloc task
//	  - alloc: ["h[0] fp32[16]", "h[1] fp32[16]"]           # a tensor list h (elements 0..n-1)
//	  - {alloc: [...], id: ID}                              # the alloc task's id, for deps
//	  - let: {NAME: VIEW, LIST: [VIEW, ...]}               # named views, a tensor list
//	  - tasks: {LIST: SIZE}                                # a task list, every element unset
//	  - set: {"LIST[i]": TASK}                             # store tasks into a task list
//	  - {k: KERNEL, bn: N, args: ["TAG VIEW", ...], scalars: [EXPR, ...],
//	     deps: [TASK, ...], pred: "T[i, j] > 0", touch: {ARG: ROWS}, id: ID, if: EXPR,
//	     early: bool, sync_start: bool}    # launch flags; absent: the kernel's
//	  - {k: "[K0, K1, ...][EXPR]", ...}     # the kernel is chosen by expression
//	  - {id: "LIST[i]", ...}                # the task is stored into a task list
//	  - {mix: BASE, ...}                   # MIX task: BASE_aic + BASE_aiv (on both AIVs)
//	  - {mix: {aic: K0, aiv0: K1, aiv1: K2}, ...}   # MixedKernels: any slots, see Kernels
//	  - {dummy: true, deps: [...]}
//	  - scope: auto|manual
//	    body: [...]
//	  - loop: {var: e, from: 0, to: 32, step: 1}
//	    body: [...]
//	  - if: EXPR
//	    body: [...]
//	  - call: BLOCK
//	    with: {param: EXPR, variant: NAME, tensor: VIEW, task: TASK or [TASK, ...]}
//	                                       # unbound tensors and tasks: same name in the caller
//	  - read: ENTRY_TENSOR                 # a host read of device data (its value:)
//	  - read: {NAME: "TENSOR[i, ...]", ...} # host reads that bind NAMEs (get_tensor_data)
//	  - local: {NAME: EXPR, ...}           # host locals (int NAME = EXPR; an existing one is assigned)
//	  - write: {"TENSOR[i, ...]": EXPR}    # host writes of device data (set_tensor_data)
//
// TAG is in, out, inout, out_existing or no_dep ("out NAME DTYPE[dims]"
// creates a runtime-allocated output: a root named NAME, which later ops and
// predicates name and the trace writes). A predicate "T[i, ...] OP VALUE"
// reads element [i, ...] of the view T; the trace writes its idx as that
// element's index into T's root (gate_view[1] over gate @ 4 is [5]). In a block with variants, "a|b" gives
// the kernel or tag per variant, and a key named after a variant overrides
// fields for it.
//
// # Steps that change
//
// A decode server's steps are not one step: every request's context grows
// a token a step, requests end and new ones start short, the batch moves.
// steps: says so. requests.slots requests run at once; each round draws a
// batch size from batch (uniformly), and the first batch requests decode a
// token each; a request that has decoded its tokens (drawn from decode)
// ends, and a new one, its context drawn from context, starts in its slot.
// The round's batch and the largest, smallest and summed context of its
// batch (at the round's start) are what params' expressions read; each
// sets a program param for the round (Model.StepParams), which the body
// reads as any param. Where such a param shapes a Graph body (a loop count,
// a task list size), the form's key names it, so a new key arrives each
// time it changes: a form that buckets the count (a key per bucket, as a
// server captures a graph per batch size) meets fewer. The program's own
// defaults are what the task bound is checked at: make them the largest a
// round makes. Entry tensors and their contents are the same every round.
//
// # Host reads
//
// An entry tensor of an integer dtype may have contents, data: a list of
// one value per element (row-major), or {seed, min, max}: each element
// drawn from [min, max] by a PCG seeded with seed, the same in every run.
// At most 65536 elements: data is for the small tables a host reads
// (per-request context lengths, a block table), not for weights. A read op
// {NAME: "TENSOR[i, j]"} is upstream's get_tensor_data(TENSOR, 2, {i, j}):
// NAME is bound to that element, an integer usable in every expression
// from there to the end of the op list the read is in (a later read may
// bind it again), so a loop count, a view offset, a shape or a scalar can
// come from data. Each read is traced as a get_tensor_data event with its
// root, idx and value; validate's task count is the count the data makes.
// A predicate over an entry tensor with data is evaluated by the device on
// that data (until a task writes the tensor; then on its digests).
//
// A local op {NAME: EXPR} is a host-side integer of upstream's program
// (const int32_t n = ...;): NAME is EXPR's value from there to the end of
// the op list it is in, like a read's name. A NAME that is already a local
// or a read in scope is assigned instead (NAME = EXPR), and a read may
// assign a local: so a reduction across a loop is a local before the loop
// and its assignment inside, and the value outlives the loop:
//
//	body:
//	  - local: {max_bn: 0}
//	  - loop: {var: b, to: B}
//	    body:
//	      - read: {cl: "context_lens[b]"}
//	      - local: {max_bn: "max(max_bn, (cl + BS - 1) / BS)"}
//
// What a local's value reads (params, boundary scalars) every use of it
// reads, for the Graph checks: a loop over a local computed from a param
// is structure on that param.
//
// Host data beyond entry tables: a write op {"TENSOR[i, j]": EXPR} is
// upstream's set_tensor_data, and a read of any tensor (an alloc, a
// kernel's output, a float tensor, an entry tensor without data) its
// get_tensor_data; an alloc item's "initial V" is
// TensorCreateInfo::set_initial_value(V). Each is traced as upstream's
// event (set_tensor_data, get_tensor_data: root, idx, value) in order with
// the tasks. Before each access the host waits as upstream's
// wait_for_tensor_ready does: a read for the tensor's creator and the
// writers of its region, a write for them and every task that waits on
// one of them; every task submitted after the access waits on that wait
// (the host is blocked until it is over), so a program that writes, reads
// and writes again is not racy. The wait is no task of upstream's: the
// trace numbers tasks without it and no fanin names it; the device runs it
// as a dummy task (stages.OrdinaryPath.HostWait), so the run image's task
// numbers (a race's "task N") and validate's edge count include the waits. The values are the
// host's: what it wrote, an initial value, an entry tensor's data. A task
// that writes a tensor (a Graph call: any slot) makes its values unknown
// to the host, since the simulated device holds digests: a read of one is
// an error at its line. A read's name from such a tensor may set values
// (scalars, offsets, writes), not counts (a loop bound, an if, a task
// list's size, a call's param), which the pass is bounded by before it
// runs: an error at the count's line. An entry tensor's data is written in
// the program body by its name (later reads, and the counts they set, see
// it), and a predicate on entry data the host wrote is an error (the
// device evaluates it on the model's data).
//
// A read inside a Graph body would be settled once, when the body is
// recorded, and replayed with that value: it is an error at its line. Read
// in the caller and pass the value in: as a param (a loop count or shape
// in the body is structure, so the param is in the key or a
// *StructureError) or as a boundary view's offset (a replay patches it).
//
// # Launch flags
//
// early is upstream's set_allow_early_resolve(true) and sync_start its
// launch_spec.set_require_sync_start(true). A task's flags are its op's
// early and sync_start where it gives them, else its kernel's (the kernel
// table's keys of the same names; a MIX task's kernel is its _aic one):
// upstream's programs launch a kernel with the same flags at every site,
// so the kernel table says them once and an op overrides where a site
// differs. Both travel with the task through recording, replay, both
// images and the trace (early, sync_start). On the device, a sync_start
// task's block_num blocks start together at one instant, once enough cores
// are free for all of them (the die drains until then: npu); a cohort
// wider than the die (24 AIC or MIX blocks, 48 AIV on a2a3) is refused at
// launch. early changes nothing on this device, as in host_build_graph
// (upstream's RUNTIME_LOGIC.md §6 disables early resolve there). A dummy
// task takes neither.
//
// # Kernels
//
// mix: {aic: K0, aiv0: K1, aiv1: K2} is upstream's
// rt_submit_task(MixedKernels{K0, K1, K2}, args): each slot names its own
// kernel (of that core) or is left out (INVALID_KERNEL_ID). The task's
// shape is upstream's ActiveMask::to_shape: two or more slots make a MIX
// task, so AIV0 + AIV1 without an AIC is one, and AIC + AIV0 alone too;
// one slot an AIC or AIV task (AIV1 alone too, its kernel in slot 2 of
// the trace's k, run as any AIV task). The trace's k is the three
// slots (-1 unused), its name the first slot's kernel, and the task's
// launch flags and signature are that kernel's. On the device a MIX block
// holds its whole cluster whichever slots it names, and a MIX task with no
// aiv1 runs its aiv0 kernel on the second AIV. mix: BASE is the older
// shorthand for {aic: BASE_aic, aiv0: BASE_aiv, aiv1: BASE_aiv}.
//
// # Task values
//
// A task (in deps, set, and a call's task params) is one of the block's
// task names: an op id ("ID": the latest task submitted under it in the
// current block call, "ID*": every one of the current run of its loop), a
// task list ("LIST[i]", "LIST[start:+n]", or "LIST": every element, in
// order) or a task param (likewise). A task list is upstream's PTO2TaskId
// array: declared with its size by a tasks op, filled by ops with
// id: LIST[i] (or LIST[start:+n], which stores the task into each element)
// and by set; reading an element no op stored is an error. deps keep their
// order and repeats; "TASK if EXPR" adds TASK only where EXPR is not 0
// (if (is_last) add_dep(alloc_task)); "TASK?" only what is valid
// (upstream's if (prev.is_valid()) add_dep(prev)): an op id no op
// submitted in this block call adds nothing, a task list only its set
// elements, in order (a task param is always set). A count of valid
// dependencies (if (deps_count > 0)) is a local the host counts as the
// C++ does, under the conditions that store the tasks. An alloc op's id names its alloc task. A block's
// task params are bound by each call; when the call is a Graph, they are its external dependencies (GraphCall.ExtDeps,
// in order), which a replay takes from its call site.
//
// touch is an access hint, for the device's timing only: the task's argument
// ARG (named by its tensor) is read only in part, ROWS being ARG[start:+N]
// or ARG[row] (N or 1 rows of ARG's dim 0, which the argument must keep), or
// dim0[start:+N] or dim0[row] (rows of the argument's own dim 0, after its
// row index or reshape). N is a constant; where the rows are does not
// matter. The routed-expert matmuls get all 32 experts' weights and read the
// one a scalar selects: touch: {routed_w1: "routed_w1[e:+1]"}. A 2-D tile
// is ARG[ROWS, COLS] (or dim0[ROWS, COLS]): COLS is start:+N or col over the
// argument's last dim, and either part may be ":" for all of it; a K-split
// N-tile matmul reads touch: {wq: "wq[k*1024:+1024, n*512:+512]"}. A hint is
// its kernel's (stages.Kernel.Touch), so one op's hint holds at every op of
// that kernel, and two ops declaring different hints for one kernel are an
// error.
//
// A VIEW is NAME, NAME[row] (drops dim 0), NAME[start:+rows], NAME[s0, s1,
// ...] (several dims, each ":", an index, which drops the dim, or
// start:+count; dims past the last given are whole), NAME @ offset
// (elements), each optionally followed by "as [d0, ...]" and then by
// manual_dep; it must stay inside its base. manual_dep is upstream's
// view(shapes, offsets, true) (and make_tensor_external(..., true) on a
// plain entry name): an argument through the view waits on its root's
// creator only and records no write, whatever its tag, and the trace's
// mdep is 1. A name let to such a view keeps the flag; a view derived
// from it without the word does not (upstream's view() and reshape() set
// the flag from their own argument). An entry tensor's manual_dep: true
// makes its own descriptor so. A multi-dim slice keeps its base's strides, so a tile of a wider
// tensor is a strided view: upstream's sij.view([q_tile, valid_len]) of a
// [q_tile, block] tensor is "sij[:, 0:+valid_len]", strides [block, 1]. A
// stride is part of a boundary slot's layout (a replay may not change it);
// the dependency rule covers the interval a strided view spans (its first
// element to its last, as upstream's does); the device counts a tile's own
// elements for its cost, and digests and races over each of its rows. A
// strided view is not reshaped (reshape the tensor, then slice). NAME is a tensor, or LIST[i]: element i of a tensor list (an
// alloc's NAME[k] items, or a let with a list value), or, in the program
// body, tensor(EXPR): entry tensor EXPR by position (upstream's
// orch_args.tensor(i) with a computed i). A let names a view
// where it runs (loop vars as they are then); the name is then usable
// wherever a tensor is, and a later let may rebind a name the block
// allocates or let (as upstream reassigns cur = next_hidden), but not a
// boundary slot, tensor param or entry tensor. Two roots of one name in one
// alloc are an error: make them a tensor list.
//
// Expressions are integers over constants, params, loop vars and boundary
// scalars with + - * / %, comparisons, && || !, parentheses, c ? a : b,
// min(a, b), max(a, b) and scalar(i), the i-th entry scalar in the order
// entry.scalars lists them (upstream's orch_args.scalar(i); an index outside
// them is an error at its line, at load when it is constant); NAME[i],
// element i of a constant array (constants: {ids: [3, 1, 4]}, upstream's
// static const int32_t ids[]); shape(TENSOR, d), dim d of an entry tensor
// (orch_args.tensor(i).ref().shapes[d]); and rt_available_cluster_count()
// and rt_available_aiv_count(), the a2a3 die's 24 clusters and 48 AIV
// cores a model is written for (stages.A2A3Clusters). Arithmetic is checked: a value that overflows
// int64 is an error, never a wrapped number.
//
// # Dependencies
//
// A task waits on other tasks by its explicit deps and, in an auto scope,
// by its arguments' tags (package stages, resolveFanin: upstream's rule).
// Per root, the runtime keeps the writers: the regions that earlier tasks'
// inout and out_existing arguments wrote, and who wrote each; a region is
// the element range [offset, end) a view spans on its root, and two
// overlap when the ranges intersect. A root's creator is the alloc task
// that made it, or the task whose out argument made it; an entry tensor
// has none. In an auto scope, by tag:
//
//	tag           the task waits on                       later tasks that wait on it
//	in            creator; earlier writers it overlaps    none (a read is not recorded)
//	inout         creator; earlier writers it overlaps    in and inout args overlapping it
//	out_existing  creator only                            in and inout args overlapping it (the
//	                                                      earlier writers stay writers too)
//	no_dep        creator only                            none
//	out           nothing (it makes a new root)           every task naming the root (any tag
//	                                                      but out: it is the root's creator)
//
// An inout retires the writers whose regions it covers whole: later tasks
// reach them through it. So no tag waits for earlier readers: a task that
// writes (inout, out_existing) a region an earlier task reads may run
// before that read; out_existing does not wait for an earlier writer of
// its region either (a later reader waits on both writers, which may run
// in either order); no_dep orders nothing but the creator. Where the order
// matters, say it with deps. A root allocated with manual_dep is never
// recorded as written: an argument on it, whatever its tag, waits on its
// creator only.
//
// In a manual scope (scope: manual, and everything nested in it, an inner
// scope: auto included) a task waits on its deps only, not even on a
// creator, and records no write: later tasks, inside the scope or after
// it, wait on it only through deps (or as the creator of a root its out
// argument made). deps hold in every scope.
//
// A block called inline is its tasks, submitted in the caller's scopes. A
// Graph call is one outer task in the caller's scope: it waits as a task
// whose args are the boundary slots, with their tags, and whose deps are
// the call's task params; later tasks wait on it as on such a task (and as
// on a writer of any slot its body writes, however tagged), and waiting on
// it is waiting on the whole body. The body's tasks wait on one another by
// the same rule, in scopes of their own (auto at the top of the body), and
// on nothing outside but through the outer task: none starts before the
// outer task's fanin is met.
//
// # Limits
//
// What the language does not say, each refused with its line:
//   - Only the program and blocks with boundary: auto call blocks; a block
//     with an explicit boundary is a leaf, and a block with boundary: auto
//     calls only such leaves, not another boundary: auto block (its
//     boundary is the union of its callees' declared slots, and an auto
//     block declares none). Give the inner block an explicit boundary.
//   - A block with boundary: auto calls only at the top of its body, not in
//     a loop or under an if, and a let in it views only what it allocates:
//     its boundary is the union of its calls', computed before its body
//     runs. To make a whole layer one Graph whose parts loop (experts picked
//     in a loop), the layer's calls are unrolled, or its body writes its
//     tasks out.
//   - A strided view is not reshaped ("as" needs a contiguous view), and
//     strides are those of slicing: a view never transposes or broadcasts.
//   - A host read or write (read: {NAME: ...}, write:) is not in a Graph
//     body: it would be made once, when the body is recorded. Entry tensor
//     contents are integer tables of at most 65536 elements; a value a
//     kernel wrote is not known to the host (see Host reads).
//   - A Graph body passes a boundary scalar to a task only as it is: used in
//     a view, shape, loop range, condition, kernel choice, predicate, task
//     index or a computed scalar, its value would be baked into the
//     Definition (*BakedScalarError below).
//   - A Graph inside another Graph's body is a Graph: its Definition is a
//     child the parent's refers to by content hash (stages.Recorder.Graph),
//     and a param of the parent that feeds the child's key is structure of
//     the parent, in its key or a *StructureError at the call's line.
//   - A block has at most 64 params, variant and boundary scalars together.
//   - Per-variant boundary scalars (scalars: {VARIANT: [...]}) give each
//     variant its own boundary signature, so the variant is structure: a
//     form's key for the block names {variant} (or its config does), else
//     *StructureError. A name in two variants' lists has one value, and a
//     variant's use of a scalar it does not pass is an error at its line.
//   - A Graph key is not empty (leave key: out for the block's name), is
//     at most 256 bytes with at most 8 {param}s ({variant} included), and
//     its automaton is at most 512 states (a character is one, a {param}
//     four, a {variant} about as many as its block's variant names have
//     characters): whether two keys can meet is decided on the product of
//     their automata, which grows with both.
//
// # Graphs
//
// A Graph called inside a Graph body (a form whose graphs name an auto
// block and the blocks it calls, or any block under a step) is a Graph of
// its own: the outer Definition refers to the inner one by content hash
// (stages.Recorder.Graph), and the device runs the flattening. A form's
// step: {key: TEXT} makes the whole program one Graph call whose boundary
// is every entry tensor, whole, tagged inout, with every program param
// hashed into its full_key: a warm pass is one replay, the form's Graphs
// its children (the program's host reads read the model file's entry
// tables, which full_key covers, so they stay in its body).
//
// A form's graphs map turns a block's calls into Graph calls whose key is the
// key text with {param}s filled in (a variant by its name; without key:,
// the block's name); config lists the values hashed into full_key, and a
// param interpolated into the key that config leaves out is hashed too,
// after them, since the text alone may not tell values apart ("L{a}{b}" is
// L111 for a=1, b=11 and for a=11, b=1). A Definition is found by
// full_key, hash(model, form, file, key text, those values), which does not
// name the block: within a form, a key belongs to one block, and two
// blocks whose keys can be the same text (the same key, or "L{a}" and
// "L1{b}", which both make L10) are an error (*SharedKeyError): give each
// block its own key.
//
// The body refers to boundary tensors through the Boundary it is handed and
// passes boundary scalars straight through (Src kept). Static checks guard
// the replay: a body whose structure depends on a param outside
// the key (*StructureError, upstream #1939; a kernel, a dependency, a task
// list size or a tensor list element chosen by a param is structure too),
// and a value computed from a boundary scalar (*BakedScalarError): a task
// scalar, or a view, alloc shape, loop range, condition, kernel choice,
// predicate or task index that uses one (a replay patches a boundary scalar
// only where a task passes it as a scalar as it is), and a task that writes
// a boundary slot tagged in (*InputWrittenError), besides the shared keys
// above. Model.GraphChecks returns them typed, so the runtime can make them errors
// or warnings. A boundary slot whose layout (a row count or a reshape; not
// a row start or offset, which a call may move) depends on a param outside
// the key is a warning of Validate and ValidateForm (Summary.Warnings), not
// an error: calls with another value of it mismatch the recorded
// Definition and run on the ordinary path, correctly but slowly. In a
// block with boundary: auto, a let must view a tensor the
// block allocates (the boundary is computed from the calls before any let
// runs).
//
// # Files
//
// CONFORMANCE.md (in this directory) lists every call of upstream's
// orchestration API, the YAML that says it and the test that checks it, or
// why the language does not say it and what happens instead.
//
// Parse reads the document in load.go; yaml.go holds the YAML helpers: a
// fixed-schema mapping decodes into a struct of *yaml.Node fields (which
// keep their positions for messages), a list of them item by item. Each
// schema area compiles in a file of its own:
//
//	entry.go     constants, entry tensors and scalars
//	kernels.go   the kernel table; k: names and kernel lists
//	races.go     declared races
//	blocks.go    block headers (params, variants, tensor and task params) and bodies
//	boundary.go  boundary slots and scalars, boundary: auto
//	program.go   the program, forms and their Graph keys
//	steps.go     steps: the rounds' params and their seeded schedule
//	checks.go    the static Graph checks (structure, baked scalars, shared keys) and layout warnings
//	keys.go      which key texts a key template makes, and whether two can meet
//	scope.go     the names a block's ops see while it compiles
//	ops.go       the op dispatch, scope and loop ops
//	alloc.go     alloc ops and runtime-allocated outputs' items
//	let.go       let ops (compile and run)
//	tasks.go     task values: op ids, task lists, task params, set (compile and run)
//	taskop.go    kernel, MIX and dummy tasks: args, scalars, deps, pred
//	touch.go     touch hints
//	calls.go     block calls
//	views.go     view syntax; expr.go expressions
//	size.go      the bound on a pass's tasks
//	exprs.go     an op's expressions in one list (op.exprs), with what each
//	             decides (a count or a value): the walks after compile read it
//	caps.go      what a Submitter can do beyond stages.Submitter, asked once
//	model.go     the compiled program the interpreter runs
//
// The interpreter is run.go (the op loop, allocs, task submission),
// run_view.go (views), run_call.go (block calls, inline and as Graphs),
// run_auto.go (auto boundaries) and run_fast.go (boundary slots compiled
// at load time: a slot over an entry tensor is a template and an affine
// offset, so a warm Graph call's boundary is copies and bounds; whatever
// such a form cannot vouch for, the general path evaluates and reports). errors.go holds the error types,
// validate.go Validate and orchestration.go Model.Orchestration.
package config
