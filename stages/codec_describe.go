package stages

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// DescribeImage writes b, a Definition or a run image (told apart by its
// magic), as an annotated tree: the header as the bytes say it (magic,
// version, lengths, counts, section offsets, the content hash and whether
// it verifies), then what it decodes to. For a Definition: the key, the
// boundary signature, the external dependency slots, the internal roots and
// the node table, each node with its fanin and fanout, tensor templates
// (where each comes from at replay), scalars and predicate. For a run image:
// the roots it creates, the tasks with their args, scalars, fanin and
// predicates, the Graph submissions and the pools.
//
// Bad bytes are an error wrapping ErrBadImage, after the header (when there
// is one) is written. An image whose only fault is its content hash is
// described in full (decoded with the hash ignored) before the error says so.
func DescribeImage(w io.Writer, b []byte) error {
	if len(b) < 4 {
		return badf("%d bytes are too short for an image header (a Definition or a run image)", len(b))
	}
	var t *dnode
	var err error
	switch string(b[:4]) {
	case DefinitionMagic:
		t, err = describeDefinition(b)
	case RunImageMagic:
		t, err = describeRun(b)
	default:
		return badf("magic %q is neither a Definition's %q nor a run image's %q", b[:4], DefinitionMagic, RunImageMagic)
	}
	if t != nil {
		if werr := t.write(w); werr != nil {
			return werr
		}
	}
	return err
}

// imageKind holds what differs between the two formats' headers.
type imageKind struct {
	title, what    string
	version        uint16
	hsize          int
	totalAt, hashO int
}

var (
	defKind = imageKind{"definition image", "definition", DefinitionVersion, defHeaderSize, imagefmt.DefTotalAt, hashOff}
	runKind = imageKind{"run image", "run", RunImageVersion, runHeaderSize, runTotalOff, runHashOff}
)

// header starts the tree of b with the fields every header starts with and
// says whether the rest of the header can be read as this version's (full).
func (k imageKind) header(b []byte) (root, h *dnode, full bool) {
	le := binary.LittleEndian
	root = &dnode{line: fmt.Sprintf("%s, %d bytes", k.title, len(b))}
	h = root.add("header")
	if len(b) < 8 {
		h.add("magic %q, %d bytes: too short for a header", b[:4], len(b))
		return root, h, false
	}
	v, hs := le.Uint16(b[imagefmt.VersionAt:]), int(le.Uint16(b[imagefmt.HeaderSizeAt:]))
	h.add("magic %q, version %d, header %d bytes", b[:4], v, hs)
	if v != k.version || hs != k.hsize || len(b) < k.hsize {
		return root, h, false
	}
	h.add("total_bytes %d (the file has %d)", le.Uint32(b[k.totalAt:]), len(b))
	want, got := le.Uint64(b[k.hashO:]), imagefmt.Hash(b, k.hashO)
	if want == got {
		h.add("content_hash %#016x (verifies)", want)
	} else {
		h.add("content_hash %#016x (does not verify: the bytes hash to %#016x)", want, got)
	}
	return root, h, true
}

// decode runs dec on b; when b's only fault is its content hash, on a copy
// with the hash fixed, returning the hash's error beside the result.
func (k imageKind) decode(b []byte, dec func([]byte) error) error {
	err := imagefmt.CheckHeader(b, string(b[:4]), k.version, k.hsize, k.totalAt, k.hashO, k.what)
	if err == nil {
		return dec(b)
	}
	if len(b) < k.hsize || binary.LittleEndian.Uint64(b[k.hashO:]) == imagefmt.Hash(b, k.hashO) {
		return err
	}
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(c[k.hashO:], imagefmt.Hash(c, k.hashO))
	if imagefmt.CheckHeader(c, string(c[:4]), k.version, k.hsize, k.totalAt, k.hashO, k.what) != nil {
		return err
	}
	if derr := dec(c); derr != nil {
		return derr
	}
	return err
}

// sections describes a section offset table.
func sections(h *dnode, b []byte, at int, names []string) {
	s := h.add("sections")
	for i, name := range names[:len(names)-1] {
		lo := binary.LittleEndian.Uint32(b[at+4*i:])
		hi := binary.LittleEndian.Uint32(b[at+4*i+4:])
		if hi >= lo {
			s.add("%-10s @%d, %d bytes", name, lo, hi-lo)
		} else {
			s.add("%-10s @%d (past the next section's start, %d)", name, lo, hi)
		}
	}
	s.add("%-10s @%d", names[len(names)-1], binary.LittleEndian.Uint32(b[at+4*(len(names)-1):]))
}

func describeDefinition(b []byte) (*dnode, error) {
	le := binary.LittleEndian
	root, h, full := defKind.header(b)
	if !full {
		return root, defKind.headerError(b)
	}
	u32 := func(at int) uint32 { return le.Uint32(b[at:]) }
	h.add("full_key %#016x", le.Uint64(b[imagefmt.DefFullKeyAt:]))
	h.add("heap_bytes %d", int64(le.Uint64(b[imagefmt.DefHeapAt:])))
	h.add("counts: %d nodes, %d edges, %d tensor templates, %d scalars, %d internal roots, %d boundary tensors, %d boundary scalars, %d predicates, %d key bytes, %d external dependency slots with %d waits",
		u32(imagefmt.DefNodesAt), u32(imagefmt.DefEdgesAt), u32(imagefmt.DefTensorsAt), u32(imagefmt.DefScalarsAt), u32(imagefmt.DefRootsAt),
		u32(imagefmt.DefBoundaryAt), u32(imagefmt.DefBoundaryScalarsAt), u32(imagefmt.DefPredicatesAt), u32(imagefmt.DefKeyLenAt),
		u32(imagefmt.DefExtSlotsAt), u32(imagefmt.DefExtWaitsAt))
	sections(h, b, defSecAt, imagefmt.DefSectionNames[:])
	var d *Definition
	err := defKind.decode(b, func(b []byte) error {
		dd := new(Definition)
		if err := decodeDefinition(b, dd, nil); err != nil {
			return err
		}
		d = dd
		return nil
	})
	if d == nil {
		return root, err
	}
	root.add("key %q", d.Key)
	sig := root.add("boundary signature: %d tensors, %d scalars", len(d.Boundary), d.BoundaryScalars)
	for i := range d.Boundary {
		s := &d.Boundary[i]
		line := fmt.Sprintf("slot %d: %s %s of a %d-element root", i, tagName(s.Tag), describeLayout(&s.Layout), s.RootElems)
		if s.AliasRep >= 0 {
			line += fmt.Sprintf(", the root of slot %d", s.AliasRep)
		}
		sig.add("%s", line)
	}
	if cs := d.Children(); len(cs) > 0 {
		// A nested Definition: the Definitions it refers to, by content
		// hash, each once (a child called twice is one Definition).
		seen := map[uint64]bool{}
		var uniq []Child
		for _, c := range cs {
			if !seen[c.Hash] {
				seen[c.Hash] = true
				uniq = append(uniq, c)
			}
		}
		ch := root.add("children: %d Graph calls of %d Definitions", len(cs), len(uniq))
		for _, c := range uniq {
			var at []int
			for _, o := range cs {
				if o.Hash == c.Hash {
					at = append(at, o.Node)
				}
			}
			ch.add("%016x (full_key %016x), called by nodes %s", c.Hash, c.FullKey, joinInts(intsOf(at)))
		}
	}
	ext := root.add("external dependency slots: %d", len(d.ExtDeps))
	for j, ns := range d.ExtDeps {
		if len(ns) == 0 {
			ext.add("slot %d: no node waits on it", j)
		} else {
			ext.add("slot %d: waited on by nodes %s", j, joinInts(ns))
		}
	}
	roots := root.add("internal roots: %d", len(d.Roots))
	for i := range d.Roots {
		r := &d.Roots[i]
		line := fmt.Sprintf("root %d: %s x %d, made by node %d, at heap offset %d", i, r.DType, r.Elems, r.Creator, r.HeapOffset)
		if r.ManualDep {
			line += ", manual_dep"
		}
		roots.add("%s", line)
	}
	fanout := make([][]uint32, len(d.Nodes))
	for c := range d.Nodes {
		s := d.Nodes[c].Fanin
		for _, p := range d.Fanin[s.Off : s.Off+s.N] {
			fanout[p] = append(fanout[p], uint32(c))
		}
	}
	nodes := root.add("nodes: %d", len(d.Nodes))
	for i := range d.Nodes {
		nd := &d.Nodes[i]
		var n *dnode
		if nd.Kind == KindGraph {
			h, fk := ChildOf(nd)
			n = nodes.add("node %d: graph, child Definition %016x (full_key %016x)", i, h, fk)
		} else {
			n = nodes.add("node %d: %s%s%s", i, nd.Kind, kernelString(nd.Kernel, nd.BlockNum), launchString(nd.Launch))
		}
		s := nd.Fanin
		n.add("fanin %s; fanout %s", joinInts(d.Fanin[s.Off:s.Off+s.N]), joinInts(fanout[i]))
		if nd.Tensors.N > 0 {
			ts := n.add("tensors [%d, +%d)", nd.Tensors.Off, nd.Tensors.N)
			for k := nd.Tensors.Off; k < nd.Tensors.Off+nd.Tensors.N; k++ {
				ts.add("t%d: %s", k, tensorRefString(&d.Tensors[k]))
			}
		}
		if nd.Scalars.N > 0 {
			var vs []string
			for k := nd.Scalars.Off; k < nd.Scalars.Off+nd.Scalars.N; k++ {
				if sc := &d.Scalars[k]; sc.Boundary {
					vs = append(vs, fmt.Sprintf("boundary scalar %d", sc.Slot))
				} else {
					vs = append(vs, fmt.Sprint(sc.Value))
				}
			}
			n.add("scalars [%d, +%d): %s", nd.Scalars.Off, nd.Scalars.N, strings.Join(vs, ", "))
		}
		if nd.Pred > 0 {
			p := &d.Preds[nd.Pred-1]
			n.add("predicate: element %d %s %d, of %s", p.Index, predOpNames[p.Op], p.Target, tensorRefString(&p.Tensor))
		}
	}
	return root, err
}

func describeRun(b []byte) (*dnode, error) {
	le := binary.LittleEndian
	root, h, full := runKind.header(b)
	if !full {
		return root, runKind.headerError(b)
	}
	u32 := func(at int) uint32 { return le.Uint32(b[at:]) }
	h.add("heap_bytes %d", int64(le.Uint64(b[imagefmt.RunHeapAt:])))
	h.add("counts: %d tasks, %d args, %d scalars, %d fanin entries, %d roots, %d graph submissions",
		u32(imagefmt.RunTasksAt), u32(imagefmt.RunArgsAt), u32(imagefmt.RunScalarsAt), u32(imagefmt.RunFaninAt), u32(imagefmt.RunRootsAt), u32(imagefmt.RunGraphsAt))
	sections(h, b, imagefmt.RunSectionsAt, imagefmt.RunSectionNames[:])
	var img *RunImage
	err := runKind.decode(b, func(b []byte) (err error) {
		img, err = decodeRunImage(b)
		return err
	})
	if img == nil {
		return root, err
	}
	roots := root.add("roots the run creates: %d", len(img.Roots))
	for i := range img.Roots {
		r := &img.Roots[i]
		line := fmt.Sprintf("root %d: %s x %d, made by task %d, at %#x", r.ID, r.DType, r.Elems, r.Creator, r.Addr)
		if r.Creator == NoTask {
			line = fmt.Sprintf("root %d: %s x %d, made by no task, at %#x", r.ID, r.DType, r.Elems, r.Addr)
		}
		if r.ManualDep {
			line += ", manual_dep"
		}
		roots.add("%s", line)
	}
	tasks := root.add("tasks: %d", len(img.Tasks))
	compact := 0
	for i := range img.Tasks {
		t := &img.Tasks[i]
		var n *dnode
		if t.Kind == KindGraph {
			n = tasks.add("task %d: graph, replays graph submission %d", i, t.Graph)
		} else {
			n = tasks.add("task %d: %s%s%s", i, t.Kind, kernelString(t.Kernel, t.BlockNum), launchString(t.Launch))
		}
		if t.Fanin.N > 0 {
			n.add("fanin %s", joinInts(img.Fanin[t.Fanin.Off:t.Fanin.Off+t.Fanin.N]))
		}
		if t.Args.N > 0 {
			as := n.add("args [%d, +%d)", t.Args.Off, t.Args.N)
			for k := t.Args.Off; k < t.Args.Off+t.Args.N; k++ {
				a := &img.Args[k]
				if a.View.DType == DTypeInvalid {
					compact++
					as.add("a%d: %s root %d +%d (sent as root and offset: the layout is the Definition's)", k, tagName(a.Tag), a.View.Root, a.View.Offset)
				} else {
					as.add("a%d: %s %s", k, tagName(a.Tag), viewString(&a.View))
				}
			}
		}
		if t.Scalars.N > 0 {
			n.add("scalars [%d, +%d): %s", t.Scalars.Off, t.Scalars.N, joinInts(img.Scalars[t.Scalars.Off:t.Scalars.Off+t.Scalars.N]))
		}
		if p := &t.Pred; p.Valid {
			n.add("predicate: element %d %s %d, of %s", p.Index, predOpNames[p.Op], p.Target, viewString(&p.View))
		}
	}
	gs := root.add("graph submissions: %d", len(img.Graphs))
	for i := range img.Graphs {
		g := &img.Graphs[i]
		n := gs.add("graph %d: task %d replays full_key %#016x, the Definition whose content hash is %#016x", i, g.Task, g.FullKey, g.DefHash)
		n.add("boundary: args [%d, +%d)", g.Boundary.Off, g.Boundary.N)
		n.add("boundary scalars [%d, +%d): %s", g.Scalars.Off, g.Scalars.N, joinInts(img.Scalars[g.Scalars.Off:g.Scalars.Off+g.Scalars.N]))
		n.add("heap_base %#x", g.HeapBase)
	}
	pools := root.add("pools")
	pools.add("args: %d (%d of them Graph boundary slots sent as root and offset)", len(img.Args), compact)
	pools.add("scalars: %d", len(img.Scalars))
	pools.add("fanin: %d", len(img.Fanin))
	return root, err
}

// headerError is why a header that is not this version's (or is cut short)
// cannot be read further: the decoder's own error.
func (k imageKind) headerError(b []byte) error {
	return imagefmt.CheckHeader(b, string(b[:4]), k.version, k.hsize, k.totalAt, k.hashO, k.what)
}

var predOpNames = [...]string{">", ">=", "==", "!=", "<", "<="}

var tagLongNames = [...]string{"?", "input", "output", "output_existing", "inout", "no_dep"}

func tagName(t Tag) string {
	if int(t) < len(tagLongNames) {
		return tagLongNames[t]
	}
	return fmt.Sprintf("tag(%d)", t)
}

// kernelString is ", kernels aic=7 aiv0=9, block_num 4", leaving out absent kernels
// and an unset block_num.
func kernelString(k [3]KernelID, blockNum int32) string {
	var parts []string
	for i, name := range [3]string{"aic", "aiv0", "aiv1"} {
		if k[i] >= 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", name, k[i]))
		}
	}
	s := ""
	if len(parts) > 0 {
		s = ", kernels " + strings.Join(parts, " ")
	}
	if blockNum >= 0 {
		s += fmt.Sprintf(", block_num %d", blockNum)
	}
	return s
}

// describeLayout is "bf16[16 64]", with the strides when they are not the
// contiguous ones.
func describeLayout(v *View) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s%v", v.DType, v.Shape[:v.NDims])
	if !contiguous(v) {
		fmt.Fprintf(&sb, " strides %v", v.Strides[:v.NDims])
	}
	return sb.String()
}

func viewString(v *View) string {
	return fmt.Sprintf("root %d +%d %s", v.Root, v.Offset, describeLayout(v))
}

func tensorRefString(t *TensorRef) string {
	var src string
	switch t.Src {
	case SrcBoundaryExact:
		src = fmt.Sprintf("boundary slot %d (the call's tensor)", t.Slot)
	case SrcBoundaryView:
		src = fmt.Sprintf("boundary slot %d's root, +%d past its view", t.Slot, t.Delta)
	case SrcInternal:
		src = fmt.Sprintf("internal root %d +%d", t.Slot, t.Delta)
	case SrcOwnOutput:
		src = fmt.Sprintf("internal root %d +%d, made by this node", t.Slot, t.Delta)
	}
	return fmt.Sprintf("%s %s, %s", tagName(t.Tag), describeLayout(&t.Layout), src)
}

func joinInts[T ~uint32 | ~int32 | ~uint64](xs []T) string {
	if len(xs) == 0 {
		return "none"
	}
	var sb strings.Builder
	for i, x := range xs {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprint(&sb, x)
	}
	return sb.String()
}

// dnode is one line of a described image and the lines under it.
type dnode struct {
	line string
	kids []*dnode
}

func (n *dnode) add(format string, args ...any) *dnode {
	k := &dnode{line: fmt.Sprintf(format, args...)}
	n.kids = append(n.kids, k)
	return k
}

// write draws the tree: each child under its parent, "├─ " before all but
// the last, "└─ " before the last, the parent's rule continued below it.
func (n *dnode) write(w io.Writer) error {
	var sb strings.Builder
	sb.WriteString(n.line)
	sb.WriteByte('\n')
	var walk func(n *dnode, prefix string)
	walk = func(n *dnode, prefix string) {
		for i, k := range n.kids {
			last := i == len(n.kids)-1
			branch, cont := "├─ ", "│  "
			if last {
				branch, cont = "└─ ", "   "
			}
			sb.WriteString(prefix + branch + k.line + "\n")
			walk(k, prefix+cont)
		}
	}
	walk(n, "")
	_, err := io.WriteString(w, sb.String())
	return err
}

// launchString is a task's launch flags for a description: "" without any.
func launchString(l Launch) string {
	if l == 0 {
		return ""
	}
	return ", " + l.String()
}

func intsOf(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}
