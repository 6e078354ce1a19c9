package npu

import (
	"fmt"

	"github.com/hbg-dev/hbg/stages"
)

// defObj is an uploaded Definition as the device keeps it: the image's
// bytes (the H2D copy) and a narrow form of what a launch reads, derived
// once, at the first launch that replays it. A tensor template is kept as the few figures the
// simulation asks of it (elements, element size, its first and last dims, a
// layout hash) rather than as a five-dimension stages.View: 48 bytes
// instead of 120, and nothing to recompute per task.
type defObj struct {
	id    ObjectID
	image []byte
	hash  uint64
	// refs counts the uploads of the object not yet freed (Die.Free): a
	// host that evicts a Definition and uploads it again before the free
	// reaches the device keeps it.
	refs int
	// ready: the records below are read (Die.materialize, at the first
	// launch that replays the object); err: they did not decode.
	ready bool
	err   error

	key             string
	fullKey         uint64
	heapBytes       int64
	boundary        []stages.BoundarySlot
	boundaryScalars int

	nodes   []devNode
	fanin   []uint32 // node indices, into by devNode.fanin
	tensors []devTensor
	scalars []stages.ScalarRef
	preds   []devPred
	roots   []stages.InternalRoot // internal roots

	// implied is the fanin edges the host's transitive reduction dropped
	// from the nodes (stages.NodeDesc.Implied): counted, never resolved.
	implied int
	entry   []uint32 // nodes with no internal fanin
	foOff   []uint32 // fanout CSR
	foIdx   []uint32
}

// devNode is one node of a Definition.
type devNode struct {
	kind     stages.Kind
	kernel   [3]stages.KernelID
	blockNum int32
	tensors  stages.Span // into defObj.tensors
	scalars  stages.Span // into defObj.scalars
	fanin    stages.Span // into defObj.fanin
	pred     int32       // into defObj.preds; -1: none
	launch   stages.Launch
}

// devTensor is one tensor template: where it comes from at replay (src,
// slot, delta: stages.TensorRef) and its layout's figures.
type devTensor struct {
	tag   stages.Tag
	src   stages.SourceKind
	esz   uint8 // element size in bytes
	slot  int32
	delta int64
	n     int64 // elements
	span  int64 // the interval it covers (rarg.span)
	// nrun, run, pitch: a tile's rows (rarg)
	nrun, run, pitch int64
	rows             int64 // dim 0's extent (0 for rank 0)
	cols             int64 // the last dim's extent (0 below rank 2)
	lh               uint64
}

// devPred is a node's predicate: element index of the tensor compared
// with target.
type devPred struct {
	op     stages.PredOp
	t      devTensor
	index  int64
	target int64
}

func newDevTensor(t *stages.TensorRef) devTensor {
	v := &t.Layout
	d := devTensor{tag: t.Tag, src: t.Src, esz: uint8(v.DType.Size()), slot: t.Slot, delta: t.Delta,
		n: v.Elems(), span: v.Span(), rows: dim0(v), cols: dimLast(v), lh: layoutHash(v)}
	d.nrun, d.run, d.pitch = rowRuns(v)
	return d
}

// newDefObj checks a decoded Definition against the device's own rules and
// derives the device's form of it, with its tensor templates (decoded
// straight into that form). def is the upload's scratch: nothing of it is
// kept (every slice is copied).
func newDefObj(def *stages.Definition, tensors []devTensor) (*defObj, error) {
	n := len(def.Nodes)
	o := &defObj{
		hash: def.ContentHash, key: def.Key, fullKey: def.FullKey, heapBytes: def.HeapBytes,
		boundary: append([]stages.BoundarySlot(nil), def.Boundary...), boundaryScalars: def.BoundaryScalars,
		nodes:   make([]devNode, n),
		fanin:   append([]uint32(nil), def.Fanin...),
		tensors: tensors,
		scalars: append([]stages.ScalarRef(nil), def.Scalars...),
		roots:   append([]stages.InternalRoot(nil), def.Roots...),
	}
	for i := range def.Nodes {
		nd := &def.Nodes[i]
		if !kernelSlotsOK(nd.Kind, nd.Kernel) {
			return nil, fmt.Errorf("%w: node %d of kind %s has kernel slots %v", ErrInvalidImage, i, nd.Kind, nd.Kernel)
		}
		if nd.BlockNum > maxBlockNum {
			return nil, fmt.Errorf("%w: node %d has block_num %d (at most %d)", ErrInvalidImage, i, nd.BlockNum, maxBlockNum)
		}
		if nd.Fanin.N == 0 {
			o.entry = append(o.entry, uint32(i))
		}
		o.implied += int(nd.Implied)
		o.nodes[i] = devNode{kind: nd.Kind, kernel: nd.Kernel, blockNum: nd.BlockNum, tensors: nd.Tensors, scalars: nd.Scalars, fanin: nd.Fanin, pred: nd.Pred - 1, launch: nd.Launch}
	}
	o.preds = make([]devPred, len(def.Preds))
	for i := range def.Preds {
		p := &def.Preds[i]
		o.preds[i] = devPred{op: p.Op, t: newDevTensor(&p.Tensor), index: p.Index, target: p.Target}
	}
	o.foOff, o.foIdx = fanoutCSR[uint32, uint32](n, len(o.fanin), func(c int) []uint32 {
		f := o.nodes[c].fanin
		return o.fanin[f.Off : f.Off+f.N]
	})
	return o, nil
}
