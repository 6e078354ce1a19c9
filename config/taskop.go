package config

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

var tagLong = map[stages.Tag]string{stages.TagInput: "in", stages.TagOutput: "out", stages.TagInOut: "inout", stages.TagOutputExisting: "out_existing", stages.TagNoDep: "no_dep"}

// task compiles a kernel or dummy task, once per variant when the op differs
// between variants ("a|b" values or a per-variant override).
func (sc *scope) task(o *op, f map[string]*yaml.Node, n *yaml.Node) error {
	l := sc.l
	o.kind = opTask
	nv := len(sc.b.variants)
	perVariant := false
	for _, v := range sc.b.variants {
		if f[v] != nil {
			perVariant = true
		}
	}
	for _, k := range []string{"k", "mix"} {
		if f[k] != nil && strings.Contains(nodeText(f[k]), "|") {
			perVariant = true
		}
	}
	if a := f["args"]; a != nil && strings.Contains(nodeText(a), "|") {
		perVariant = true
	}
	if perVariant && nv == 0 {
		return l.errf(n, "op", "", "per-variant values (a|b) in a block without variants")
	}
	label := -1
	var store *taskTarget
	if id := f["id"]; id != nil && strings.Contains(id.Value, "[") {
		// id: LIST[i] stores the task into a task list.
		var err error
		if store, err = sc.taskTarget(id, "id", id.Value); err != nil {
			return err
		}
	} else if id != nil {
		var err error
		if label, err = sc.newLabel(id); err != nil {
			return err
		}
	}
	count := 1
	if perVariant {
		count = nv
		sc.structure(1<<uint(sc.b.variantSlot), n.Line)
	}
	for v := 0; v < count; v++ {
		fv := f
		if perVariant {
			fv = make(map[string]*yaml.Node, len(f))
			for k, x := range f {
				fv[k] = x
			}
			if ov := f[sc.b.variants[v]]; ov != nil {
				of, err := l.fields(ov, sc.b.variants[v], "k", "mix", "bn", "args", "scalars", "deps", "pred", "touch", "early", "sync_start")
				if err != nil {
					return err
				}
				for k, x := range of {
					fv[k] = x
				}
			}
		}
		t, err := sc.taskVariant(fv, n, v, perVariant)
		if err != nil {
			return err
		}
		t.id, t.store = label, store
		o.task = append(o.task, t)
	}
	if id := f["id"]; id != nil && store == nil {
		sc.labelDef[id.Value] = true
	}
	return nil
}

// newLabel declares an op id (id: NAME) and returns its index.
func (sc *scope) newLabel(id *yaml.Node) (int, error) {
	l := sc.l
	if !isIdent(id.Value) {
		return -1, l.errf(id, "id", id.Value, "want an identifier (%s), or LIST[i] to store the task into a task list", identRule)
	}
	if k, _, ok := sc.taskName(id.Value); ok && k != refLabel {
		return -1, l.errf(id, "id", id.Value, "duplicate name: a task list or task param of %s has this name", sc.b.name)
	}
	for _, x := range sc.b.ids {
		if x == id.Value {
			return -1, l.errf(id, "id", id.Value, "duplicate op id in %s", sc.b.name)
		}
	}
	sc.b.ids = append(sc.b.ids, id.Value)
	return len(sc.b.ids) - 1, nil
}

// label declares an alloc op's id: a plain NAME, usable in deps from the
// next op on.
func (sc *scope) label(id *yaml.Node) (int, error) {
	if id.Kind != yaml.ScalarNode || strings.Contains(id.Value, "[") {
		return -1, sc.l.errf(id, "id", nodeText(id), "an alloc's id is a NAME (store it into a task list with set)")
	}
	i, err := sc.newLabel(id)
	if err == nil {
		sc.labelDef[id.Value] = true
	}
	return i, err
}

// pick selects variant v of "a|b|c"; a value without '|' is the same for all.
func (sc *scope) pick(nd *yaml.Node, key, s string, v int, per bool) (string, error) {
	if !strings.Contains(s, "|") {
		return s, nil
	}
	parts := strings.Split(s, "|")
	if !per || len(parts) != len(sc.b.variants) {
		return "", sc.l.errf(nd, key, s, "want one value per variant (%s), separated by |", strings.Join(sc.b.variants, "|"))
	}
	return strings.TrimSpace(parts[v]), nil
}

func (sc *scope) taskVariant(f map[string]*yaml.Node, n *yaml.Node, v int, per bool) (*taskOp, error) {
	l := sc.l
	t := &taskOp{blockNum: -1, kernel: [3]stages.KernelID{-1, -1, -1}}
	var err error
	var sig string
	switch {
	case f["dummy"] != nil:
		// Presence made the task a dummy, so `dummy: false` made one too.
		if d := f["dummy"]; d.Kind != yaml.ScalarNode || d.Value != "true" {
			return nil, l.errf(d, "dummy", nodeText(d), "want true (a task with no kernel that only orders others); leave dummy out for a kernel task")
		}
		t.kind = stages.KindDummy
		t.name = "dummy"
	case f["mix"] != nil && f["mix"].Kind == yaml.MappingNode:
		if sig, err = sc.mixedKernels(t, f["mix"], v, per); err != nil {
			return nil, err
		}
	case f["mix"] != nil:
		t.kind = stages.KindMIX
		base, err := sc.pick(f["mix"], "mix", f["mix"].Value, v, per)
		if err != nil {
			return nil, err
		}
		if t.kernel[0], err = sc.kernel(f["mix"], "mix", base+"_aic", stages.KindAIC); err != nil {
			return nil, err
		}
		if t.kernel[1], err = sc.kernel(f["mix"], "mix", base+"_aiv", stages.KindAIV); err != nil {
			return nil, err
		}
		t.kernel[2] = t.kernel[1]
		t.name = base + "_aic"
		sig = l.m.kernels[t.kernel[0]].Sig
	case strings.HasPrefix(strings.TrimSpace(f["k"].Value), "["):
		if sig, err = sc.kernelList(t, f["k"]); err != nil {
			return nil, err
		}
	default:
		name, err := sc.pick(f["k"], "k", f["k"].Value, v, per)
		if err != nil {
			return nil, err
		}
		id, ok := l.m.kernelIdx[name]
		if !ok {
			return nil, l.errf(f["k"], "k", name, "unknown kernel (want a name from the kernels table)")
		}
		k := l.m.kernels[id]
		t.kind = k.Core
		if k.Core == stages.KindAIC {
			t.kernel[0] = id
		} else {
			t.kernel[1] = id
		}
		t.name = name
		sig = k.Sig
	}
	if b := f["bn"]; b != nil {
		e, err := sc.expr(b.Value)
		if err != nil || !e.isConst() || e.val <= 0 || e.val > maxBlockNum {
			return nil, l.errf(b, "bn", b.Value, "want a constant block_num from 1 to %d (block_num x cores per block fits upstream's int16)", maxBlockNum)
		}
		t.blockNum = int32(e.val)
	}
	if a := f["args"]; a != nil {
		items, err := l.seq(a, "args")
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			arg, err := sc.arg(it, v, per)
			if err != nil {
				return nil, err
			}
			if arg.out != nil {
				t.hasOutputs = true
			}
			t.args = append(t.args, arg)
		}
	}
	if sig != "" {
		if len(sig) != len(t.args) {
			return nil, l.errf(n, "args", t.name, "kernel signature %q takes %d arguments, the task passes %d", sig, len(sig), len(t.args))
		}
		for i, a := range t.args {
			want := sig[i]
			got := byte('i')
			switch a.tag {
			case stages.TagOutput, stages.TagOutputExisting:
				got = 'o'
			case stages.TagInOut:
				got = 'x'
			}
			if got != want {
				return nil, l.errf(f["args"].Content[i], "args", f["args"].Content[i].Value, "argument %d is tagged %s, kernel %s declares %c in its signature %q", i, tagLong[a.tag], t.name, want, sig)
			}
		}
	}
	if s := f["scalars"]; s != nil {
		items, err := l.seq(s, "scalars")
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			e, err := sc.expr(it.Value)
			if err != nil {
				return nil, l.errf(it, "scalars", it.Value, "bad expression: %v", err)
			}
			if e.boundaryScalar >= 0 {
				sc.structure(e.deps, it.Line) // passed as it is: patched at each replay
			} else {
				sc.use(e.deps, it.Line, "scalars", it.Value)
			}
			t.scalars = append(t.scalars, e)
		}
	}
	if d := f["deps"]; d != nil {
		items, err := l.seq(d, "deps")
		if err != nil {
			return nil, err
		}
		// "id" depends on the latest task submitted under id in this block
		// call, "id*" (or "id[*]") on every one; a task list or task param
		// gives its elements (LIST[i], LIST[start:+n], or all of them).
		for _, it := range items {
			ref, err := sc.taskRef(it, "deps")
			if err != nil {
				return nil, err
			}
			t.deps = append(t.deps, ref)
		}
	}
	if p := f["pred"]; p != nil {
		if t.pred, err = sc.pred(p); err != nil {
			return nil, err
		}
	}
	for _, lf := range []struct {
		key  string
		flag stages.Launch
	}{{"early", stages.LaunchEarly}, {"sync_start", stages.LaunchSyncStart}} {
		nd := f[lf.key]
		if nd == nil {
			continue
		}
		on, err := l.flag(nd, lf.key)
		if err != nil {
			return nil, err
		}
		if t.kind == stages.KindDummy {
			return nil, l.errf(nd, lf.key, nd.Value, "a dummy task is not launched on a core (leave %s out)", lf.key)
		}
		t.launchSet |= lf.flag
		if on {
			t.launch |= lf.flag
		}
	}
	if tn := f["touch"]; tn != nil {
		if err := sc.touch(tn, t); err != nil {
			return nil, err
		}
		for _, k := range t.kernelList[min(1, len(t.kernelList)):] {
			// Every kernel of a list gets the op's hint.
			tk := *t
			tk.kernel = k
			if err := sc.touch(tn, &tk); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

var tagWords = map[string]stages.Tag{"in": stages.TagInput, "out": stages.TagOutput, "inout": stages.TagInOut, "out_existing": stages.TagOutputExisting, "no_dep": stages.TagNoDep}

// arg parses "TAG VIEW", or "out NAME DTYPE[dims]" for a runtime-allocated
// output.
func (sc *scope) arg(nd *yaml.Node, v int, per bool) (argOp, error) {
	l := sc.l
	s := strings.TrimSpace(nd.Value)
	sp := strings.IndexAny(s, " \t")
	if sp < 0 {
		return argOp{}, l.errf(nd, "args", s, "want \"TAG VIEW\" (TAG is in, out, inout, out_existing or no_dep)")
	}
	tw, err := sc.pick(nd, "args", s[:sp], v, per)
	if err != nil {
		return argOp{}, err
	}
	tag, ok := tagWords[tw]
	if !ok {
		return argOp{}, l.errf(nd, "args", s, "unknown tag %q (want in, out, inout, out_existing or no_dep)", tw)
	}
	rest := strings.TrimSpace(s[sp:])
	if tag == stages.TagOutput {
		it, err := sc.allocItem(rest, nd)
		if err != nil {
			return argOp{}, err
		}
		return argOp{tag: tag, out: &it}, nil
	}
	vw, err := sc.view(rest, nd.Line)
	if err != nil {
		return argOp{}, l.errf(nd, "args", s, "%v", err)
	}
	sc.use(vw.deps, nd.Line, "args", s)
	if (tag == stages.TagInOut || tag == stages.TagOutputExisting) && vw.kind == baseSlot && vw.list == nil &&
		!sc.b.auto && vw.base < len(sc.b.boundary) && sc.b.boundary[vw.base].tag == stages.TagInput {
		sc.b.inputWrites = append(sc.b.inputWrites, inputWrite{line: nd.Line, slot: sc.b.boundary[vw.base].name, arg: s})
	}
	return argOp{tag: tag, view: vw}, nil
}

var predOps = map[string]stages.PredOp{">": stages.PredGT, ">=": stages.PredGE, "==": stages.PredEQ, "!=": stages.PredNE, "<": stages.PredLT, "<=": stages.PredLE}

// pred parses "NAME[i, j, ...] OP target".
func (sc *scope) pred(nd *yaml.Node) (*predOp, error) {
	l := sc.l
	src := nd.Value
	p, err := sc.parser(nd, "pred", src)
	if err != nil {
		return nil, err
	}
	name := p.next()
	if name.kind != tIdent {
		return nil, l.errf(nd, "pred", src, "want \"TENSOR[i, ...] OP VALUE\"")
	}
	k, idx, ok := sc.tensor(name.s)
	if !ok {
		return nil, l.errf(nd, "pred", name.s, "unknown tensor (want %s)", sc.tensorNames())
	}
	pr := &predOp{view: &viewExpr{kind: k, base: idx, line: nd.Line, src: name.s, local: k == baseSlot && idx >= sc.b.fixedSlots}}
	if pr.indices, err = sc.exprList(p); err != nil {
		return nil, l.errf(nd, "pred", src, "%v", err)
	}
	t := p.next()
	op, ok := predOps[t.s]
	if t.kind != tOp || !ok {
		return nil, l.errf(nd, "pred", src, "want a comparison (>, >=, ==, !=, <, <=) after the index")
	}
	pr.op = op
	if pr.target, err = p.parseExpr(0); err != nil {
		return nil, l.errf(nd, "pred", src, "%v", err)
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, l.errf(nd, "pred", src, "unexpected %q", t.s)
	}
	for _, e := range append(pr.indices, pr.target) {
		setSrc(e, src)
	}
	for _, e := range append(pr.indices, pr.target) {
		sc.use(e.deps, nd.Line, "pred", src)
	}
	return pr, nil
}
