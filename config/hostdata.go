package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// Host data: upstream's set_tensor_data and get_tensor_data of any tensor,
// in order with the tasks. Before each access the host waits as upstream's
// wait_for_tensor_ready does (stages.HostWaiter): a read for the tensor's
// creator and writers, a write for them and their consumers; every task
// submitted after it waits on that wait. The values are the host's: what
// it wrote, an alloc's initial value, an entry tensor's data. A kernel's
// write to a tensor makes its values unknown to the host (the simulated
// device computes digests, not values), and a read of one is an error at
// its line.

// TensorWriter is implemented by a Submitter that wants to see the host's
// writes of device data (the trace's set_tensor_data events).
type TensorWriter interface {
	WriteTensor(root stages.RootID, idx []int64, value int64)
}

// hostVals are the values the host knows of one root: fill for every
// element not in vals, where hasFill.
type hostVals struct {
	fill    int64
	hasFill bool
	vals    map[int64]int64
}

// hostTarget compiles the TENSOR[i, ...] of a host read or write: a tensor
// of the block (an alloc, a kernel's output, a let, an entry tensor) and
// one index per dim.
func (sc *scope) hostTarget(nd *yaml.Node, key, src string, t token, p *exprParser) (*viewExpr, []*expr, error) {
	l := sc.l
	if t.kind != tIdent {
		return nil, nil, l.errf(nd, key, src, "want \"TENSOR[i, ...]\"")
	}
	k, idx, ok := sc.tensor(t.s)
	if !ok {
		return nil, nil, l.errf(nd, key, src, "unknown tensor %q (want %s)", t.s, sc.tensorNames())
	}
	v := &viewExpr{kind: k, base: idx, line: nd.Line, src: t.s, local: k == baseSlot && sc.slotLocal(idx)}
	ix, err := sc.exprList(p)
	if err != nil {
		return nil, nil, l.errf(nd, key, src, "%v", err)
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, nil, l.errf(nd, key, src, "unexpected %q after the element", t.s)
	}
	for _, x := range ix {
		setSrc(x, src)
		sc.use(x.deps, nd.Line, key, src)
	}
	return v, ix, nil
}

// hostRead compiles a read of a tensor that is not an entry tensor with
// data.
func (sc *scope) hostRead(it *readItem, nd *yaml.Node, t token, p *exprParser) error {
	v, ix, err := sc.hostTarget(nd, "read."+it.name, it.src, t, p)
	if err != nil {
		return err
	}
	it.view, it.indices = v, ix
	return nil
}

// writeOp compiles a write op, {"TENSOR[i, ...]": VALUE, ...}: upstream's
// set_tensor_data(TENSOR, ndims, idx, VALUE), in order.
func (sc *scope) writeOp(o *op, wn *yaml.Node) error {
	l := sc.l
	o.kind = opWrite
	kvs, err := l.entries(wn, "write", "want a mapping of \"TENSOR[i, ...]\" to a value")
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		src := kv.key.Value
		p, err := sc.parser(kv.key, "write", src)
		if err != nil {
			return err
		}
		v, ix, err := sc.hostTarget(kv.key, "write", src, p.next(), p)
		if err != nil {
			return err
		}
		if kv.value.Kind != yaml.ScalarNode {
			return l.errf(kv.value, "write."+src, nodeText(kv.value), "want an integer expression")
		}
		e, err := sc.expr(kv.value.Value)
		if err != nil {
			return l.errf(kv.value, "write."+src, kv.value.Value, "bad expression: %v", err)
		}
		sc.use(e.deps, kv.value.Line, "write."+src, kv.value.Value)
		entry := v.kind == baseSlot && v.base < len(l.m.entry) && v.base < sc.b.fixedSlots && l.m.entry[v.base].data != nil && sc.b.isProgram
		o.writes = append(o.writes, writeItem{view: v, indices: ix, value: e, src: src, entry: entry})
	}
	return nil
}

// checkValueOnly refuses a count that reads a name a host read of a
// tensor the host writes binds: the sizer bounds the pass before it runs,
// when only the run knows that value. A value (a scalar, an offset, a
// write) may read it.
func (l *loader) checkValueOnly(b *block) error {
	for _, vo := range b.valueOnly {
		if line := countReads(b.body, vo.slot); line > 0 {
			return &Error{File: l.file, Line: line, Key: "read." + vo.name, Value: vo.name,
				Msg: fmt.Sprintf("read (line %d) from", vo.line) + " a tensor whose value the host knows only as the run goes: it may set a value, not a count (a loop bound, an if, a task list's size, a call's param), which the pass is bounded by before it runs"}
		}
	}
	return nil
}

// countReads is the line of the first op whose count reads env slot, or
// 0. A local computed from it is a value too: its uses read the slot
// (scope.slotDeps), and are checked where they count.
func countReads(ops []*op, slot int) int {
	for _, o := range ops {
		if o.kind != opLocal && o.readsSlot(slot, roleCount) {
			return o.line
		}
		if line := countReads(o.body, slot); line > 0 {
			return line
		}
	}
	return 0
}

// element evaluates a host access's tensor and indices: the view, the
// element's offset in its root, and the indices.
func (r *runner) element(fr *frame, v *viewExpr, ix []*expr, line int, key, src string) (stages.View, int64, []int64, bool) {
	var tv stages.View
	if !r.view(fr, v, &tv) {
		return tv, 0, nil, false
	}
	if len(ix) != int(tv.NDims) {
		r.failAt(line, key, src, "%d indices for %s of rank %d (want one per dim)", len(ix), v.src, tv.NDims)
		return tv, 0, nil, false
	}
	idx := make([]int64, len(ix))
	off := tv.Offset
	for d, x := range ix {
		idx[d] = r.eval(x, fr, line)
		if r.err != nil {
			return tv, 0, nil, false
		}
		if idx[d] < 0 || idx[d] >= tv.Shape[d] {
			r.failAt(line, key, src, "index %d is %d, outside [0, %d) of %s %v", d, idx[d], tv.Shape[d], v.src, tv.ShapeSlice())
			return tv, 0, nil, false
		}
		off += idx[d] * tv.Strides[d]
	}
	return tv, off, idx, true
}

// hostWait waits, as the host does before touching v (stages.HostWaiter).
func (r *runner) hostWait(o *sub, v stages.View, consumers bool) {
	if o.waiter != nil {
		o.waiter.HostWait(v, consumers)
	}
}

// hostReadView runs a read of a tensor that is not an entry tensor with
// data: the host waits for its writers, then reads what it knows.
func (r *runner) hostReadView(o *sub, fr *frame, op *op, it *readItem) {
	key := "read." + it.name
	tv, off, idx, ok := r.element(fr, it.view, it.indices, op.line, key, it.src)
	if !ok {
		return
	}
	r.hostWait(o, tv, false)
	v, known := r.hostValue(tv.Root, off)
	if !known {
		r.failAt(op.line, key, it.src, "element %v of %s: the host knows no value there (a kernel wrote it, or nothing did: the simulated device holds digests, not values); write it with write:, give its alloc an initial value, or read an entry tensor's data", idx, it.view.src)
		return
	}
	fr.env[it.slot] = v
	if tr := o.reader; tr != nil {
		tr.ReadTensor(tv.Root, idx, v)
	}
}

// hostValue is what the host knows of element off of root.
func (r *runner) hostValue(root stages.RootID, off int64) (int64, bool) {
	if int(root) < len(r.model.entry) {
		if d := r.entryData(int(root)); d != nil {
			return d[off], true
		}
	}
	hv := r.hostData[root]
	if hv == nil {
		return 0, false
	}
	if v, ok := hv.vals[off]; ok {
		return v, true
	}
	return hv.fill, hv.hasFill
}

// entryData is entry tensor i's contents as the host has them in this run:
// the model's data, with the host's writes.
func (r *runner) entryData(i int) []int64 {
	if d, ok := r.entryWritten[i]; ok {
		return d
	}
	return r.model.entry[i].data
}

// write runs a write op's host writes, in order: each waits for the
// tensor's writers and their readers, then sets the element.
func (r *runner) write(o *sub, fr *frame, op *op) {
	for i := range op.writes {
		w := &op.writes[i]
		if fr.inGraph {
			r.failAt(op.line, "write", w.src, "a host write inside the Graph body of %s: it would be made once, when the body is recorded; write in the caller", fr.block.name)
			return
		}
		tv, off, idx, ok := r.element(fr, w.view, w.indices, op.line, "write", w.src)
		if !ok {
			return
		}
		val := r.eval(w.value, fr, op.line)
		if r.err != nil {
			return
		}
		if e := int(tv.Root); e < len(r.model.entry) && r.model.entry[e].data != nil && (!fr.block.isProgram || w.view.kind != baseSlot || w.view.base != e) {
			// The sizer, which bounds the pass before it runs, follows
			// the entry data's writes by name in the program.
			r.failAt(op.line, "write", w.src, "a write of entry tensor %s's data: write it in the program body, by its name", r.model.entry[e].name)
			return
		}
		r.hostWait(o, tv, true)
		r.setHost(tv.Root, off, val)
		if tw := o.writer; tw != nil {
			tw.WriteTensor(tv.Root, idx, val)
		}
	}
}

// setHost records the host's write of element off of root.
func (r *runner) setHost(root stages.RootID, off, val int64) {
	if i := int(root); i < len(r.model.entry) && r.model.entry[i].data != nil {
		if r.entryWritten == nil {
			r.entryWritten = map[int][]int64{}
		}
		d, ok := r.entryWritten[i]
		if !ok {
			d = append([]int64(nil), r.model.entry[i].data...)
			r.entryWritten[i] = d
		}
		d[off] = val
		return
	}
	if r.hostData == nil {
		r.hostData = map[stages.RootID]*hostVals{}
	}
	hv := r.hostData[root]
	if hv == nil {
		hv = &hostVals{}
		r.hostData[root] = hv
	}
	if hv.vals == nil {
		hv.vals = map[int64]int64{}
	}
	hv.vals[off] = val
}

// kernelWrote forgets what the host knew of the roots a task's args write:
// their values are the kernel's now. An entry tensor's data stays (the
// host reads it as the model gives it, as before host writes existed).
func (r *runner) kernelWrote(args []stages.Arg) {
	if len(r.hostData) == 0 {
		return
	}
	for i := range args {
		if args[i].Tag.Writes() {
			delete(r.hostData, args[i].View.Root)
		}
	}
}

// initialValues records an alloc's initial values (set_initial_value).
func (r *runner) initialValues(op *op, first stages.RootID) {
	for i := range op.allocs {
		if it := &op.allocs[i]; it.hasInitial {
			if r.hostData == nil {
				r.hostData = map[stages.RootID]*hostVals{}
			}
			r.hostData[first+stages.RootID(i)] = &hostVals{fill: it.initial, hasFill: true}
		}
	}
}
