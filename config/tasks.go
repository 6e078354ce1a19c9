package config

import (
	"fmt"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// Task values. Upstream's orchestrations keep task ids in variables and
// arrays (out_tids[50], gate_tids[85]) and make later tasks depend on
// element i of one; a block receives the task of a boundary tensor's writer
// from its caller. The language says the same with three names a block can
// hold, all resolved when the block is compiled:
//
//   - an op id (id: NAME): the tasks submitted under it in this block call,
//     NAME the latest and NAME* every one of the current run of its loop;
//   - a task list (declared by the op tasks: {NAME: SIZE}, filled by ops
//     with id: NAME[i] or NAME[i:+n] and by set:), indexed by expression;
//   - a task param (the block's tasks: [NAME]), bound by each call.
//
// A task expression is NAME, NAME*, NAME[*], NAME[i] or NAME[start:+n]; a
// list or param named alone is every element, in order.

type refKind uint8

const (
	refLabel refKind = iota
	refParam
	refList
)

// taskRef is a compiled task expression.
type taskRef struct {
	kind         refKind
	idx          int
	all          bool
	index        *expr
	start, count *expr
	src          string
	key          string // where it is written (deps, set.T, with.P), for messages
	// cond, from "TASK if EXPR", leaves the task out where EXPR is 0
	// (upstream's if (is_last) add_dep(alloc_task)); nil: always.
	cond *expr
	// valid, from "TASK?", leaves out what is not set: an op id no op
	// submitted in this block call, a task list's unset elements
	// (upstream's if (t.is_valid()) add_dep(t)).
	valid bool
}

// taskTarget is where an op's task (or a set op's value) is stored: an
// element or a run of elements of a task list.
type taskTarget struct {
	list         int
	index        *expr
	start, count *expr
	src          string
	key          string
}

// taskDecl declares (and clears) a task list of size elements.
type taskDecl struct {
	list int
	size *expr
}

// setItem stores a task expression's tasks into a list: one task fills
// every element of the target, n tasks fill a target of n elements.
type setItem struct {
	target *taskTarget
	value  []*taskRef
	line   int
}

// taskName resolves a name among the block's op ids, task lists and task
// params.
func (sc *scope) taskName(name string) (refKind, int, bool) {
	for i, x := range sc.b.taskLists {
		if x == name {
			return refList, i, true
		}
	}
	for i, x := range sc.b.taskParams {
		if x == name {
			return refParam, i, true
		}
	}
	for i, x := range sc.b.ids {
		if x == name {
			return refLabel, i, true
		}
	}
	return 0, 0, false
}

func (sc *scope) taskNames() string {
	return "an earlier op id, a task list or a task param of " + sc.b.name
}

// taskRef parses a task expression.
func (sc *scope) taskRef(nd *yaml.Node, key string) (*taskRef, error) {
	l := sc.l
	src := strings.TrimSpace(nd.Value)
	if nd.Kind != yaml.ScalarNode || src == "" {
		return nil, l.errf(nd, key, nd.Value, "want a task: NAME, NAME*, NAME[i] or NAME[start:+n]")
	}
	p, err := sc.parser(nd, key, src)
	if err != nil {
		return nil, err
	}
	t := p.next()
	if t.kind != tIdent {
		return nil, l.errf(nd, key, src, "want a task: NAME, NAME*, NAME[i] or NAME[start:+n]")
	}
	kind, idx, ok := sc.taskName(t.s)
	if !ok || kind == refLabel && !sc.labelDef[t.s] {
		if sc.allIDs[t.s] {
			return nil, l.errf(nd, key, src, "cycle in explicit dependencies: %s is this task itself or comes later (want the id of an earlier op)", t.s)
		}
		return nil, l.errf(nd, key, src, "unknown task %q (want %s)", t.s, sc.taskNames())
	}
	r := &taskRef{kind: kind, idx: idx, src: src, key: key, all: kind != refLabel}
	switch nx := p.peek(); {
	case nx.kind == tOp && nx.s == "*":
		p.next()
		r.all = true
	case nx.kind == tOp && nx.s == "[":
		p.next()
		if st := p.peek(); st.kind == tOp && st.s == "*" {
			p.next()
			r.all = true
		} else {
			if kind == refLabel {
				return nil, l.errf(nd, key, src, "%s is an op id: it names the latest task (or all, %s*); to index tasks, keep them in a task list (tasks: {%s: N}, id: %s[i])", t.s, t.s, t.s, t.s)
			}
			if r.index, r.start, r.count, err = sc.indexOrSlice(p); err != nil {
				return nil, l.errf(nd, key, src, "%v", err)
			}
			r.all = false
			sc.use(r.index.depsOr(r.start, r.count), nd.Line, key, src)
		}
		if c := p.next(); c.kind != tOp || c.s != "]" {
			return nil, l.errf(nd, key, src, "%v", p.errf(c, "expected ']'"))
		}
	}
	if c := p.peek(); c.kind == tOp && c.s == "?" {
		p.next()
		if kind == refParam {
			return nil, l.errf(nd, key, src, "%s is a task param: a call binds it to tasks that are set, so it is always valid (leave out the ?)", t.s)
		}
		r.valid = true
	}
	if c := p.peek(); c.kind == tIdent && c.s == "if" {
		p.next()
		if r.cond, err = p.parseExpr(0); err != nil {
			return nil, l.errf(nd, key, src, "%v", err)
		}
		sc.use(r.cond.deps, nd.Line, key, src)
	}
	if c := p.peek(); c.kind != tEOF {
		return nil, l.errf(nd, key, src, "%v", p.errf(c, "unexpected %q after the task", c.s))
	}
	for _, e := range []*expr{r.index, r.start, r.count, r.cond} {
		setSrc(e, src)
	}
	return r, nil
}

// taskRefs parses a task expression or a list of them.
func (sc *scope) taskRefs(nd *yaml.Node, key string) ([]*taskRef, error) {
	items := []*yaml.Node{nd}
	if nd.Kind == yaml.SequenceNode {
		items = nd.Content
	}
	out := make([]*taskRef, 0, len(items))
	for _, it := range items {
		r, err := sc.taskRef(it, key)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// indexOrSlice parses "i" or "start:+n" (after '[').
func (sc *scope) indexOrSlice(p *exprParser) (index, start, count *expr, err error) {
	e, err := p.parseExpr(0)
	if err != nil {
		return nil, nil, nil, err
	}
	if t := p.peek(); t.kind == tOp && t.s == ":" {
		p.next()
		if t := p.next(); t.kind != tOp || t.s != "+" {
			return nil, nil, nil, p.errf(t, "want [start:+n]")
		}
		c, err := p.parseExpr(0)
		if err != nil {
			return nil, nil, nil, err
		}
		return nil, e, c, nil
	}
	return e, nil, nil, nil
}

// depsOr is the env slots read by whichever of e, a and b are set.
func (e *expr) depsOr(a, b *expr) uint64 {
	var d uint64
	for _, x := range []*expr{e, a, b} {
		if x != nil {
			d |= x.deps
		}
	}
	return d
}

// taskTarget parses NAME[i] or NAME[start:+n] naming a declared task list.
func (sc *scope) taskTarget(nd *yaml.Node, key, src string) (*taskTarget, error) {
	l := sc.l
	p, err := sc.parser(nd, key, src)
	if err != nil {
		return nil, err
	}
	t := p.next()
	if t.kind != tIdent {
		return nil, l.errf(nd, key, src, "want LIST[i] or LIST[start:+n]")
	}
	kind, idx, ok := sc.taskName(t.s)
	if !ok || kind != refList {
		return nil, l.errf(nd, key, src, "unknown task list %q (declare it first: tasks: {%s: SIZE})", t.s, t.s)
	}
	if o := p.next(); o.kind != tOp || o.s != "[" {
		return nil, l.errf(nd, key, src, "want %s[i] or %s[start:+n]", t.s, t.s)
	}
	tt := &taskTarget{list: idx, src: src, key: key}
	if tt.index, tt.start, tt.count, err = sc.indexOrSlice(p); err != nil {
		return nil, l.errf(nd, key, src, "%v", err)
	}
	if c := p.next(); c.kind != tOp || c.s != "]" {
		return nil, l.errf(nd, key, src, "%v", p.errf(c, "expected ']'"))
	}
	if c := p.peek(); c.kind != tEOF {
		return nil, l.errf(nd, key, src, "%v", p.errf(c, "unexpected %q", c.s))
	}
	sc.use(tt.index.depsOr(tt.start, tt.count), nd.Line, key, src)
	for _, e := range []*expr{tt.index, tt.start, tt.count} {
		setSrc(e, src)
	}
	return tt, nil
}

// tasksOp compiles tasks: {NAME: SIZE, ...}.
func (sc *scope) tasksOp(o *op, n *yaml.Node) error {
	l := sc.l
	o.kind = opTasks
	lists, err := l.keyValues(n, "tasks")
	if err != nil {
		return err
	}
	for _, kv := range lists {
		name, kn, vn := kv.key.Value, kv.key, kv.value
		if !isIdent(name) {
			return l.errf(kn, "tasks", name, "a task list name must be an identifier: %s", identRule)
		}
		if _, _, ok := sc.taskName(name); ok || sc.allIDs[name] {
			return l.errf(kn, "tasks", name, "duplicate name: an op id, task list or task param of %s has this name", sc.b.name)
		}
		size, err := sc.expr(vn.Value)
		if err != nil {
			return l.errf(vn, "tasks."+name, vn.Value, "bad expression: %v", err)
		}
		if size.isConst() && size.val <= 0 {
			return l.errf(vn, "tasks."+name, vn.Value, "a task list needs a positive size")
		}
		sc.use(size.deps, vn.Line, "tasks."+name, vn.Value)
		o.taskDecls = append(o.taskDecls, taskDecl{list: len(sc.b.taskLists), size: size})
		sc.b.taskLists = append(sc.b.taskLists, name)
	}
	return nil
}

// setOp compiles set: {LIST[i]: TASK, ...}.
func (sc *scope) setOp(o *op, n *yaml.Node) error {
	l := sc.l
	o.kind = opSet
	sets, err := l.keyValues(n, "set")
	if err != nil {
		return err
	}
	for _, kv := range sets {
		k := kv.key.Value
		tt, err := sc.taskTarget(kv.key, "set", k)
		if err != nil {
			return err
		}
		v, err := sc.taskRefs(kv.value, "set."+k)
		if err != nil {
			return err
		}
		o.sets = append(o.sets, setItem{target: tt, value: v, line: kv.value.Line})
	}
	return nil
}

// ---- run time

// taskSeq returns the tasks of a task expression in fr (appended to dst),
// or false after r.fail.
func (r *runner) taskSeq(dst []stages.TaskID, fr *frame, ref *taskRef, line int) ([]stages.TaskID, bool) {
	if ref.cond != nil && r.eval(ref.cond, fr, line) == 0 {
		return dst, r.err == nil
	}
	var seq []stages.TaskID
	var what string
	switch ref.kind {
	case refLabel:
		ts := fr.idTasks[ref.idx]
		if len(ts) == 0 && ref.valid {
			return dst, true
		}
		if len(ts) == 0 {
			r.failAt(line, ref.key, ref.src, "explicit dependency on %q: that op has not been submitted in this block call", fr.block.ids[ref.idx])
			return dst, false
		}
		if ref.all {
			return append(dst, ts...), true
		}
		return append(dst, ts[len(ts)-1]), true
	case refParam:
		seq, what = fr.taskParams[ref.idx], "task param "+fr.block.taskParams[ref.idx]
	case refList:
		seq, what = fr.taskLists[ref.idx], "task list "+fr.block.taskLists[ref.idx]
	}
	lo, n := int64(0), int64(len(seq))
	switch {
	case ref.index != nil:
		lo, n = r.eval(ref.index, fr, line), 1
	case ref.start != nil:
		lo, n = r.eval(ref.start, fr, line), r.eval(ref.count, fr, line)
	}
	if r.err != nil {
		return dst, false
	}
	if !within(lo, n, len(seq)) {
		r.failAt(line, ref.key, ref.src, "elements %s of %s, which has %d", elems(lo, n), what, len(seq))
		return dst, false
	}
	hi := lo + n
	for i := lo; i < hi; i++ {
		if seq[i] == stages.NoTask {
			if ref.valid {
				// TASK?: only the valid ones, in order.
				for _, t := range seq[i:hi] {
					if t != stages.NoTask {
						dst = append(dst, t)
					}
				}
				return dst, true
			}
			r.failAt(line, ref.key, ref.src, "element %d of %s is not set (no op stored a task there; TASK? takes only the set ones)", i, what)
			return dst, false
		}
		dst = append(dst, seq[i])
	}
	return dst, true
}

// store writes tasks into a list target: one task fills it, n fill n.
func (r *runner) store(fr *frame, tt *taskTarget, ids []stages.TaskID, line int) {
	seq := fr.taskLists[tt.list]
	lo, n := int64(0), int64(1)
	if tt.index != nil {
		lo = r.eval(tt.index, fr, line)
	} else {
		lo, n = r.eval(tt.start, fr, line), r.eval(tt.count, fr, line)
	}
	if r.err != nil {
		return
	}
	if !within(lo, n, len(seq)) {
		r.failAt(line, tt.key, tt.src, "elements %s of task list %s, which has %d", elems(lo, n), fr.block.taskLists[tt.list], len(seq))
		return
	}
	if len(ids) != 1 && int64(len(ids)) != n {
		r.failAt(line, tt.key, tt.src, "%d tasks for %d elements (want one task, or one per element)", len(ids), n)
		return
	}
	for i := int64(0); i < n; i++ {
		if len(ids) == 1 {
			seq[lo+i] = ids[0]
		} else {
			seq[lo+i] = ids[i]
		}
	}
}

func (r *runner) declareTasks(fr *frame, op *op) {
	for _, d := range op.taskDecls {
		n := r.eval(d.size, fr, op.line)
		if r.err != nil {
			return
		}
		if n <= 0 || n > maxTaskList {
			r.failAt(op.line, "tasks."+fr.block.taskLists[d.list], d.size.src, "task list %s: size %d (want 1 to %d)", fr.block.taskLists[d.list], n, maxTaskList)
			return
		}
		r.did.work += n
		s := fr.taskLists[d.list][:0]
		for range n {
			s = append(s, stages.NoTask)
		}
		fr.taskLists[d.list] = s
	}
}

// maxTaskList bounds a task list, so that a typo in its size cannot take
// the host's memory.
const maxTaskList = 1 << 20

func (r *runner) setTasks(fr *frame, op *op) {
	for i := range op.sets {
		s := &op.sets[i]
		buf := r.taskBuf[:0]
		var ok bool
		for _, ref := range s.value {
			if buf, ok = r.taskSeq(buf, fr, ref, s.line); !ok {
				return
			}
		}
		r.taskBuf = buf
		if s.target.count != nil {
			r.did.work += max(r.eval(s.target.count, fr, s.line), 0)
		}
		r.store(fr, s.target, buf, s.line)
	}
}

// within reports whether elements [lo, lo+n) lie in a sequence of size
// elements, without computing lo+n (an expression's values may be anything).
func within(lo, n int64, size int) bool {
	return lo >= 0 && n >= 0 && lo <= int64(size) && n <= int64(size)-lo
}

// elems writes elements [lo, lo+n) for a message: "[lo, end)", or "[lo,
// +n)" when the end is past int64 (never a wrapped number).
func elems(lo, n int64) string {
	if n >= 0 && lo <= math.MaxInt64-n {
		return fmt.Sprintf("[%d, %d)", lo, lo+n)
	}
	return fmt.Sprintf("[%d, +%d)", lo, n)
}
