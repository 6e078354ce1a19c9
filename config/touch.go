package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// touch compiles an op's access hint, {ARG: ROWS, ...}, into its kernels'
// stages.Kernel.Touch. ARG names one of the task's arguments by its tensor
// (the one argument whose view is based on it); ROWS is ARG[start:+N] or
// ARG[row] when the argument keeps ARG's dim 0, or dim0[start:+N] or
// dim0[row] over the argument's own dim 0 (after a row index or reshape):
// the kernel reads N (a positive constant) or 1 rows of that dim. A second
// index, ARG[ROWS, COLS] or dim0[ROWS, COLS], is a 2-D tile: COLS is
// start:+N or col over the argument's last dim, and either part may be ":"
// (all of that dim). Only the counts become the hint: where the rows are (a
// loop var, a scalar) does not change the bytes read, so it is not a
// structural use of a param either.
//
// The hint belongs to the kernel, since its code decides what it reads: a
// site without touch takes the kernel's hint from another site, and two
// sites that declare different hints for one kernel are an error.
func (sc *scope) touch(tn *yaml.Node, t *taskOp) error {
	l := sc.l
	if t.kind == stages.KindDummy {
		return l.errf(tn, "touch", "", "a dummy task has no kernel to hint")
	}
	hints, err := l.keyValues(tn, "touch")
	if err != nil {
		return err
	}
	var site touchSite
	for _, kv := range hints {
		k, vn := kv.key.Value, kv.value
		kind, idx, ok := sc.tensor(k)
		if !ok {
			return l.errf(vn, "touch", k, "unknown tensor (want %s)", sc.tensorNames())
		}
		arg := -1
		for i, a := range t.args {
			if a.view == nil || a.view.kind != kind || a.view.base != idx {
				continue
			}
			if arg >= 0 {
				return l.errf(vn, "touch", k, "names arguments %d and %d of this task (a hint must pick one)", arg, i)
			}
			arg = i
		}
		if arg < 0 {
			return l.errf(vn, "touch", k, "not an argument of this task")
		}
		av := t.args[arg].view
		key, src := "touch."+k, vn.Value
		// A 2-D tile: the columns part is compiled here, the rows part as
		// a rows hint of its own ("NAME[ROWS]"), unless it is ":".
		rsrc, colsSrc, tile := splitTile(src)
		var cols int64
		if tile {
			var err error
			if cols, err = sc.touchCols(colsSrc, av); err != nil {
				return l.errf(vn, key, src, "%v", err)
			}
		}
		if tile && rsrc == "" {
			if cols == 0 {
				return l.errf(vn, key, src, "a hint must narrow something: want rows, columns or both, not [:, :]")
			}
			site.hints = append(site.hints, stages.Touch{Arg: arg, Cols: cols})
			site.names = append(site.names, k)
			site.nodes = append(site.nodes, vn)
			continue
		}
		// "dim0[...]" counts rows of the argument as passed (after its
		// row index or reshape); "NAME[...]" rows of the tensor NAME, which
		// are the argument's only when the argument keeps NAME's dim 0.
		vsrc, own := rsrc, strings.HasPrefix(strings.TrimSpace(rsrc), "dim0[")
		if own {
			vsrc = k + strings.TrimPrefix(strings.TrimSpace(rsrc), "dim0")
		} else if av.index != nil || av.as != nil || av.dims != nil && av.dims[0].index != nil {
			return l.errf(vn, key, src, "argument %d (%s) drops or reshapes %s's dim 0: write the rows of the argument's own dim 0 as dim0[start:+ROWS]", arg, av.src, k)
		}
		vw, err := sc.view(vsrc, vn.Line)
		if err != nil {
			return l.errf(vn, key, src, "%v", err)
		}
		if vw.kind != kind || vw.base != idx {
			return l.errf(vn, key, src, "a hint on %s must view %s (or dim0)", k, k)
		}
		rows := int64(1)
		switch {
		case vw.at != nil || vw.as != nil || vw.index == nil && vw.start == nil:
			return l.errf(vn, key, src, "want %s[start:+ROWS], %s[row], dim0[start:+ROWS] or dim0[row]: the rows of dim 0 the kernel reads", k, k)
		case vw.start != nil:
			if !vw.count.isConst() || vw.count.val <= 0 {
				return l.errf(vn, key, src, "the row count must be a positive constant (a hint is a property of the kernel, the same at every call)")
			}
			rows = vw.count.val
		}
		// The argument's dim 0, when it is known here.
		if n, ok := av.rows(own); ok && rows > n {
			return l.errf(vn, key, src, "reads %d rows of an argument of %d", rows, n)
		}
		site.hints = append(site.hints, stages.Touch{Arg: arg, Rows: rows, Cols: cols})
		site.names = append(site.names, k)
		site.nodes = append(site.nodes, vn)
	}
	site.line = tn.Line
	sort.Sort(&site)
	for i, id := range t.kernel {
		if id < 0 || i > 0 && id == t.kernel[i-1] {
			continue // no kernel in this slot, or a MIX's AIV kernel again
		}
		if err := l.setTouch(id, tn, &site); err != nil {
			return err
		}
	}
	return nil
}

// splitTile splits a 2-D touch value, NAME[ROWS, COLS], at its top-level
// comma: rows is NAME[ROWS] ("" when ROWS is ":"), cols is COLS. A value
// with no top-level comma in its brackets is not a tile.
func splitTile(src string) (rows, cols string, tile bool) {
	s := strings.TrimSpace(src)
	open := strings.IndexByte(s, '[')
	if open < 0 || !strings.HasSuffix(s, "]") {
		return src, "", false
	}
	depth := 0
	for i := open + 1; i < len(s)-1; i++ {
		switch s[i] {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth != 0 {
				continue
			}
			r, c := strings.TrimSpace(s[open+1:i]), strings.TrimSpace(s[i+1:len(s)-1])
			if r == ":" {
				return "", c, true
			}
			return s[:open+1] + r + "]", c, true
		}
	}
	return src, "", false
}

// touchCols compiles the columns part of a 2-D touch value: ":" (every
// column: 0), col (1) or start:+N (N, a positive constant), over the last
// dim of the argument view av.
func (sc *scope) touchCols(src string, av *viewExpr) (int64, error) {
	if strings.TrimSpace(src) == ":" {
		return 0, nil
	}
	p, err := sc.newParser(src)
	if err != nil {
		return 0, err
	}
	p.tables = sc.l.entryTables
	if _, err := p.parseExpr(0); err != nil {
		return 0, err
	}
	cols := int64(1)
	if t := p.peek(); t.kind == tOp && t.s == ":" {
		p.next()
		if t := p.next(); t.kind != tOp || t.s != "+" {
			return 0, p.errf(t, "want the columns as start:+COLS, col or \":\"")
		}
		n, err := p.parseExpr(0)
		if err != nil {
			return 0, err
		}
		if !n.isConst() || n.val <= 0 {
			return 0, fmt.Errorf("the column count must be a positive constant (a hint is a property of the kernel, the same at every call)")
		}
		cols = n.val
	}
	if t := p.peek(); t.kind != tEOF {
		return 0, p.errf(t, "unexpected %q after the columns (want start:+COLS, col or \":\")", t.s)
	}
	// The argument's last dim, when a constant reshape fixes it here.
	if av.as != nil {
		last := av.as[len(av.as)-1]
		switch {
		case len(av.as) < 2:
			return 0, fmt.Errorf("columns of a rank-1 argument (as %s): hint its rows", av.src)
		case last.isConst() && cols > last.val:
			return 0, fmt.Errorf("reads %d columns of an argument whose last dim is %d", cols, last.val)
		}
	}
	return cols, nil
}

// touchSite is the hints one op declares for its kernels, sorted by
// argument, with each hint's tensor name and YAML value for messages.
type touchSite struct {
	line  int
	hints []stages.Touch
	names []string
	nodes []*yaml.Node
}

// setTouch gives kernel id the hints of site, or checks them against the
// hints another site gave it.
func (l *loader) setTouch(id stages.KernelID, tn *yaml.Node, site *touchSite) error {
	k := &l.m.kernels[id]
	prev, ok := l.touchAt[id]
	if !ok {
		if l.touchAt == nil {
			l.touchAt = map[stages.KernelID]*touchSite{}
		}
		l.touchAt[id] = site
		k.Touch = site.hints
		return nil
	}
	if slices.Equal(prev.hints, site.hints) {
		return nil
	}
	hintOf := func(s *touchSite, arg int) stages.Touch {
		for _, h := range s.hints {
			if h.Arg == arg {
				return h
			}
		}
		return stages.Touch{Arg: arg}
	}
	count := func(n int64, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	what := func(h stages.Touch) string {
		switch {
		case h.Rows == 0 && h.Cols == 0:
			return "no hint"
		case h.Cols == 0:
			return count(h.Rows, "row", "rows")
		case h.Rows == 0:
			return count(h.Cols, "column", "columns")
		}
		return count(h.Rows, "row", "rows") + " × " + count(h.Cols, "column", "columns")
	}
	// The first argument the two sites disagree on: named by this site's
	// hint when it has one, else by the site's touch mapping.
	args := append(append([]stages.Touch(nil), prev.hints...), site.hints...)
	slices.SortFunc(args, func(a, b stages.Touch) int { return a.Arg - b.Arg })
	for _, a := range args {
		was, now := hintOf(prev, a.Arg), hintOf(site, a.Arg)
		if was == now {
			continue
		}
		nd, key, val := tn, "touch", fmt.Sprintf("argument %d", a.Arg)
		if i := slices.IndexFunc(site.hints, func(h stages.Touch) bool { return h.Arg == a.Arg }); i >= 0 {
			nd, key, val = site.nodes[i], "touch."+site.names[i], site.nodes[i].Value
		}
		return l.errf(nd, key, val, "kernel %s: %s of argument %d here, %s at line %d; a kernel's touch is a property of its code, so every op that declares one must declare the same", k.Name, what(now), a.Arg, what(was), prev.line)
	}
	return nil
}

func (s *touchSite) Len() int { return len(s.hints) }

func (s *touchSite) Less(i, j int) bool { return s.hints[i].Arg < s.hints[j].Arg }

func (s *touchSite) Swap(i, j int) {
	s.hints[i], s.hints[j] = s.hints[j], s.hints[i]
	s.names[i], s.names[j] = s.names[j], s.names[i]
	s.nodes[i], s.nodes[j] = s.nodes[j], s.nodes[i]
}
