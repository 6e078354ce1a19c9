package stages

import (
	"errors"
	"fmt"
	"slices"
)

// Nested Graphs (ARCHITECTURE §11). A Graph call inside a body being
// recorded stays a call: the Recorder records the child body into a
// Definition of its own (its own full_key, under the same orchestration
// identity) and the parent gets one KindGraph node that refers to the child
// by content hash, its tensors and scalars the child's boundary bound to
// the parent's boundary slots or the body's own tensors. The parent's own
// image (Published.Nested) keeps the reference; what the device runs is its
// flattening (Published.Image, Flatten): every KindGraph node replaced by
// the child's nodes, so the device, the race check and the golden check see
// one flat Definition, as for any Graph.
//
// A KindGraph node's record holds the child's content hash in its
// BlockNum and Kernel[0] fields and its full_key in Kernel[1] and Kernel[2]
// (ChildOf): a store finds the child by full_key and checks its content
// hash, and the content hash of the parent covers both.

// ErrChild marks a nested Definition whose child is missing, refused, or
// does not fit the parent's binding: the parent is refused whole (never
// half-flattened) and recorded again.
var ErrChild = errors.New("nested Definition's child")

// maxNesting bounds the depth of Graphs inside Graphs: each level takes a
// range of private task ids (taskLevelBits).
const maxNesting = 8

// taskLevelBits is the width of one nesting level's private task ids: a
// body at depth d numbers its nodes from privateTaskBase + d<<taskLevelBits,
// so that a child's deps on its parent's tasks (its call's ExtDeps) are
// never taken for its own.
const taskLevelBits = 26

// Child is what a KindGraph node of a nested Definition refers to.
type Child struct {
	Node    int    // the node's index in the parent
	Hash    uint64 // the child Definition's content hash
	FullKey uint64 // the child's full_key (where a store finds it)
}

// ChildOf reads a KindGraph node's child reference.
func ChildOf(nd *NodeDesc) (hash, fullKey uint64) {
	hash = uint64(uint32(nd.BlockNum)) | uint64(uint32(nd.Kernel[0]))<<32
	fullKey = uint64(uint32(nd.Kernel[1])) | uint64(uint32(nd.Kernel[2]))<<32
	return hash, fullKey
}

func setChild(nd *NodeDesc, hash, fullKey uint64) {
	nd.BlockNum = int32(uint32(hash))
	nd.Kernel = [3]KernelID{KernelID(int32(uint32(hash >> 32))), KernelID(int32(uint32(fullKey))), KernelID(int32(uint32(fullKey >> 32)))}
}

// Children lists d's child references in node order (none for a flat
// Definition). It reads only the node table, so it works on the host's part
// of a Definition (DecodeDefinitionHost) too.
func (d *Definition) Children() []Child {
	var out []Child
	for i := range d.Nodes {
		if d.Nodes[i].Kind == KindGraph {
			h, fk := ChildOf(&d.Nodes[i])
			out = append(out, Child{Node: i, Hash: h, FullKey: fk})
		}
	}
	return out
}

// Nested reports whether d refers to child Definitions.
func (d *Definition) Nested() bool {
	for i := range d.Nodes {
		if d.Nodes[i].Kind == KindGraph {
			return true
		}
	}
	return false
}

// OwnImage is the Definition's own image and its content hash: the nested
// image for a Definition whose body calls Graphs, else the image the device
// runs. A parent refers to a child by its own hash; a store keeps each
// Definition under its own image.
func (p *Published) OwnImage() ([]byte, uint64) {
	if p.Nested != nil {
		return p.Nested, DefinitionHash(p.Nested)
	}
	return p.Image, p.Hash
}

// Graph records a Graph call inside the body as a child Definition and one
// KindGraph node binding it (see the top of this file). A call the child
// Definition cannot be made for fails the recording (ErrUnsupported), and
// its calls run on the ordinary path, where the nested call is a call of its
// own.
func (r *Recorder) Graph(call *GraphCall) TaskID {
	if r.err != nil {
		return NoTask
	}
	if call.Template != nil || call.Boundary == nil && len(call.Locs) > 0 {
		r.fail("nested Graph %q by a boundary template (a recording takes boundaries whole)", call.Key)
		return NoTask
	}
	for s := range call.Boundary {
		if call.Boundary[s].Tag == TagOutput {
			r.fail("nested Graph %q: boundary slot %d is tagged out (a nested call's boundary views tensors that exist; allocate it in the body and pass it out_existing)", call.Key, s)
			return NoTask
		}
	}
	k, err := r.child(call)
	if err != nil {
		r.fail("nested Graph %q: %v", call.Key, err)
		return NoTask
	}
	// The node is the outer task of the child in the parent's TensorMap: it
	// waits on its slots' producers and becomes the producer of every slot
	// the child writes, however the call tagged it.
	args := append(r.nestArgs[:0], call.Boundary...)
	for _, s := range k.pub.Written {
		if !args[s].Tag.Writes() {
			args[s].Tag = TagInOut
		}
	}
	r.nestArgs = args
	scal := r.nestScalars[:0]
	for i, v := range call.Scalars {
		src := int32(-1)
		if i < len(call.ScalarSrc) {
			src = call.ScalarSrc[i]
		}
		scal = append(scal, Scalar{Value: v, Src: src})
	}
	r.nestScalars = scal
	id := r.Submit(&Task{Kind: KindGraph, BlockNum: -1, Args: args, Scalars: scal, Deps: call.ExtDeps})
	if r.err == nil {
		setChild(&r.def.Nodes[len(r.def.Nodes)-1], k.own, k.fk)
	}
	return id
}

// kid is a child Definition a recording made (or reuses).
type kid struct {
	fk          uint64
	sig         []BoundarySlot
	nscal, next int
	pub         *Published
	own         uint64      // its own content hash (Published.OwnImage)
	flat        *Definition // its flattening, decoded in full (Publish's)
}

// child records (or, for a call of a key already recorded in this body with
// the same signature, reuses) the Definition of a nested call.
func (r *Recorder) child(call *GraphCall) (*kid, error) {
	if r.depth+1 >= maxNesting {
		return nil, fmt.Errorf("nested %d deep, more than %d", r.depth+1, maxNesting-1)
	}
	// The child sees its boundary roots under the parent's ids (the body
	// passes them on as it got them), and numbers its own roots after the
	// parent's (rootBase), so neither is taken for the other.
	bound := append([]Arg(nil), call.Boundary...)
	slotRoots := make([]BoundaryRoot, len(bound))
	for s := range bound {
		br, ok := r.rootOf(bound[s].View.Root)
		if !ok {
			return nil, fmt.Errorf("boundary slot %d views root %d, which is neither a boundary tensor nor allocated in the body", s, bound[s].View.Root)
		}
		slotRoots[s] = br
	}
	fk := fullKeyFrom(r.idHash, call.Key, call.Config)
	sig := Signature(bound, kidSizer{bound, slotRoots})
	if call.KeyComplete {
		// A key proven complete (the model config's static check) has one
		// structure per signature: its Definition is shared by every call.
		for _, k := range r.kids {
			if k.fk == fk && k.nscal == len(call.Scalars) && k.next == len(call.ExtDeps) && slices.Equal(k.sig, sig) {
				return k, nil
			}
		}
	}
	for _, k := range r.kids {
		if k.fk == fk {
			// The key called with another boundary signature (or scalar
			// or dependency count) in this body: another Definition, so
			// another full_key, since a store keeps one per full_key.
			fk = sigKey(fk, sig, len(call.Scalars), len(call.ExtDeps))
			break
		}
	}
	if r.sub == nil {
		r.sub = new(Recorder)
	}
	sub := r.sub
	sub.depth, sub.idHash, sub.rootBase = r.depth+1, r.idHash, r.rootBase+len(r.roots)
	sub.fullEdges, sub.edges = r.fullEdges, r.edges
	if err := sub.RecordBody(call.Key, fk, bound, slotRoots, call.Scalars, call.ExtDeps, call.Body); err != nil {
		return nil, err
	}
	r.Defects = append(r.Defects, sub.Defects...)
	r.kidNodes += sub.Nodes()
	pub, err := sub.publish()
	if err != nil {
		return nil, err
	}
	flat, err := DecodeDefinition(pub.Image)
	if err != nil {
		return nil, fmt.Errorf("%w: its image: %w", ErrChild, err)
	}
	k := &kid{fk: fk, sig: sig, nscal: len(call.Scalars), next: len(call.ExtDeps), pub: pub, flat: flat}
	_, k.own = pub.OwnImage()
	r.kids = append(r.kids, k)
	return k, nil
}

// sigKey is full_key fk told apart by a boundary signature and counts.
func sigKey(fk uint64, sig []BoundarySlot, nscal, next int) uint64 {
	h := fnvU64(fnvString(fk, "\x00signature"), uint64(len(sig)))
	for i := range sig {
		s := &sig[i]
		h = fnvU64(h, uint64(s.Tag)|uint64(s.Layout.DType)<<8|uint64(s.Layout.NDims)<<16)
		for d := 0; d < int(s.Layout.NDims) && d < MaxDims; d++ {
			h = fnvU64(fnvU64(h, uint64(s.Layout.Shape[d])), uint64(s.Layout.Strides[d]))
		}
		h = fnvU64(fnvU64(h, uint64(s.RootElems)), uint64(int64(s.AliasRep)))
	}
	return fnvU64(fnvU64(h, uint64(nscal)), uint64(next))
}

// rootOf is what the recording knows of a root a nested call's boundary
// views: one the body allocated, or a boundary root.
func (r *Recorder) rootOf(id RootID) (BoundaryRoot, bool) {
	if i, ok := r.own(id); ok {
		return BoundaryRoot{Elems: r.roots[i].elems, ManualDep: r.roots[i].mdep}, true
	}
	if s := r.slots.get(id); s != nil {
		return r.broots[s[0]], true
	}
	return BoundaryRoot{}, false
}

// kidSizer sizes a child's boundary roots: each slot's root, as the
// parent knows it.
type kidSizer struct {
	bound []Arg
	roots []BoundaryRoot
}

func (k kidSizer) RootElems(id RootID) int64 {
	for s := range k.bound {
		if k.bound[s].View.Root == id {
			return k.roots[s].Elems
		}
	}
	return 0
}

// publish is Publish with its error: a nested body's flattening can fail
// (a child that does not fit its binding), which a leaf's cannot.
func (r *Recorder) publish() (*Published, error) {
	if len(r.kids) == 0 {
		return r.Publish(), nil
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	r.finish()
	r.boundaryRecords()
	if !r.fullEdges {
		reduceDefinition(&r.def, &r.red)
	}
	own := encodeDefinition(&r.def, &r.rec)
	parent, err := DecodeDefinition(own)
	if err != nil {
		return nil, fmt.Errorf("graph %q: its nested image: %w", r.key, err)
	}
	byHash := make(map[uint64]*kid, len(r.kids))
	for _, k := range r.kids {
		byHash[k.own] = k
	}
	flat, err := Flatten(parent, func(c Child) (*Definition, error) {
		if k := byHash[c.Hash]; k != nil && k.fk == c.FullKey {
			return k.flat, nil
		}
		return nil, fmt.Errorf("%w %016x (full_key %016x) is not among the recording's", ErrChild, c.Hash, c.FullKey)
	})
	if err != nil {
		return nil, fmt.Errorf("graph %q: %w", r.key, err)
	}
	if !r.fullEdges {
		ReduceDefinition(flat)
	}
	img := EncodeDefinition(flat)
	// The device checks the whole image at its first launch, as it does a
	// leaf's (a flattening it refuses fails the key loudly).
	host, written, err := DecodeDefinitionHost(img)
	if err != nil {
		return nil, fmt.Errorf("graph %q: its flattening: %w", r.key, err)
	}
	children := make([]*Published, len(r.kids))
	for i, k := range r.kids {
		children[i] = k.pub
	}
	return &Published{Def: host, Image: img, Hash: host.ContentHash, Written: written, Nested: own, Children: children}, nil
}

// Flatten replaces every KindGraph node of d by its child's nodes (child
// returns the child's Definition, flattened itself, or why it cannot): the
// Definition the device runs. A child's nodes with no producer inside the
// child wait on what the KindGraph node waited on; a node that waited on
// the KindGraph node waits on the child's last nodes (those nothing in the
// child waits on), so the order a Graph call imposes holds; the child's
// internal roots get fresh heap after the parent's; its boundary references
// are composed with the node's binding. Any child that is missing, nested
// still, or does not fit its binding fails the whole with ErrChild.
func Flatten(d *Definition, child func(Child) (*Definition, error)) (*Definition, error) {
	f := &Definition{
		FullKey: d.FullKey, Key: d.Key, Boundary: d.Boundary, BoundaryScalars: d.BoundaryScalars,
		Roots: append([]InternalRoot(nil), d.Roots...),
	}
	// Sized first: a step's flattening is tens of thousands of nodes, and
	// its pools grown append by append were most of its cost.
	kids := make([]*Definition, len(d.Nodes))
	var nn, nt, ns, nf, np int
	for i := range d.Nodes {
		nd := &d.Nodes[i]
		if nd.Kind != KindGraph {
			nn, nt, ns, nf = nn+1, nt+int(nd.Tensors.N), ns+int(nd.Scalars.N), nf+int(nd.Fanin.N)
			if nd.Pred > 0 {
				np++
			}
			continue
		}
		c := Child{Node: i}
		c.Hash, c.FullKey = ChildOf(nd)
		cd, err := child(c)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		if cd == nil || cd.Nested() {
			return nil, fmt.Errorf("node %d: %w %016x is missing or not flattened", i, ErrChild, c.Hash)
		}
		kids[i] = cd
		nn, nt, ns, nf, np = nn+len(cd.Nodes), nt+len(cd.Tensors), ns+len(cd.Scalars), nf+len(cd.Fanin)+len(cd.Nodes)*int(nd.Fanin.N), np+len(cd.Preds)
	}
	f.Nodes, f.Tensors, f.Scalars = make([]NodeDesc, 0, nn), make([]TensorRef, 0, nt), make([]ScalarRef, 0, ns)
	f.Fanin, f.Preds = make([]uint32, 0, nf), make([]PredRef, 0, np)
	type span struct{ lo, hi int }
	where := make([]span, len(d.Nodes))
	// sinks[i] is what a wait on parent node i is, in flat node indices.
	sinks := make([][]uint32, len(d.Nodes))
	heap := d.HeapBytes
	fanin := func(nd *NodeDesc) []uint32 {
		var out []uint32
		for _, p := range d.Fanin[nd.Fanin.Off : nd.Fanin.Off+nd.Fanin.N] {
			out = append(out, sinks[p]...)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for i := range d.Nodes {
		nd := &d.Nodes[i]
		if nd.Kind != KindGraph {
			n := f.appendNode(d, nd, fanin(nd), nil)
			where[i], sinks[i] = span{n, n + 1}, []uint32{uint32(n)}
			continue
		}
		c := Child{Node: i}
		c.Hash, _ = ChildOf(nd)
		cd := kids[i]
		b := &binding{tens: d.Tensors[nd.Tensors.Off : nd.Tensors.Off+nd.Tensors.N], scal: d.Scalars[nd.Scalars.Off : nd.Scalars.Off+nd.Scalars.N], rootBase: int32(len(f.Roots))}
		if err := b.check(d, cd); err != nil {
			return nil, fmt.Errorf("node %d: %w %016x: %w", i, ErrChild, c.Hash, err)
		}
		base := len(f.Nodes)
		heap = alignUp(heap)
		for _, rt := range cd.Roots {
			rt.Creator += uint32(base)
			rt.HeapOffset += heap
			f.Roots = append(f.Roots, rt)
		}
		heap += cd.HeapBytes
		outer := fanin(nd)
		waited := make([]bool, len(cd.Nodes))
		for j := range cd.Nodes {
			cn := &cd.Nodes[j]
			in := cd.Fanin[cn.Fanin.Off : cn.Fanin.Off+cn.Fanin.N]
			var fin []uint32
			if len(in) == 0 {
				fin = outer
			}
			for _, p := range in {
				waited[p] = true
				fin = append(fin, p+uint32(base))
			}
			f.appendNode(cd, cn, fin, b)
		}
		var last []uint32
		for j, w := range waited {
			if !w {
				last = append(last, uint32(base+j))
			}
		}
		if len(cd.Nodes) == 0 {
			last = outer // an empty child orders what its call ordered
		}
		where[i], sinks[i] = span{base, len(f.Nodes)}, last
	}
	f.HeapBytes = heap
	for _, w := range d.ExtDeps {
		var out []uint32
		for _, n := range w {
			for k := where[n].lo; k < where[n].hi; k++ {
				out = append(out, uint32(k))
			}
		}
		f.ExtDeps = append(f.ExtDeps, out)
	}
	return f, nil
}

// binding is a KindGraph node's tensors and scalars: the child's boundary
// as the parent binds it.
type binding struct {
	tens     []TensorRef
	scal     []ScalarRef
	rootBase int32 // the child's first internal root in the flat Definition
}

// check holds the child to the binding: as many slots and scalars, each
// slot's layout the bound tensor's, and its root's size the bound root's
// (the child's references stay inside it).
func (b *binding) check(d, cd *Definition) error {
	if len(cd.Boundary) != len(b.tens) || cd.BoundaryScalars != len(b.scal) {
		return fmt.Errorf("takes %d tensors and %d scalars, bound %d and %d", len(cd.Boundary), cd.BoundaryScalars, len(b.tens), len(b.scal))
	}
	for s := range b.tens {
		t, bs := &b.tens[s], &cd.Boundary[s]
		if !t.Layout.SameLayout(&bs.Layout) {
			return fmt.Errorf("boundary slot %d: layout %s bound to %s", s, describeLayout(&bs.Layout), describeLayout(&t.Layout))
		}
		var elems int64
		switch t.Src {
		case SrcBoundaryExact, SrcBoundaryView:
			if int(t.Slot) >= len(d.Boundary) {
				return fmt.Errorf("boundary slot %d bound to slot %d of %d", s, t.Slot, len(d.Boundary))
			}
			elems = d.Boundary[t.Slot].RootElems
		case SrcInternal:
			if int(t.Slot) >= len(d.Roots) {
				return fmt.Errorf("boundary slot %d bound to root %d of %d", s, t.Slot, len(d.Roots))
			}
			elems = d.Roots[t.Slot].Elems
		default:
			return fmt.Errorf("boundary slot %d bound to source %d", s, t.Src)
		}
		if elems != bs.RootElems {
			return fmt.Errorf("boundary slot %d: a root of %d elements bound to one of %d", s, bs.RootElems, elems)
		}
	}
	for s := range b.scal {
		if sc := &b.scal[s]; sc.Boundary && int(sc.Slot) >= d.BoundaryScalars {
			return fmt.Errorf("boundary scalar %d bound to slot %d of %d", s, sc.Slot, d.BoundaryScalars)
		}
	}
	return nil
}

// ref is a child's tensor reference in the parent's terms.
func (b *binding) ref(t TensorRef) TensorRef {
	switch t.Src {
	case SrcInternal, SrcOwnOutput:
		t.Slot += b.rootBase
		return t
	}
	o := &b.tens[t.Slot]
	delta := t.Delta
	if t.Src == SrcBoundaryExact {
		delta = 0
	}
	switch {
	case o.Src == SrcBoundaryExact && t.Src == SrcBoundaryExact:
		t.Slot, t.Delta = o.Slot, 0
	case o.Src == SrcBoundaryExact, o.Src == SrcBoundaryView:
		t.Src, t.Slot, t.Delta = SrcBoundaryView, o.Slot, o.Delta+delta
	default: // SrcInternal (check refused the rest)
		t.Src, t.Slot, t.Delta = SrcInternal, o.Slot, o.Delta+delta
	}
	return t
}

// appendNode appends a copy of nd (of src) with fanin fin, its references
// bound by b (nil: src is the parent itself), and returns its index.
func (f *Definition) appendNode(src *Definition, nd *NodeDesc, fin []uint32, b *binding) int {
	n := *nd
	n.Tensors = Span{Off: uint32(len(f.Tensors)), N: nd.Tensors.N}
	for _, t := range src.Tensors[nd.Tensors.Off : nd.Tensors.Off+nd.Tensors.N] {
		if b != nil {
			t = b.ref(t)
		}
		f.Tensors = append(f.Tensors, t)
	}
	n.Scalars = Span{Off: uint32(len(f.Scalars)), N: nd.Scalars.N}
	for _, s := range src.Scalars[nd.Scalars.Off : nd.Scalars.Off+nd.Scalars.N] {
		if b != nil && s.Boundary {
			// The parent's binding: one of its boundary scalars, or a value
			// its body passed (static).
			s = b.scal[s.Slot]
		}
		f.Scalars = append(f.Scalars, s)
	}
	n.Fanin = Span{Off: uint32(len(f.Fanin)), N: uint32(len(fin))}
	f.Fanin = append(f.Fanin, fin...)
	if nd.Pred > 0 {
		p := src.Preds[nd.Pred-1]
		if b != nil {
			p.Tensor = b.ref(p.Tensor)
		}
		f.Preds = append(f.Preds, p)
		n.Pred = int32(len(f.Preds))
	}
	f.Nodes = append(f.Nodes, n)
	return len(f.Nodes) - 1
}

// AssembleNested makes the Published a runtime replays from a nested
// Definition's own image as a store keeps it: child gives each child by
// its reference (its own image in Published.OwnImage, nested itself or
// not), and AssembleNested checks it is the Definition referred to (its
// own content hash), flattens the parent over the children and, with
// reduce, ships the flattening's transitive reduction as a recording does.
// A child missing, refused or not the one referred to fails the whole
// (ErrChild): the parent is never half-assembled.
func AssembleNested(own []byte, child func(Child) (*Published, error), reduce bool) (*Published, error) {
	parent, err := DecodeDefinition(own)
	if err != nil {
		return nil, err
	}
	type got struct {
		pub  *Published
		flat *Definition
	}
	kids := map[uint64]*got{}
	var children []*Published
	for _, c := range parent.Children() {
		if kids[c.Hash] != nil {
			continue
		}
		p, err := child(c)
		if err != nil {
			return nil, fmt.Errorf("graph %q node %d: %w %016x (full_key %016x): %w", parent.Key, c.Node, ErrChild, c.Hash, c.FullKey, err)
		}
		if p == nil {
			return nil, fmt.Errorf("graph %q node %d: %w %016x (full_key %016x) is missing", parent.Key, c.Node, ErrChild, c.Hash, c.FullKey)
		}
		if _, h := p.OwnImage(); h != c.Hash || p.Def.FullKey != c.FullKey {
			return nil, fmt.Errorf("graph %q node %d: %w %016x (full_key %016x): found %016x (full_key %016x) there instead", parent.Key, c.Node, ErrChild, c.Hash, c.FullKey, h, p.Def.FullKey)
		}
		flat, err := DecodeDefinition(p.Image)
		if err != nil {
			return nil, fmt.Errorf("graph %q node %d: %w %016x: %w", parent.Key, c.Node, ErrChild, c.Hash, err)
		}
		kids[c.Hash] = &got{pub: p, flat: flat}
		children = append(children, p)
	}
	flat, err := Flatten(parent, func(c Child) (*Definition, error) { return kids[c.Hash].flat, nil })
	if err != nil {
		return nil, fmt.Errorf("graph %q: %w", parent.Key, err)
	}
	if reduce {
		ReduceDefinition(flat)
	}
	img := EncodeDefinition(flat)
	host, written, err := DecodeDefinitionHost(img)
	if err != nil {
		return nil, fmt.Errorf("graph %q: its flattening: %w", parent.Key, err)
	}
	if _, err := DecodeDefinition(img); err != nil {
		return nil, fmt.Errorf("graph %q: its flattening: %w", parent.Key, err)
	}
	return &Published{Def: host, Image: img, Hash: host.ContentHash, Written: written, Nested: own, Children: children}, nil
}

// Parts lists p and every Definition it refers to, children first, each
// once: what a store keeps, each under its own image (OwnImage).
func (p *Published) Parts() []*Published {
	var out []*Published
	seen := map[*Published]bool{}
	var walk func(q *Published)
	walk = func(q *Published) {
		if seen[q] {
			return
		}
		seen[q] = true
		for _, c := range q.Children {
			walk(c)
		}
		out = append(out, q)
	}
	walk(p)
	return out
}
