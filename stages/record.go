package stages

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// ErrUnsupported marks a body that recorded something a Definition cannot
// express: a nested Graph, a tensor that is neither a boundary tensor nor
// allocated in the body, an explicit dependency on a task outside the body
// that is not one of the call's ExtDeps. Its calls can run on the ordinary
// path instead.
var ErrUnsupported = errors.New("unsupported in a Graph body")

// Defect is something a body hides from its caller that the runtime detects
// rather than replays wrong (ARCHITECTURE §3, "What a body must not hide").
type Defect struct {
	Key  string
	Kind DefectKind
	Slot int32 // boundary slot (tensor or scalar) concerned, or -1
	Node int32 // body node concerned, or -1
	Msg  string
}

// DefectKind names a defect.
type DefectKind uint8

const (
	// DefectInputWritten: the body writes a boundary tensor that the caller
	// tagged input, so the outer task would never become its producer.
	DefectInputWritten DefectKind = iota + 1
	// DefectBakedScalar: a scalar computed from a boundary scalar was baked
	// into the Definition.
	DefectBakedScalar
	// DefectStructure: the body's structure depends on a value that is not
	// in its key.
	DefectStructure
)

var defectNames = [...]string{"", "input-written", "baked-scalar", "structure-not-in-key"}

func (k DefectKind) String() string { return defectNames[k] }

func (d Defect) Error() string {
	return fmt.Sprintf("graph %q: %s: %s", d.Key, d.Kind, d.Msg)
}

// BoundaryRoot is what a recording knows about the root behind a boundary
// slot, snapshotted by the caller when it starts the recording (the caller's
// root table keeps growing while the body records).
type BoundaryRoot struct {
	Elems     int64
	ManualDep bool
}

// Recorder records one Graph body into a Definition. It implements
// Submitter so the body runs unchanged; tasks become nodes on a private
// TensorMap, and roots the body allocates live in a private namespace.
// A Recorder is used by one goroutine; Reset makes it reusable.
type Recorder struct {
	edges    edgeBound
	key      string
	boundary []Arg
	broots   []BoundaryRoot
	slots    slotTable // boundary root -> the slots viewing it
	nscalars int
	extDeps  []TaskID
	// extWait[j] is the nodes that named ext slot j, ascending (a node is
	// appended once, while it is the last one recorded).
	extWait [][]uint32

	tm     TensorMap
	fs     FaninSet
	roots  []privRoot
	scopes scopeStack
	// def is the recording, but for its tensor templates and predicates:
	// those are written as the image's records as they are recorded (rec:
	// about 12 bytes a template against a 136-byte TensorRef, 16 a
	// predicate against a 160-byte PredRef), which Publish copies into the
	// image as they are and Build decodes.
	def Definition
	rec encodedRecords
	// wrote marks the boundary slots a node writes.
	wrote []bool
	err   error
	// Defects found so far (reported, not fatal to the recording).
	Defects []Defect
	// depScratch holds a node's dependencies as node indices; reused.
	depScratch []TaskID
	// nodesCap is the node table's capacity (Reserve's), for the tables
	// made after Publish hands one over.
	nodesCap int
	// fullEdges makes Publish ship every fanin edge; otherwise it ships
	// their transitive reduction (reduce.go), with red.
	fullEdges bool
	red       edgeReducer

	// Nested Graphs (nested.go): the body's depth under the recording the
	// runtime asked for, the orchestration identity's hash (a child's
	// full_key is made under it), the recorder of children, the children
	// recorded so far, and the nested recording's Published.
	depth       int
	idHash      uint64
	sub         *Recorder
	kids        []*kid
	nestArgs    []Arg
	nestScalars []Scalar
	nested      *Published
	kidNodes    int // nodes the children recorded (Nodes counts them)
	// rootBase is the private root ids the ancestors' bodies took: this
	// body's own are numbered after them (own).
	rootBase int
}

// SetIdentity gives the hash of the orchestration identity the body runs
// under (RecordRequest.Identity): the full_key of a Graph called inside the
// body is made under it, as the Host makes a direct call's.
func (r *Recorder) SetIdentity(idHash uint64) { r.idHash = idHash }

// taskBase is the first private task id of the recorder's level.
func (r *Recorder) taskBase() TaskID { return privateTaskBase + TaskID(r.depth)<<taskLevelBits }

// SetFullEdges makes Publish image every fanin edge the body's TensorMap
// resolved (on true) instead of their transitive reduction.
func (r *Recorder) SetFullEdges(full bool) { r.fullEdges = full }

// SetMaxEdges bounds the Definition's dependency edges (0:
// DefaultMaxEdges); a node past it ends the body with an *EdgeBoundError.
func (r *Recorder) SetMaxEdges(n int64) { r.edges = edgeBound(max(n, 0)) }

type privRoot struct {
	dtype   DType
	elems   int64
	creator uint32
	mdep    bool
}

// own is the index among the body's own roots of id, if it is one: a
// nested body's roots are numbered after its ancestors' (rootBase), whose
// roots it may receive as boundary roots.
func (r *Recorder) own(id RootID) (int, bool) {
	i := int(id-privateRootBase) - r.rootBase
	if !id.IsPrivate() || i < 0 || i >= len(r.roots) {
		return 0, false
	}
	return i, true
}

func (r *Recorder) meta(id RootID) rootMeta {
	if i, ok := r.own(id); ok {
		p := &r.roots[i]
		return rootMeta{creator: TaskID(p.creator), manualDep: p.mdep}
	}
	// Boundary roots were created outside the body: their creators are
	// outside the window, covered by the outer task's boundary fanin.
	if s := r.slots.get(id); s != nil {
		return rootMeta{creator: NoTask, manualDep: r.broots[s[0]].ManualDep}
	}
	return rootMeta{creator: NoTask}
}

// Reset prepares the recorder for a new body. extDeps is the call's
// external dependency slots (GraphCall.ExtDeps).
func (r *Recorder) Reset(key string, fullKey uint64, boundary []Arg, broots []BoundaryRoot, nscalars int, extDeps []TaskID) {
	r.key, r.boundary, r.broots, r.nscalars, r.extDeps = key, boundary, broots, nscalars, extDeps
	r.extWait = r.extWait[:0]
	for range extDeps {
		r.extWait = append(r.extWait, nil)
	}
	r.slots.reset(boundary)
	r.wrote = slices.Grow(r.wrote[:0], len(boundary))[:len(boundary)]
	clear(r.wrote)
	r.rec.reset()
	r.tm.Reset()
	r.roots = r.roots[:0]
	r.scopes.reset()
	r.err = nil
	r.Defects = r.Defects[:0]
	r.kids, r.nested, r.kidNodes = nil, nil, 0
	if r.def.Nodes == nil {
		// Publish handed the last recording's nodes over.
		r.def.Nodes = make([]NodeDesc, 0, r.nodesCap)
	}
	r.def = Definition{
		FullKey: fullKey, Key: key,
		Nodes: r.def.Nodes[:0], Scalars: r.def.Scalars[:0],
		Fanin: r.def.Fanin[:0], Roots: r.def.Roots[:0],
	}
}

func (r *Recorder) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("graph %q node %d: %w: %s", r.key, len(r.def.Nodes), ErrUnsupported, fmt.Sprintf(format, a...))
	}
}

// Reserve sizes the recorder's buffers for bodies of up to nodes nodes, so
// the first recordings do not grow them on the way (a prewarmed recorder).
func (r *Recorder) Reserve(nodes int) {
	r.def.Nodes = make([]NodeDesc, 0, nodes)
	r.nodesCap = nodes
	r.rec.tens.B = make([]byte, 0, 6*12*nodes)
	r.rec.preds.B = make([]byte, 0, 16*nodes)
	r.def.Scalars = make([]ScalarRef, 0, 4*nodes)
	r.def.Fanin = make([]uint32, 0, 4*nodes)
	r.roots = make([]privRoot, 0, nodes)
	r.def.Roots = make([]InternalRoot, 0, nodes)
	r.fs.seen = make([]uint32, nodes)
}

// Record records one body: Reset, the body run against its boundary (each
// boundary scalar carrying its slot as provenance), and Build. A body's
// error fails the recording; the body may also panic, and the caller decides
// what a panic means.
func (r *Recorder) Record(key string, fullKey uint64, boundary []Arg, roots []BoundaryRoot, scalars []uint64, extDeps []TaskID, body BodyFunc) (*Definition, error) {
	if err := r.RecordBody(key, fullKey, boundary, roots, scalars, extDeps, body); err != nil {
		return nil, err
	}
	return r.Build()
}

// RecordBody is Record without the Build: the recording stays in the
// recorder, for Build or Publish. Its error is the recording's: the body's,
// or the first construct a Definition cannot hold.
func (r *Recorder) RecordBody(key string, fullKey uint64, boundary []Arg, roots []BoundaryRoot, scalars []uint64, extDeps []TaskID, body BodyFunc) error {
	r.Reset(key, fullKey, boundary, roots, len(scalars), extDeps)
	b := &Boundary{Tensors: boundary, Scalars: make([]Scalar, len(scalars))}
	for i, v := range scalars {
		b.Scalars[i] = Scalar{Value: v, Src: int32(i)}
	}
	if err := body(r, b); err != nil {
		return fmt.Errorf("graph %q: body failed while recording: %w", key, err)
	}
	if err := r.check(); err != nil || len(r.kids) == 0 {
		return err
	}
	// A nested body is flattened now, where a failure is the recording's.
	var err error
	r.nested, err = r.publish()
	return err
}

// Err is the first unsupported construct met, if any.
func (r *Recorder) Err() error { return r.err }

// NumRoots numbers the next private root: roots a body creates are
// numbered consecutively from it, in creation order.
func (r *Recorder) NumRoots() int { return int(privateRootBase) + r.rootBase + len(r.roots) }

// Nodes is the number of nodes recorded so far, a nested body's children's
// (each Definition once) among them.
func (r *Recorder) Nodes() int { return len(r.def.Nodes) + r.kidNodes }

func (r *Recorder) newRoot(dt DType, elems int64, mdep bool, node int) RootID {
	r.roots = append(r.roots, privRoot{dtype: dt, elems: elems, creator: uint32(node), mdep: mdep})
	return privateRootBase + RootID(r.rootBase+len(r.roots)-1)
}

// classify finds a view's source (ARCHITECTURE §3: boundary exact,
// boundary view + delta, internal, own output): its kind, slot and delta.
func (r *Recorder) classify(v *View) (src SourceKind, slot int32, delta int64, ok bool) {
	if i, ok := r.own(v.Root); ok {
		return SrcInternal, int32(i), v.Offset, true
	}
	slots := r.slots.get(v.Root)
	if slots == nil {
		return 0, 0, 0, false
	}
	for _, s := range slots {
		b := &r.boundary[s].View
		if b.Offset == v.Offset && b.SameLayout(v) {
			return SrcBoundaryExact, s, 0, true
		}
	}
	// A view inside a boundary slot's region moves with that slot; prefer
	// the tightest slot that contains it.
	best := int32(-1)
	for _, s := range slots {
		b := &r.boundary[s].View
		if b.Offset <= v.Offset && v.End() <= b.End() && (best < 0 || b.Elems() < r.boundary[best].View.Elems()) {
			best = s
		}
	}
	if best < 0 {
		// Outside every slot's region but on a boundary root: anchor to the
		// slot with the nearest offset below; replay keeps the delta.
		for _, s := range slots {
			b := &r.boundary[s].View
			if b.Offset <= v.Offset && (best < 0 || b.Offset > r.boundary[best].View.Offset) {
				best = s
			}
		}
	}
	if best < 0 {
		return 0, 0, 0, false
	}
	return SrcBoundaryView, best, v.Offset - r.boundary[best].View.Offset, true
}

// tensor records one tensor template: its image record, as
// EncodeDefinition writes a TensorRef (the view's root and offset are not
// part of it).
func (r *Recorder) tensor(tag Tag, src SourceKind, slot int32, delta int64, v *View) {
	r.rec.tens.tensorRecord(uint8(tag)|uint8(src)<<4, v, slot, delta)
	r.rec.ntens++
}

// maxTensorRecord bounds a tensor record: tag, dtype and rank bytes, the
// slot, the delta, and up to MaxDims dims and strides, each a varint of at
// most 10 bytes.
const maxTensorRecord = 3 + 5 + 10 + 2*MaxDims*10

// tensorRecord writes a tensor template's record (writer.tensorRef's bytes)
// into room made once, with the buffer's length set at the end: the
// recorder writes one for every argument it records.
func (w *writer) tensorRecord(tagSrc uint8, v *View, slot int32, delta int64) {
	w.B = slices.Grow(w.B, maxTensorRecord)
	b := w.B[len(w.B) : len(w.B)+maxTensorRecord]
	nd := min(v.NDims, MaxDims)
	contig := contiguous(v)
	b[0], b[1], b[2] = tagSrc, uint8(v.DType), nd
	if !contig {
		b[2] |= stridesFlag
	}
	if v.ManualDep {
		b[2] |= manualDepFlag
	}
	n := 3 + binary.PutUvarint(b[3:], uint64(uint32(slot)))
	n += binary.PutUvarint(b[n:], uint64(delta<<1)^uint64(delta>>63))
	for i := 0; i < int(nd); i++ {
		n += binary.PutUvarint(b[n:], uint64(v.Shape[i]))
	}
	if !contig {
		for i := 0; i < int(nd); i++ {
			x := v.Strides[i]
			n += binary.PutUvarint(b[n:], uint64(x<<1)^uint64(x>>63))
		}
	}
	w.B = w.B[:len(w.B)+n]
}

// allocRecord is tensorRecord for an alloc node's output, written from its
// spec: a fresh root viewed whole (NewView's layout, contiguous, no delta).
func (w *writer) allocRecord(dt DType, shape []int64, slot int32) {
	w.B = slices.Grow(w.B, maxTensorRecord)
	b := w.B[len(w.B) : len(w.B)+maxTensorRecord]
	b[0], b[1], b[2] = uint8(TagOutput)|uint8(SrcOwnOutput)<<4, uint8(dt), uint8(len(shape))
	n := 3 + binary.PutUvarint(b[3:], uint64(uint32(slot)))
	b[n] = 0 // the delta
	n++
	for _, x := range shape {
		n += binary.PutUvarint(b[n:], uint64(x))
	}
	w.B = w.B[:len(w.B)+n]
}

// Alloc records an alloc node creating private roots.
func (r *Recorder) Alloc(specs []RootSpec) (TaskID, RootID) {
	node := len(r.def.Nodes)
	first := privateRootBase + RootID(r.rootBase+len(r.roots))
	tOff := r.rec.ntens
	for _, s := range specs {
		if len(s.Shape) > MaxDims {
			panic(fmt.Sprintf("stages: view of rank %d exceeds %d", len(s.Shape), MaxDims))
		}
		id := r.newRoot(s.DType, s.Elems(), s.ManualDep, node)
		r.rec.tens.allocRecord(s.DType, s.Shape, int32(int(id-privateRootBase)-r.rootBase))
		r.rec.ntens++
	}
	r.def.Nodes = append(r.def.Nodes, NodeDesc{
		Kind: KindAlloc, Kernel: [3]KernelID{-1, -1, -1}, BlockNum: -1,
		Tensors: Span{Off: uint32(tOff), N: uint32(len(specs))},
		Scalars: Span{Off: uint32(len(r.def.Scalars))},
		Fanin:   Span{Off: uint32(len(r.def.Fanin))},
	})
	return r.taskBase() + TaskID(node), first
}

// Submit records a kernel or dummy node.
func (r *Recorder) Submit(t *Task) TaskID {
	node := TaskID(len(r.def.Nodes))
	// Deps name earlier nodes of this body (ids from privateTaskBase on), or
	// tasks of the caller. A caller's task that the call passed as an
	// external dependency becomes that slot's waiter (the outer task waits
	// on the slot at every replay); any other is a dependency across the
	// boundary, which a replay could not honour. NoTask is no dependency,
	// as on the ordinary path.
	deps := r.depScratch[:0]
	for _, d := range t.Deps {
		switch {
		case d == NoTask:
		case d >= r.taskBase() && d-r.taskBase() < node:
			deps = append(deps, d-r.taskBase())
		case d >= 0 && slices.Contains(r.extDeps, d):
			// Two slots may name one task: the node waits on each.
			for j, e := range r.extDeps {
				if w := r.extWait[j]; e == d && (len(w) == 0 || w[len(w)-1] != uint32(node)) {
					r.extWait[j] = append(w, uint32(node))
				}
			}
		default:
			r.fail("explicit dependency on task %d, which is neither an earlier task of the body nor one of the call's %d external dependencies (a dependency across the boundary)", d, len(r.extDeps))
		}
	}
	r.depScratch = deps
	// An output gets a private root, in the caller's task as well (an
	// interpreter predicts the ids, NumRoots): the arguments are then the
	// task's own, and are not copied (112 bytes each).
	args := t.Args
	tOff := r.rec.ntens
	for i := range args {
		a := &args[i]
		if a.Tag == TagOutput {
			a.View.Root = r.newRoot(a.View.DType, a.View.Elems(), false, int(node))
			a.View.Offset = 0
			r.tensor(TagOutput, SrcOwnOutput, int32(int(a.View.Root-privateRootBase)-r.rootBase), 0, &a.View)
			continue
		}
		src, slot, delta, ok := r.classify(&a.View)
		if !ok {
			r.fail("argument %d views root %d, which is neither a boundary tensor nor allocated in the body (an unclassifiable tensor)", i, a.View.Root)
		}
		if (src == SrcBoundaryExact || src == SrcBoundaryView) && (a.Tag == TagInOut || a.Tag == TagOutputExisting) {
			r.wrote[slot] = true
			if r.boundary[slot].Tag == TagInput {
				r.defect(DefectInputWritten, slot, int32(node), fmt.Sprintf("node %d writes (tag %s) boundary slot %d, which the caller tagged input: the outer task would never become its producer", node, a.Tag, slot))
			}
		}
		r.tensor(a.Tag, src, slot, delta, &a.View)
	}
	resolveFanin(&r.tm, r, node, args, deps, r.scopes.inManual(), &r.fs)
	sOff := len(r.def.Scalars)
	for _, s := range t.Scalars {
		if s.Src >= 0 {
			if int(s.Src) >= r.nscalars {
				r.fail("scalar names boundary scalar %d of %d", s.Src, r.nscalars)
			}
			r.def.Scalars = append(r.def.Scalars, ScalarRef{Boundary: true, Slot: s.Src, Value: s.Value})
		} else {
			r.def.Scalars = append(r.def.Scalars, ScalarRef{Slot: -1, Value: s.Value})
		}
	}
	fOff := len(r.def.Fanin)
	r.edges.check(r.key, int(node), fOff+len(r.fs.Out))
	for _, p := range r.fs.Out {
		r.def.Fanin = append(r.def.Fanin, uint32(p))
	}
	nd := NodeDesc{
		Kind: t.Kind, Kernel: t.Kernel, BlockNum: t.BlockNum, Launch: t.Launch,
		Tensors: Span{Off: uint32(tOff), N: uint32(len(args))},
		Scalars: Span{Off: uint32(sOff), N: uint32(len(t.Scalars))},
		Fanin:   Span{Off: uint32(fOff), N: uint32(len(r.fs.Out))},
	}
	if t.Pred.Valid {
		src, slot, delta, ok := r.classify(&t.Pred.View)
		if !ok {
			r.fail("predicate views root %d, which is neither a boundary tensor nor allocated in the body", t.Pred.View.Root)
		}
		w := &r.rec.preds
		w.U8(uint8(t.Pred.Op))
		w.tensorRecord(uint8(TagInput)|uint8(src)<<4, &t.Pred.View, slot, delta)
		w.Varint(t.Pred.Index)
		w.Varint(t.Pred.Target)
		r.rec.npred++
		nd.Pred = int32(r.rec.npred)
	}
	r.def.Nodes = append(r.def.Nodes, nd)
	return r.taskBase() + node
}

func (r *Recorder) defect(k DefectKind, slot, node int32, msg string) {
	r.Defects = append(r.Defects, Defect{Key: r.key, Kind: k, Slot: slot, Node: node, Msg: msg})
}

// ScopeBegin opens a scope inside the body.
func (r *Recorder) ScopeBegin(mode ScopeMode) { r.scopes.begin(mode) }

// ScopeEnd closes it.
func (r *Recorder) ScopeEnd() {
	if !r.scopes.end() {
		r.fail("scope end without a scope begin inside the body")
	}
}

// check is the recording's error once the body has returned.
func (r *Recorder) check() error {
	if r.err != nil {
		return r.err
	}
	if n := r.scopes.depth(); n != 0 {
		return fmt.Errorf("graph %q: %w: %d scopes left open at the end of the body", r.key, ErrUnsupported, n)
	}
	return nil
}

// finish completes r.def in the recorder's own buffers: the heap layout of
// the internal roots and the external dependency slots. With the boundary
// signature (Build's, or Publish's records), r.def then is the whole
// Definition, sharing the recorder's storage until the next Reset.
func (r *Recorder) finish() {
	d := &r.def
	d.BoundaryScalars = r.nscalars
	d.Roots = d.Roots[:0]
	var heap int64
	for _, p := range r.roots {
		d.Roots = append(d.Roots, InternalRoot{DType: p.dtype, Elems: p.elems, Creator: p.creator, ManualDep: p.mdep, HeapOffset: heap})
		heap += alignUp(p.elems * p.dtype.Size())
	}
	d.HeapBytes = heap
	d.ExtDeps = d.ExtDeps[:0]
	for _, w := range r.extWait {
		d.ExtDeps = append(d.ExtDeps, w)
	}
	if len(d.ExtDeps) == 0 {
		d.ExtDeps = nil
	}
}

// Build finishes the Definition: heap layout of the internal roots, the
// boundary signature, and which boundary slots the body writes. The
// returned Definition shares no storage with the recorder.
func (r *Recorder) Build() (*Definition, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if len(r.kids) > 0 {
		// What the device runs: the flattening (RecordBody's, or made now
		// for a body run on the recorder by its caller).
		if r.nested == nil {
			var err error
			if r.nested, err = r.publish(); err != nil {
				return nil, err
			}
		}
		return DecodeDefinition(r.nested.Image)
	}
	tens, preds, err := r.rec.decode()
	if err != nil {
		return nil, fmt.Errorf("graph %q: %w", r.key, err)
	}
	r.finish()
	d := &Definition{
		FullKey: r.def.FullKey, Key: r.key,
		Nodes:           append([]NodeDesc(nil), r.def.Nodes...),
		Tensors:         tens,
		Scalars:         append([]ScalarRef(nil), r.def.Scalars...),
		Fanin:           append([]uint32(nil), r.def.Fanin...),
		Preds:           preds,
		Roots:           append(make([]InternalRoot, 0, len(r.def.Roots)), r.def.Roots...),
		Boundary:        Signature(r.boundary, r),
		BoundaryScalars: r.nscalars,
		HeapBytes:       r.def.HeapBytes,
	}
	for _, w := range r.def.ExtDeps {
		d.ExtDeps = append(d.ExtDeps, append([]uint32{}, w...))
	}
	return d, nil
}

// Publish images a successful recording (RecordBody returned nil) straight
// from the recorder's buffers, without Build's copy of every node, tensor
// and scalar: the image, its content hash, the boundary slots the body
// writes, and the host's part of the Definition, which is what
// DecodeDefinitionHost gives for the same image (what a runtime replays
// with; the image holds the rest).
func (r *Recorder) Publish() *Published {
	if err := r.check(); err != nil {
		panic("stages: Publish of a failed recording: " + err.Error())
	}
	if len(r.kids) > 0 {
		if r.nested == nil {
			var err error
			if r.nested, err = r.publish(); err != nil {
				panic("stages: Publish of a nested recording that does not flatten: " + err.Error())
			}
		}
		return r.nested
	}
	r.finish()
	r.boundaryRecords()
	if !r.fullEdges {
		reduceDefinition(&r.def, &r.red)
	}
	img := encodeDefinition(&r.def, &r.rec)
	// The node table goes to the host's part as it is; the next Reset
	// makes the recorder another.
	host := &Definition{
		FullKey: r.def.FullKey, Key: r.key, ContentHash: r.def.ContentHash,
		HeapBytes: r.def.HeapBytes, BoundaryScalars: r.nscalars,
		Nodes: slices.Clip(r.def.Nodes),
	}
	if len(host.Nodes) == 0 {
		host.Nodes = nil
	}
	r.def.Nodes = nil
	if n := len(r.def.ExtDeps); n > 0 {
		waits := 0
		for _, w := range r.def.ExtDeps {
			waits += len(w)
		}
		all := make([]uint32, 0, waits)
		host.ExtDeps = make([][]uint32, n)
		for j, w := range r.def.ExtDeps {
			lo := len(all)
			all = append(all, w...)
			host.ExtDeps[j] = all[lo:len(all):len(all)]
		}
	}
	var written []int32
	for i, w := range r.wrote {
		if w {
			written = append(written, int32(i))
		}
	}
	return &Published{Def: host, Image: img, Hash: r.def.ContentHash, Written: written}
}

// encodedRecords is a Definition's tensor templates and predicates as the
// image's records (a Recorder writes them as it records).
type encodedRecords struct {
	tens, preds  writer
	ntens, npred int
	// bound is the boundary signature's records (Publish's), nbound slots.
	bound  writer
	nbound int
}

func (e *encodedRecords) reset() {
	e.tens.B, e.preds.B, e.ntens, e.npred = e.tens.B[:0], e.preds.B[:0], 0, 0
	e.bound.B, e.nbound = e.bound.B[:0], 0
}

// boundaryRecords writes the boundary signature (Signature's slots) as the
// image's records: each slot's tag, its layout with its alias
// representative (the first slot on its root, if an earlier one) in the
// record's slot field, and its root's size.
func (r *Recorder) boundaryRecords() {
	e := &r.rec
	e.bound.B, e.nbound = e.bound.B[:0], len(r.boundary)
	for i := range r.boundary {
		a := &r.boundary[i]
		first := r.slots.get(a.View.Root)[0]
		rep := int32(-1)
		if int(first) < i {
			rep = first
		}
		e.bound.tensorRecord(uint8(a.Tag), &a.View, rep+1, 0)
		e.bound.Uvarint(uint64(r.broots[first].Elems))
	}
}

// decode is the records as TensorRefs and PredRefs (Build's copy). A
// template the image cannot hold (a negative dimension) fails here, as its
// image would fail the device's decode.
func (e *encodedRecords) decode() ([]TensorRef, []PredRef, error) {
	var tens []TensorRef
	if e.ntens > 0 {
		tens = make([]TensorRef, e.ntens)
	}
	rd := newReader(e.tens.B, "definition tensors")
	for i := range tens {
		rd.tensorRef(&tens[i])
	}
	if rd.Err != nil {
		return nil, nil, rd.Err
	}
	var preds []PredRef
	if e.npred > 0 {
		preds = make([]PredRef, e.npred)
	}
	rd = newReader(e.preds.B, "definition predicates")
	for i := range preds {
		rd.predRef(&preds[i])
	}
	if rd.Err != nil {
		return nil, nil, rd.Err
	}
	return tens, preds, nil
}

// WrittenSlots lists the boundary slots the body writes, in slot order: the
// outer task must become their producer whatever the caller's tag says.
func (d *Definition) WrittenSlots() []int32 {
	seen := make([]bool, len(d.Boundary))
	var out []int32
	for _, t := range d.Tensors {
		if (t.Src == SrcBoundaryExact || t.Src == SrcBoundaryView) && (t.Tag == TagInOut || t.Tag == TagOutputExisting) && !seen[t.Slot] {
			seen[t.Slot] = true
		}
	}
	for i, s := range seen {
		if s {
			out = append(out, int32(i))
		}
	}
	return out
}

// RootElems answers the size of a boundary root from the caller's snapshot.
func (r *Recorder) RootElems(id RootID) int64 { return r.broots[r.slots.get(id)[0]].Elems }

// slotTable maps each boundary root to the boundary slots that view it, in
// slot order; classify and meta ask it for every argument a body records.
// It is an open-addressed table rebuilt in place at each Reset (a map of
// slices allocated a slice per root per recording).
type slotTable struct {
	keys  []RootID // -1: empty; a power of two, at least twice the slots
	spans []Span   // per key: its slots, in order
	order []int32  // the slots grouped by root, in slot order
	shift uint
}

func (t *slotTable) reset(boundary []Arg) {
	n, shift := 2, uint(31)
	for n < 2*len(boundary) {
		n, shift = 2*n, shift-1
	}
	t.shift = shift
	t.keys = slices.Grow(t.keys[:0], n)[:n]
	for i := range t.keys {
		t.keys[i] = -1
	}
	t.spans = slices.Grow(t.spans[:0], n)[:n]
	clear(t.spans)
	for i := range boundary {
		h := t.find(boundary[i].View.Root)
		t.keys[h] = boundary[i].View.Root
		t.spans[h].N++
	}
	off := uint32(0)
	for h := range t.spans {
		t.spans[h].Off, off = off, off+t.spans[h].N
		t.spans[h].N = 0
	}
	t.order = slices.Grow(t.order[:0], len(boundary))[:len(boundary)]
	for i := range boundary {
		sp := &t.spans[t.find(boundary[i].View.Root)]
		t.order[sp.Off+sp.N] = int32(i)
		sp.N++
	}
}

// find is id's entry, or the empty one where it would go.
func (t *slotTable) find(id RootID) int {
	mask := len(t.keys) - 1
	h := int((uint32(id)*0x9E3779B1)>>t.shift) & mask
	for t.keys[h] != id && t.keys[h] != -1 {
		h = (h + 1) & mask
	}
	return h
}

// get is the slots viewing root id, nil if none.
func (t *slotTable) get(id RootID) []int32 {
	if len(t.keys) == 0 || id < 0 {
		return nil
	}
	h := t.find(id)
	if t.keys[h] != id {
		return nil
	}
	sp := t.spans[h]
	return t.order[sp.Off : sp.Off+sp.N : sp.Off+sp.N]
}
