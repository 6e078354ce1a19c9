package stages

import (
	"encoding/binary"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// This file holds the two things the host ships to the device: the run image
// (one per run: task descriptors and Graph submissions) and the Definition
// (one per distinct full_key, uploaded once as a shared device object). Both
// are plain data; codec_*.go turn them into flat, versioned, little-endian
// bytes with a content hash, and back (the byte layout: package imagefmt).

// Span is a window into one of an image's flat pools.
type Span struct {
	Off uint32
	N   uint32
}

// RootDesc is a root that the run creates on the device: an alloc task's
// output or a kernel's runtime-allocated output. Entry roots are registered
// with the device once, before any run, and are not listed.
type RootDesc struct {
	ID        RootID
	DType     DType
	Elems     int64
	Creator   TaskID
	ManualDep bool
	// Addr is the device address the host assigned from the run's heap.
	Addr uint64
}

// TaskDesc is one ordinary task or one outer GRAPH task of a run image.
type TaskDesc struct {
	Kind     Kind
	Kernel   [3]KernelID
	BlockNum int32
	Launch   Launch
	// Args is into RunImage.Args, or RunImage.Bound for a GRAPH task of a
	// narrow image.
	Args    Span
	Scalars Span // into RunImage.Scalars
	Fanin   Span // into RunImage.Fanin
	// Implied, in a decoded image, counts the fanin edges the host's
	// transitive reduction (reduce.go) dropped from this task because
	// other edges imply them: Fanin ships the rest. An image the host
	// builds keeps every edge in Fanin (its TensorMap's set, which expand
	// and the reference traces compare) and the shipped ones apart.
	Implied uint32
	Pred    Predicate
	// Graph indexes RunImage.Graphs for a KindGraph task, else -1.
	Graph int32
}

// GraphSubmission is one Graph call's patch: which Definition it replays and
// the values that vary per call. Nothing else about the body is shipped.
type GraphSubmission struct {
	Task    TaskID
	FullKey uint64
	DefHash uint64 // content hash of the uploaded Definition it replays
	// Boundary holds the call's boundary tensors (into RunImage.Args, or
	// RunImage.Bound in a narrow image), in the Definition's slot order;
	// Scalars its boundary scalar values.
	Boundary Span
	Scalars  Span
	// HeapBase is the device address of this call's heap block: the
	// Definition's internal roots live at HeapBase + InternalRoot.HeapOffset.
	HeapBase uint64
}

// RunImage is everything one run ships to the device in one copy.
//
// An image the host builds (OrdinaryPath) is narrow: its Graph boundaries
// are in Bound, as the image ships them, and its Args hold the other
// tasks' arguments only. A warm pass is mostly boundaries (DSv4 full: 2,962
// of 3,113 args), and a full Arg is 112 bytes where the part a replay may
// change is 13. Any other image (decoded from bytes, or built by hand) has
// every argument in Args. Both encode to the same bytes: the encoder copies
// each Graph's boundary records in among the other arguments, in task
// order.
type RunImage struct {
	Tasks []TaskDesc
	Args  []Arg
	// Bound holds a narrow image's Graph boundary args in Graph order, each
	// a BoundArg in the record the image ships (imagefmt.CompactArgSize
	// bytes; BoundArg and SetBoundArg read and write them).
	Bound   []byte
	Scalars []uint64
	Fanin   []TaskID
	Roots   []RootDesc
	Graphs  []GraphSubmission
	// HeapBytes is the run heap's high-water mark (alloc roots and Graph
	// heap blocks).
	HeapBytes int64

	// narrow: see RunImage. argsBefore[g] is len(Args) when Graphs[g] was
	// submitted: where its boundary goes among the other arguments.
	narrow     bool
	argsBefore []uint32
	// ship and shipSpan are the fanin the image ships, when the host
	// reduced it (shipSpan has a span per task, into ship): each task's
	// Fanin without the edges other paths imply.
	ship     []TaskID
	shipSpan []Span
}

// reduced reports whether the image ships its reduced fanin.
func (img *RunImage) reduced() bool { return len(img.shipSpan) == len(img.Tasks) && len(img.Tasks) > 0 }

// ShippedFanin is the fanin of task id as the image ships it: Fanin less
// the edges the reduction dropped (all of Fanin when it did not reduce).
func (img *RunImage) ShippedFanin(id TaskID) []TaskID {
	if img.reduced() {
		s := img.shipSpan[id]
		return img.ship[s.Off : s.Off+s.N]
	}
	s := img.Tasks[id].Fanin
	return img.Fanin[s.Off : s.Off+s.N]
}

// EdgeCounts is the image's fanin edges, every one the TensorMap resolved
// (recorded: a decoded image's shipped ones plus those its tasks say were
// implied) and those it ships.
func (img *RunImage) EdgeCounts() (recorded, shipped int) {
	recorded, shipped = len(img.Fanin), len(img.Fanin)
	if img.reduced() {
		shipped = len(img.ship)
	}
	for i := range img.Tasks {
		recorded += int(img.Tasks[i].Implied)
	}
	return recorded, shipped
}

// Narrow reports whether the image keeps its Graph boundaries in Bound.
func (img *RunImage) Narrow() bool { return img.narrow }

// BoundArg is a Graph boundary argument in a narrow run image: what a replay
// may change of it. The rest of its view (dtype, shape, strides) is the
// Definition's boundary signature, which the host matched before replaying
// and the device holds; the image ships these three fields alone.
type BoundArg struct {
	Offset int64
	Root   RootID
	Tag    Tag
}

// NumBound is the number of boundary args in Bound.
func (img *RunImage) NumBound() int { return len(img.Bound) / imagefmt.CompactArgSize }

// BoundArg is boundary arg i of Bound.
func (img *RunImage) BoundArg(i int) BoundArg {
	r := img.Bound[i*imagefmt.CompactArgSize:][:imagefmt.CompactArgSize]
	return BoundArg{
		Tag:    Tag(r[0] &^ compactArg),
		Root:   RootID(binary.LittleEndian.Uint32(r[1:])),
		Offset: int64(binary.LittleEndian.Uint64(r[5:])),
	}
}

// SetBoundArg sets boundary arg i of Bound.
func (img *RunImage) SetBoundArg(i int, a BoundArg) {
	putBound(img.Bound[i*imagefmt.CompactArgSize:], a.Tag, a.Root, a.Offset)
}

// putBound writes a boundary arg's record at the start of r.
func putBound(r []byte, tag Tag, root RootID, off int64) {
	r = r[:imagefmt.CompactArgSize]
	r[0] = uint8(tag) | compactArg
	binary.LittleEndian.PutUint32(r[1:], uint32(root))
	binary.LittleEndian.PutUint64(r[5:], uint64(off))
}

// SourceKind says where a recorded node's tensor comes from at replay.
type SourceKind uint8

const (
	// SrcBoundaryExact is bit-for-bit a boundary tensor: replay substitutes
	// the call's boundary tensor.
	SrcBoundaryExact SourceKind = iota + 1
	// SrcBoundaryView is a view of a boundary tensor's root, Delta elements
	// after the boundary view's offset, with the template's own layout.
	SrcBoundaryView
	// SrcInternal is a view of a root created by an earlier node of the body.
	SrcInternal
	// SrcOwnOutput is a root the node itself creates (TagOutput, or an alloc
	// node's roots).
	SrcOwnOutput
)

// TensorRef is one recorded tensor argument.
type TensorRef struct {
	Tag Tag
	Src SourceKind
	// Slot is the boundary slot (SrcBoundary*) or the internal root index
	// (SrcInternal, SrcOwnOutput) into Definition.Roots.
	Slot int32
	// Delta is the element offset past the boundary view's offset
	// (SrcBoundaryView), or the offset within the internal root.
	Delta int64
	// Layout holds dtype, rank, shape and strides; its Root and Offset are
	// unused.
	Layout View
}

// ScalarRef is one recorded scalar: a static value baked into the
// Definition, or a boundary scalar slot patched at every replay.
type ScalarRef struct {
	Boundary bool
	Slot     int32
	Value    uint64
}

// PredRef is a recorded predicate over a recorded tensor (Definition.Preds).
type PredRef struct {
	Valid  bool
	Op     PredOp
	Tensor TensorRef
	Index  int64
	Target int64
}

// NodeDesc is one recorded task of a body.
type NodeDesc struct {
	Kind     Kind
	Kernel   [3]KernelID
	BlockNum int32
	Launch   Launch
	Tensors  Span // into Definition.Tensors
	Scalars  Span // into Definition.Scalars
	Fanin    Span // into Definition.Fanin (node indices, all < this node)
	// Implied counts the node's fanin edges the transitive reduction
	// dropped as implied by the others (reduce.go): Fanin holds the rest.
	// 0 in a Definition shipped with every edge.
	Implied uint32
	// Pred is the node's predicate, 1-based into Definition.Preds; 0: none
	// (as the image numbers them). A predicate is apart from its node, as
	// in the image: most nodes have none, and a PredRef is 150 bytes.
	Pred int32
}

// InternalRoot is a root created inside the body; each replay gets fresh
// storage for it inside the call's heap block.
type InternalRoot struct {
	DType      DType
	Elems      int64
	Creator    uint32 // node index
	ManualDep  bool
	HeapOffset int64 // bytes from GraphSubmission.HeapBase, aligned
}

// BoundarySlot is the fixed part of one boundary tensor: what a replay may
// not change.
type BoundarySlot struct {
	Tag    Tag
	Layout View // Root and Offset unused
	// RootElems is the size of the root the slot views: a replay may move the
	// view to another root of the same size, never change the size.
	RootElems int64
	// AliasRep is the first earlier slot viewing the same root, or -1: the
	// alias partition a replay must keep.
	AliasRep int32
}

// Definition is a recorded body, built once per full_key and replayed by
// patching its boundary.
type Definition struct {
	FullKey  uint64
	Key      string
	Nodes    []NodeDesc
	Tensors  []TensorRef
	Scalars  []ScalarRef
	Fanin    []uint32
	Preds    []PredRef
	Roots    []InternalRoot
	Boundary []BoundarySlot
	// BoundaryScalars is the number of boundary scalars a call passes.
	BoundaryScalars int
	// ExtDeps is the body's external dependency slots, one per entry of the
	// recorded call's GraphCall.ExtDeps: ExtDeps[j] lists, ascending, the
	// nodes whose explicit dependencies named slot j's task. The outer GRAPH
	// task waits on every slot's task, and no node activates before the
	// outer task's fanin is met, so the device needs no edge of its own for
	// them; the lists say which nodes the slots order. A call must pass as
	// many slots as the Definition has (part of the boundary contract).
	ExtDeps [][]uint32
	// HeapBytes is the size of the heap block a call needs.
	HeapBytes int64
	// ContentHash covers the encoded image (imagefmt.Hash); 0 until built.
	ContentHash uint64
}
