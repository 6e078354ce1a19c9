package config

import (
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// kernelDoc is one entry of the kernel table.
type kernelDoc struct {
	ID        *yaml.Node `yaml:"id"`
	Name      *yaml.Node `yaml:"name"`
	Core      *yaml.Node `yaml:"core"`
	Code      *yaml.Node `yaml:"code"`
	Sig       *yaml.Node `yaml:"sig"`
	Intensity *yaml.Node `yaml:"intensity"`
	Folded    *yaml.Node `yaml:"folded"`
	Early     *yaml.Node `yaml:"early"`
	SyncStart *yaml.Node `yaml:"sync_start"`
}

// kernelTable compiles the kernels section; a KernelID is the position.
func (l *loader) kernelTable(n *yaml.Node) error {
	for ki, err := range decodeEach[kernelDoc](l, n, "kernels", "kernel", "want at least name and core", "name", "core") {
		if err != nil {
			return err
		}
		i, kf := ki.i, &ki.doc
		k := stages.Kernel{Name: kf.Name.Value}
		if _, dup := l.m.kernelIdx[k.Name]; dup {
			return l.errf(kf.Name, "kernel name", k.Name, "duplicate kernel")
		}
		if id := kf.ID; id != nil {
			v, err := l.constInt(id, "id")
			if err != nil {
				return err
			}
			if v != int64(i) {
				return l.errf(id, "kernel id", id.Value, "a kernel's id is its position in the table (want %d)", i)
			}
		}
		switch kf.Core.Value {
		case "aic":
			k.Core = stages.KindAIC
		case "aiv":
			k.Core = stages.KindAIV
		default:
			return l.errf(kf.Core, "core", kf.Core.Value, "unknown core type (want aic or aiv)")
		}
		k.Code = k.Name
		if c := kf.Code; c != nil {
			k.Code = c.Value
		}
		if s := kf.Sig; s != nil {
			for _, c := range s.Value {
				if c != 'i' && c != 'o' && c != 'x' {
					return l.errf(s, "sig", s.Value, "a signature is a string over i, o, x")
				}
			}
			k.Sig = s.Value
		}
		if fo := kf.Folded; fo != nil {
			items, err := l.seq(fo, "folded")
			if err != nil {
				return err
			}
			for _, x := range items {
				v, err := l.constInt(x, "folded")
				if err != nil {
					return err
				}
				k.Folded = append(k.Folded, uint64(v))
			}
		}
		var kl stages.Launch
		for _, f := range []struct {
			nd   *yaml.Node
			key  string
			flag stages.Launch
		}{{kf.Early, "early", stages.LaunchEarly}, {kf.SyncStart, "sync_start", stages.LaunchSyncStart}} {
			on, err := l.flag(f.nd, f.key)
			if err != nil {
				return err
			}
			if on {
				kl |= f.flag
			}
		}
		l.m.kernelLaunch = append(l.m.kernelLaunch, kl)
		if in := kf.Intensity; in != nil {
			v, err := strconv.ParseFloat(in.Value, 64)
			if err != nil || v < 0 {
				return l.errf(in, "intensity", in.Value, "want a non-negative number (operations per byte)")
			}
			k.Intensity = v
		}
		l.m.kernelIdx[k.Name] = stages.KernelID(i)
		l.m.kernels = append(l.m.kernels, k)
	}
	return nil
}

func (sc *scope) kernel(nd *yaml.Node, key, name string, core stages.Kind) (stages.KernelID, error) {
	id, ok := sc.l.m.kernelIdx[name]
	if !ok {
		return -1, sc.l.errf(nd, key, name, "unknown kernel (want a name from the kernels table)")
	}
	if sc.l.m.kernels[id].Core != core {
		return -1, sc.l.errf(nd, key, name, "kernel runs on %s (want an %s kernel here)", sc.l.m.kernels[id].Core, core)
	}
	return id, nil
}

// kernelList compiles k: "[K0, K1, ...][EXPR]": the task runs kernel EXPR of
// the list (upstream's peeled copies gate_proj, gate_proj_0, ... chosen by
// a loop var). The kernels must run on one core type and share a
// signature, which it returns.
func (sc *scope) kernelList(t *taskOp, kn *yaml.Node) (string, error) {
	l := sc.l
	src := kn.Value
	p, err := sc.parser(kn, "k", src)
	if err != nil {
		return "", err
	}
	want := "want \"[KERNEL, KERNEL, ...][INDEX]\""
	p.next() // '['
	var sig string
	for {
		nt := p.next()
		if nt.kind != tIdent {
			return "", l.errf(kn, "k", src, "%s", want)
		}
		id, ok := l.m.kernelIdx[nt.s]
		if !ok {
			return "", l.errf(kn, "k", nt.s, "unknown kernel (want a name from the kernels table)")
		}
		k := l.m.kernels[id]
		ks := [3]stages.KernelID{-1, -1, -1}
		if k.Core == stages.KindAIC {
			ks[0] = id
		} else {
			ks[1] = id
		}
		if len(t.kernelList) == 0 {
			t.kind, t.name, sig = k.Core, k.Name, k.Sig
		} else if k.Core != t.kind || k.Sig != sig {
			return "", l.errf(kn, "k", nt.s, "kernel %s (%s, signature %q) differs from %s (%s, signature %q): the kernels of a list run on one core type with one signature", k.Name, k.Core, k.Sig, t.name, t.kind, sig)
		}
		t.kernelList = append(t.kernelList, ks)
		sep := p.next()
		if sep.kind == tOp && sep.s == "]" {
			break
		}
		if sep.kind != tOp || sep.s != "," {
			return "", l.errf(kn, "k", src, "%s", want)
		}
	}
	if o := p.next(); o.kind != tOp || o.s != "[" {
		return "", l.errf(kn, "k", src, "%s: the list needs an index", want)
	}
	if t.kernelIndex, err = p.parseExpr(0); err != nil {
		return "", l.errf(kn, "k", src, "%v", err)
	}
	if c := p.next(); c.kind != tOp || c.s != "]" {
		return "", l.errf(kn, "k", src, "%v", p.errf(c, "expected ']'"))
	}
	if c := p.peek(); c.kind != tEOF {
		return "", l.errf(kn, "k", src, "%v", p.errf(c, "unexpected %q", c.s))
	}
	if t.kernelIndex.isConst() && (t.kernelIndex.val < 0 || t.kernelIndex.val >= int64(len(t.kernelList))) {
		return "", l.errf(kn, "k", src, "index %d of a list of %d kernels", t.kernelIndex.val, len(t.kernelList))
	}
	setSrc(t.kernelIndex, src)
	sc.use(t.kernelIndex.deps, kn.Line, "k", src)
	t.kernel = t.kernelList[0]
	return sig, nil
}

// flag reads a true-or-false key (absent: false). YAML 1.1's yes, on and
// their kin decode as booleans too; the language says true or false.
func (l *loader) flag(n *yaml.Node, key string) (bool, error) {
	if n == nil {
		return false, nil
	}
	if n.Kind != yaml.ScalarNode || n.Value != "true" && n.Value != "false" {
		return false, l.errf(n, key, nodeText(n), "want true or false")
	}
	return n.Value == "true", nil
}

// mixSlots are MixedKernels' fields in slot order (upstream's
// PTO2SubtaskSlot: AIC 0, AIV0 1, AIV1 2) and the core each runs on.
var mixSlots = [3]struct {
	key  string
	core stages.Kind
}{{"aic", stages.KindAIC}, {"aiv0", stages.KindAIV}, {"aiv1", stages.KindAIV}}

// mixedKernels compiles mix: {aic: K0, aiv0: K1, aiv1: K2}, upstream's
// rt_submit_task(MixedKernels{aic, aiv0, aiv1}, args): each slot's kernel
// or none. Its shape is upstream's ActiveMask::to_shape: two or more
// slots are a MIX task (AIV0 + AIV1 without an AIC included), one AIC or
// AIV0 slot alone an AIC or AIV task. The task's name and signature are
// its first slot's kernel's.
func (sc *scope) mixedKernels(t *taskOp, n *yaml.Node, v int, per bool) (string, error) {
	l := sc.l
	f, err := l.fields(n, "mix", "aic", "aiv0", "aiv1")
	if err != nil {
		return "", err
	}
	active := 0
	for i, s := range mixSlots {
		nd := f[s.key]
		if nd == nil {
			continue
		}
		if nd.Kind != yaml.ScalarNode {
			return "", l.errf(nd, "mix."+s.key, nodeText(nd), "want a kernel name")
		}
		name, err := sc.pick(nd, "mix."+s.key, nd.Value, v, per)
		if err != nil {
			return "", err
		}
		if t.kernel[i], err = sc.kernel(nd, "mix."+s.key, name, s.core); err != nil {
			return "", err
		}
		if active == 0 {
			t.name = name
		}
		active++
	}
	switch {
	case active == 0:
		return "", l.errf(n, "mix", nodeText(n), "no kernel: want at least one of aic, aiv0, aiv1 (a task with none is {dummy: true})")
	case active >= 2:
		t.kind = stages.KindMIX
	case t.kernel[0] >= 0:
		t.kind = stages.KindAIC
	default:
		// AIV0 or AIV1 alone: an AIV task, its kernel in its slot.
		t.kind = stages.KindAIV
	}
	for _, k := range t.kernel {
		if k >= 0 {
			return l.m.kernels[k].Sig, nil
		}
	}
	return "", nil
}
