package analyze

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// Map is the structural map of one step: every block with occurrences,
// its classes, and why classes differ.
type Map struct {
	Step   *Step
	Blocks []*BlockMap
}

// BlockMap is one block's occurrences, grouped into classes that can share
// one Definition.
type BlockMap struct {
	Info  config.BlockInfo
	Calls []*Call
	// Sites is the distinct lines that call it.
	Sites   []int
	Classes []*Class
	// Construction is the params (and "variant") a Graph of the block must
	// hash into its key: the fewest that tell its classes apart, and those
	// the static checks find its structure depends on (Structural).
	Construction []string
	// Separating is the part of Construction the recordings need (the rest
	// is the static checks').
	Separating []string
	// Inseparable says why no param tells two classes apart (then the
	// block cannot be a Graph); RecordErr why a call's body cannot be
	// recorded at all.
	Inseparable string
	RecordErr   string
	// Diffs is, for each class after the first, what differs from the
	// first class, position by position.
	Diffs [][]Diff
	// NameOnly and DirectionOnly count the positions, over the block's
	// classes, whose kernels differ only in name (the same code) or whose
	// arguments differ only in declared direction (inout against
	// out_existing): interchangeable, as the seed found at layer 42.
	NameOnly, DirectionOnly int
	// Contains is the blocks its occurrences call; Within the blocks whose
	// occurrences call it. A proposal never makes a block and one it
	// contains both Graphs.
	Contains, Within []string
	// Definitions is the Definitions a Graph of the block would record
	// under Construction: one per distinct key value among its calls.
	Definitions [][]*Call
}

// Shareable: every occurrence can replay one Definition.
func (b *BlockMap) Shareable() bool {
	return b.RecordErr == "" && len(b.Classes) == 1
}

// Class is occurrences that can share one Definition.
type Class struct {
	Calls   []*Call
	Nodes   int
	Width   int // boundary tensors
	Scalars int // boundary scalars
	// Patched is what varies among the class's occurrences: boundary slots
	// and scalars a replay patches.
	Patched []Patched
	// Uses is the params the patched slots' views read (DSv4's CSA
	// attention: layer and csa_i, the two counters that index its weights).
	Uses []string
}

// Patched is one boundary value that varies among a class's occurrences.
type Patched struct {
	Slot   string
	Scalar bool
	// Roots is the distinct roots the slot views, when more than one: the
	// occurrence writes or reads another tensor (DSv4's layer 42 MoE writes
	// pre_hc_hidden_out where the loop's writes hidden), with the calls
	// that view each.
	Roots  []string
	RootAt [][]int
	// Offsets is the number of distinct offsets (or scalar values).
	Values int
	Uses   []string
}

// Diff is one position at which two classes' recordings differ.
type Diff struct {
	Node int // -1: the Definition as a whole (its boundary, its size)
	What string
	A, B string
}

func (d Diff) String() string {
	at := "boundary"
	if d.Node >= 0 {
		at = fmt.Sprintf("node %d", d.Node)
	}
	if d.A == "" && d.B == "" {
		return at + ": " + d.What
	}
	return fmt.Sprintf("%s: %s %s vs %s", at, d.What, d.A, d.B)
}

// Build groups each block's occurrences of st into classes.
func Build(st *Step) *Map {
	m := &Map{Step: st}
	for _, info := range st.Blocks {
		bm := &BlockMap{Info: info}
		for _, c := range st.Calls {
			if c.Block == info.Name {
				bm.Calls = append(bm.Calls, c)
				if !slices.Contains(bm.Sites, c.Line) {
					bm.Sites = append(bm.Sites, c.Line)
				}
			}
		}
		if len(bm.Calls) == 0 {
			continue
		}
		slices.Sort(bm.Sites)
		m.Blocks = append(m.Blocks, bm)
		bm.classify(st)
	}
	for _, bm := range m.Blocks {
		for _, c := range bm.Calls {
			for p := c.Parent; p >= 0; p = st.Calls[p].Parent {
				outer := st.Calls[p].Block
				if !slices.Contains(bm.Within, outer) {
					bm.Within = append(bm.Within, outer)
				}
				if ob := m.block(outer); ob != nil && !slices.Contains(ob.Contains, bm.Info.Name) {
					ob.Contains = append(ob.Contains, bm.Info.Name)
				}
			}
		}
	}
	return m
}

func (m *Map) block(name string) *BlockMap {
	for _, b := range m.Blocks {
		if b.Info.Name == name {
			return b
		}
	}
	return nil
}

func (bm *BlockMap) classify(st *Step) {
	for _, c := range bm.Calls {
		if c.Def == nil {
			bm.RecordErr = c.RecordErr
			return
		}
	}
	for _, c := range bm.Calls {
		placed := false
		for _, k := range bm.Classes {
			d := diffCalls(st, k.Calls[0], c, 1)
			if len(d.diffs) == 0 {
				k.Calls = append(k.Calls, c)
				placed = true
				break
			}
		}
		if !placed {
			bm.Classes = append(bm.Classes, &Class{Calls: []*Call{c}, Nodes: len(c.Def.Nodes), Width: len(c.Boundary), Scalars: len(c.Scalars)})
		}
	}
	for _, k := range bm.Classes {
		for _, c := range k.Calls[1:] {
			d := diffCalls(st, k.Calls[0], c, 0)
			bm.NameOnly = max(bm.NameOnly, d.nameOnly)
			bm.DirectionOnly = max(bm.DirectionOnly, d.dirOnly)
		}
		k.patched(st, bm.Info)
	}
	for _, k := range bm.Classes[1:] {
		bm.Diffs = append(bm.Diffs, diffCalls(st, bm.Classes[0].Calls[0], k.Calls[0], maxDiffs).diffs)
	}
	bm.construction(st)
}

// maxDiffs bounds the differences named per pair of classes.
const maxDiffs = 8

// keyNames is a block's candidate construction values: its params, then
// its variant.
func keyNames(info config.BlockInfo) []string {
	out := slices.Clone(info.Params)
	if len(info.Variants) > 0 {
		out = append(out, "variant")
	}
	return out
}

// keyValue is call c's value of construction value i of keyNames.
func keyValue(info config.BlockInfo, c *Call, i int) string {
	if i < len(info.Params) {
		return fmt.Sprint(c.Params[i])
	}
	return c.Variant
}

// construction finds the fewest construction values that tell the classes
// apart (smallest subsets first), adds the static checks' structural ones,
// and splits the calls into the Definitions that key makes.
func (bm *BlockMap) construction(st *Step) {
	names := keyNames(bm.Info)
	classOf := map[*Call]int{}
	for i, k := range bm.Classes {
		for _, c := range k.Calls {
			classOf[c] = i
		}
	}
	separates := func(set []int) bool {
		seen := map[string]int{}
		for _, c := range bm.Calls {
			var b strings.Builder
			for _, i := range set {
				b.WriteString(keyValue(bm.Info, c, i) + "\x00")
			}
			if k, ok := seen[b.String()]; ok && k != classOf[c] {
				return false
			}
			seen[b.String()] = classOf[c]
		}
		return true
	}
	// The structural values go into the key anyway: when they tell the
	// classes apart, the fewest of them do; else the fewest of all.
	var structural []int
	for i, n := range names {
		if slices.Contains(bm.Info.Structural, n) {
			structural = append(structural, i)
		}
	}
	var best []int
	found := len(bm.Classes) <= 1
	for _, pool := range [][]int{structural, nil} {
		if pool == nil {
			pool = make([]int, len(names))
			for i := range pool {
				pool[i] = i
			}
		}
		for size := 1; !found && size <= len(pool); size++ {
			forSubsets(len(pool), size, func(set []int) bool {
				cand := make([]int, len(set))
				for j, x := range set {
					cand[j] = pool[x]
				}
				if separates(cand) {
					best, found = cand, true
				}
				return found
			})
		}
	}
	if !found {
		bm.Inseparable = fmt.Sprintf("no param of %s tells its %d classes apart: calls with equal params record different bodies", bm.Info.Name, len(bm.Classes))
		return
	}
	var set []int
	for _, i := range best {
		bm.Separating = append(bm.Separating, names[i])
		set = append(set, i)
	}
	for i, n := range names {
		if slices.Contains(bm.Info.Structural, n) && !slices.Contains(set, i) {
			set = append(set, i)
		}
	}
	slices.Sort(set)
	for _, i := range set {
		bm.Construction = append(bm.Construction, names[i])
	}
	defs := map[string]int{}
	for _, c := range bm.Calls {
		var b strings.Builder
		for _, i := range set {
			b.WriteString(keyValue(bm.Info, c, i) + "\x00")
		}
		d, ok := defs[b.String()]
		if !ok {
			d = len(bm.Definitions)
			defs[b.String()] = d
			bm.Definitions = append(bm.Definitions, nil)
		}
		bm.Definitions[d] = append(bm.Definitions[d], c)
	}
}

// forSubsets calls f with every size-element subset of [0, n), in order,
// until f returns true.
func forSubsets(n, size int, f func([]int) bool) {
	set := make([]int, size)
	var rec func(i, from int) bool
	rec = func(i, from int) bool {
		if i == size {
			return f(set)
		}
		for x := from; x < n; x++ {
			set[i] = x
			if rec(i+1, x+1) {
				return true
			}
		}
		return false
	}
	rec(0, 0)
}

func (k *Class) patched(st *Step, info config.BlockInfo) {
	first := k.Calls[0]
	for s := range first.Boundary {
		var roots []string
		var at [][]int
		offs := map[int64]bool{}
		for _, c := range k.Calls {
			v := c.Boundary[s].View
			name := st.rootName(v.Root)
			i := slices.Index(roots, name)
			if i < 0 {
				roots = append(roots, name)
				at = append(at, nil)
				i = len(roots) - 1
			}
			at[i] = append(at[i], c.Index)
			offs[v.Offset] = true
		}
		if len(roots) == 1 && len(offs) == 1 {
			continue
		}
		p := Patched{Slot: slotName(info, s, roots[0]), Values: len(offs)}
		if len(roots) > 1 {
			p.Roots, p.RootAt = roots, at
		}
		if s < len(info.Slots) {
			p.Uses = info.Slots[s].Uses
		}
		for _, u := range p.Uses {
			if !slices.Contains(k.Uses, u) {
				k.Uses = append(k.Uses, u)
			}
		}
		k.Patched = append(k.Patched, p)
	}
	for i := range first.Scalars {
		vals := map[uint64]bool{}
		for _, c := range k.Calls {
			vals[c.Scalars[i]] = true
		}
		if len(vals) > 1 {
			name := fmt.Sprintf("scalar %d", i)
			if i < len(info.Scalars) {
				name = info.Scalars[i]
			}
			k.Patched = append(k.Patched, Patched{Slot: name, Scalar: true, Values: len(vals)})
		}
	}
}

func slotName(info config.BlockInfo, s int, root string) string {
	if s < len(info.Slots) {
		return info.Slots[s].Name
	}
	return fmt.Sprintf("slot %d (%s)", s, root)
}

func (st *Step) rootName(r stages.RootID) string {
	if int(r) < len(st.RootNames) && r >= 0 {
		return st.RootNames[r]
	}
	return fmt.Sprintf("root %d", r)
}

func (st *Step) kernelName(k stages.KernelID) string {
	if k < 0 || int(k) >= len(st.Kernels) {
		return "-"
	}
	return st.Kernels[k].Name
}

// kernelIdentity is what makes two kernels interchangeable: their code (the
// literals a code folds are compared with the scalars, as the device hashes
// them: Step.scalars).
func (st *Step) kernelIdentity(k stages.KernelID) string {
	if k < 0 || int(k) >= len(st.Kernels) {
		return ""
	}
	return st.Kernels[k].Code
}

// mainKernel is a node's first kernel (a MIX task's AIC half).
func mainKernel(n *stages.NodeDesc) stages.KernelID {
	for _, k := range n.Kernel {
		if k >= 0 {
			return k
		}
	}
	return -1
}

type diffResult struct {
	diffs             []Diff
	nameOnly, dirOnly int
}

// diffCalls compares two calls' recordings position by position: the
// operation sequence, each node's kernels by code identity, each argument's
// tag, source and layout, each scalar (baked value or boundary slot), the
// node's fanin and predicate, and the boundary signature. It stops after
// limit differences (0: no limit) but counts the interchangeable ones.
func diffCalls(st *Step, x, y *Call, limit int) diffResult {
	var r diffResult
	add := func(d Diff) bool {
		r.diffs = append(r.diffs, d)
		return limit > 0 && len(r.diffs) >= limit
	}
	a, b := x.Def, y.Def
	if len(a.Nodes) != len(b.Nodes) {
		d := Diff{Node: -1, What: "operation sequence:", A: fmt.Sprintf("%d nodes", len(a.Nodes)), B: fmt.Sprintf("%d nodes", len(b.Nodes))}
		for i := range min(len(a.Nodes), len(b.Nodes)) {
			if nodeName(st, a, i) != nodeName(st, b, i) {
				d.What = fmt.Sprintf("operation sequence (first differs at node %d: %s vs %s):", i, nodeName(st, a, i), nodeName(st, b, i))
				break
			}
		}
		add(d)
		return r
	}
	if len(a.Boundary) != len(b.Boundary) || a.BoundaryScalars != b.BoundaryScalars || len(a.ExtDeps) != len(b.ExtDeps) {
		if add(Diff{Node: -1, What: "boundary width:", A: fmt.Sprintf("%d tensors, %d scalars, %d external deps", len(a.Boundary), a.BoundaryScalars, len(a.ExtDeps)),
			B: fmt.Sprintf("%d tensors, %d scalars, %d external deps", len(b.Boundary), b.BoundaryScalars, len(b.ExtDeps))}) {
			return r
		}
	} else {
		info := st.blockInfo(x.Block)
		for s := range a.Boundary {
			sa, sb := a.Boundary[s], b.Boundary[s]
			if sa != sb {
				name := slotName(info, s, st.rootName(x.Boundary[s].View.Root))
				if add(Diff{Node: -1, What: "slot " + name + ":", A: slotText(sa), B: slotText(sb)}) {
					return r
				}
			}
		}
		for j := range a.ExtDeps {
			if !slices.Equal(a.ExtDeps[j], b.ExtDeps[j]) {
				if add(Diff{Node: -1, What: fmt.Sprintf("external dependency %d waited on by", j), A: fmt.Sprint(a.ExtDeps[j]), B: fmt.Sprint(b.ExtDeps[j])}) {
					return r
				}
			}
		}
	}
	for i := range a.Nodes {
		na, nb := &a.Nodes[i], &b.Nodes[i]
		if na.Kind != nb.Kind {
			if add(Diff{Node: i, What: "kind", A: na.Kind.String(), B: nb.Kind.String()}) {
				return r
			}
			continue
		}
		for h := range na.Kernel {
			ka, kb := na.Kernel[h], nb.Kernel[h]
			if ka == kb {
				continue
			}
			if st.kernelIdentity(ka) == st.kernelIdentity(kb) {
				r.nameOnly++
				continue
			}
			if add(Diff{Node: i, What: "kernel code", A: st.kernelName(ka), B: st.kernelName(kb)}) {
				return r
			}
		}
		if na.BlockNum != nb.BlockNum {
			if add(Diff{Node: i, What: nodeName(st, a, i) + " block_num", A: fmt.Sprint(na.BlockNum), B: fmt.Sprint(nb.BlockNum)}) {
				return r
			}
		}
		ta, tb := a.Tensors[na.Tensors.Off:na.Tensors.Off+na.Tensors.N], b.Tensors[nb.Tensors.Off:nb.Tensors.Off+nb.Tensors.N]
		if len(ta) != len(tb) {
			if add(Diff{Node: i, What: nodeName(st, a, i) + " arguments", A: fmt.Sprint(len(ta)), B: fmt.Sprint(len(tb))}) {
				return r
			}
		} else {
			for j := range ta {
				u, v := ta[j], tb[j]
				if u.Tag != v.Tag {
					if direction(u.Tag) && direction(v.Tag) {
						r.dirOnly++
					} else if add(Diff{Node: i, What: fmt.Sprintf("%s arg %d tag", nodeName(st, a, i), j), A: u.Tag.String(), B: v.Tag.String()}) {
						return r
					}
				}
				if u.Src != v.Src || u.Slot != v.Slot || u.Delta != v.Delta {
					if add(Diff{Node: i, What: fmt.Sprintf("%s arg %d source", nodeName(st, a, i), j), A: srcText(st, x, u), B: srcText(st, y, v)}) {
						return r
					}
				}
				if !sameLayout(u.Layout, v.Layout) {
					if add(Diff{Node: i, What: fmt.Sprintf("%s arg %d layout", nodeName(st, a, i), j), A: layoutText(u.Layout), B: layoutText(v.Layout)}) {
						return r
					}
				}
			}
		}
		sa, sb := st.scalars(a, i), st.scalars(b, i)
		if len(sa) != len(sb) {
			if add(Diff{Node: i, What: nodeName(st, a, i) + " scalar count", A: fmt.Sprint(len(sa)), B: fmt.Sprint(len(sb))}) {
				return r
			}
		} else {
			for j := range sa {
				if u, v := sa[j], sb[j]; u.boundary != v.boundary || u.slot != v.slot || u.value != v.value {
					if add(Diff{Node: i, What: fmt.Sprintf("%s scalar %d", nodeName(st, a, i), j), A: scalarText(sa[j]), B: scalarText(sb[j])}) {
						return r
					}
				}
			}
		}
		if !slices.Equal(a.Fanin[na.Fanin.Off:na.Fanin.Off+na.Fanin.N], b.Fanin[nb.Fanin.Off:nb.Fanin.Off+nb.Fanin.N]) {
			if add(Diff{Node: i, What: nodeName(st, a, i) + " waits on nodes", A: fmt.Sprint(a.Fanin[na.Fanin.Off : na.Fanin.Off+na.Fanin.N]), B: fmt.Sprint(b.Fanin[nb.Fanin.Off : nb.Fanin.Off+nb.Fanin.N])}) {
				return r
			}
		}
		if (na.Pred > 0) != (nb.Pred > 0) || na.Pred > 0 && !samePred(a.Preds[na.Pred-1], b.Preds[nb.Pred-1]) {
			if add(Diff{Node: i, What: nodeName(st, a, i) + " predicate differs"}) {
				return r
			}
		}
	}
	if len(a.Roots) != len(b.Roots) {
		add(Diff{Node: -1, What: "internal roots:", A: fmt.Sprint(len(a.Roots)), B: fmt.Sprint(len(b.Roots))})
	} else {
		for j := range a.Roots {
			ra, rb := a.Roots[j], b.Roots[j]
			if ra.DType != rb.DType || ra.Elems != rb.Elems || ra.ManualDep != rb.ManualDep || ra.Creator != rb.Creator {
				if add(Diff{Node: -1, What: fmt.Sprintf("internal root %d:", j), A: fmt.Sprintf("%s[%d]", ra.DType, ra.Elems), B: fmt.Sprintf("%s[%d]", rb.DType, rb.Elems)}) {
					return r
				}
			}
		}
	}
	return r
}

// direction: a write into an existing tensor, declared either way (the
// loop pre-allocates and says inout, a peeled layer says out_existing).
func direction(t stages.Tag) bool {
	return t == stages.TagInOut || t == stages.TagOutputExisting
}

func (st *Step) blockInfo(name string) config.BlockInfo {
	for _, b := range st.Blocks {
		if b.Name == name {
			return b
		}
	}
	return config.BlockInfo{Name: name}
}

func nodeName(st *Step, d *stages.Definition, i int) string {
	n := &d.Nodes[i]
	switch n.Kind {
	case stages.KindAlloc:
		return "alloc"
	case stages.KindDummy:
		return "dummy"
	}
	return st.kernelName(mainKernel(n))
}

type scalarPos struct {
	boundary bool
	slot     int32
	value    uint64
	folded   bool
}

// scalars is node i's scalars as its code sees them: the literals its
// kernel folds, then the recorded ones.
func (st *Step) scalars(d *stages.Definition, i int) []scalarPos {
	n := &d.Nodes[i]
	var out []scalarPos
	if k := mainKernel(n); k >= 0 && int(k) < len(st.Kernels) {
		for _, v := range st.Kernels[k].Folded {
			out = append(out, scalarPos{value: v, folded: true})
		}
	}
	for _, s := range d.Scalars[n.Scalars.Off : n.Scalars.Off+n.Scalars.N] {
		p := scalarPos{boundary: s.Boundary, value: s.Value}
		if s.Boundary {
			p.slot, p.value = s.Slot, 0
		}
		out = append(out, p)
	}
	return out
}

func scalarText(p scalarPos) string {
	if p.boundary {
		return fmt.Sprintf("boundary scalar %d", p.slot)
	}
	if p.folded {
		return fmt.Sprintf("%d (folded into the code)", p.value)
	}
	return fmt.Sprintf("%d (baked)", p.value)
}

func srcText(st *Step, c *Call, t stages.TensorRef) string {
	switch t.Src {
	case stages.SrcInternal, stages.SrcOwnOutput:
		return fmt.Sprintf("internal root %d +%d", t.Slot, t.Delta)
	}
	info := st.blockInfo(c.Block)
	name := slotName(info, int(t.Slot), st.rootName(c.Boundary[t.Slot].View.Root))
	if t.Src == stages.SrcBoundaryExact {
		return "boundary " + name
	}
	return fmt.Sprintf("boundary %s %+d", name, t.Delta)
}

func sameLayout(a, b stages.View) bool {
	return a.DType == b.DType && a.NDims == b.NDims && a.Shape == b.Shape && a.Strides == b.Strides
}

func layoutText(v stages.View) string {
	return fmt.Sprintf("%s%v", v.DType, v.ShapeSlice())
}

func slotText(s stages.BoundarySlot) string {
	return fmt.Sprintf("%s %s (root of %d elements, alias of %d)", s.Tag, layoutText(s.Layout), s.RootElems, s.AliasRep)
}

func samePred(a, b stages.PredRef) bool {
	return a.Valid == b.Valid && a.Op == b.Op && a.Index == b.Index && a.Target == b.Target &&
		a.Tensor.Tag == b.Tensor.Tag && a.Tensor.Src == b.Tensor.Src && a.Tensor.Slot == b.Tensor.Slot &&
		a.Tensor.Delta == b.Tensor.Delta && sameLayout(a.Tensor.Layout, b.Tensor.Layout)
}
