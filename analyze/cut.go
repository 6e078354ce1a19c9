package analyze

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/hbg-dev/hbg/stages"
)

// CutMap is the step cut before every task of one kernel (the seed cut at
// hc_pre_rms): the segments between cuts, grouped into classes of the same
// operation sequence and arguments.
type CutMap struct {
	Step    *Step
	Kernel  string
	Prefix  int // tasks before the first cut
	Classes []*CutClass
}

// CutClass is segments with the same operation sequence (kernel code per
// position) and arguments (tag, root resolved to its entry tensor or to an
// allocation of the segment, layout, scalar count).
type CutClass struct {
	Segments []int // the segments' first task indices
	Tasks    int
	Head     string // the first kernels
	// Differs is what differs from class Against (1-based; 0: no earlier
	// class has its length), position by position.
	Against int
	Differs []string
}

type cutTask struct {
	kind    stages.Kind
	kernels [3]stages.KernelID
	args    []stages.Arg
	scalars int
	root0   stages.RootID // an alloc's first root
	nroots  int
}

// taskLog keeps every task of an expansion, for Cut.
type taskLog struct {
	o     *stages.OrdinaryPath
	tasks []cutTask
}

func (t *taskLog) NumRoots() int { return t.o.NumRoots() }
func (t *taskLog) Alloc(specs []stages.RootSpec) (stages.TaskID, stages.RootID) {
	id, r := t.o.Alloc(specs)
	t.tasks = append(t.tasks, cutTask{kind: stages.KindAlloc, kernels: [3]stages.KernelID{-1, -1, -1}, root0: r, nroots: len(specs)})
	return id, r
}
func (t *taskLog) Submit(tk *stages.Task) stages.TaskID {
	n := t.o.NumRoots()
	id := t.o.Submit(tk)
	t.tasks = append(t.tasks, cutTask{kind: tk.Kind, kernels: tk.Kernel, args: append([]stages.Arg(nil), tk.Args...), scalars: len(tk.Scalars), root0: stages.RootID(n), nroots: t.o.NumRoots() - n})
	return id
}
func (t *taskLog) ScopeBegin(mode stages.ScopeMode)        { t.o.ScopeBegin(mode) }
func (t *taskLog) ScopeEnd()                               { t.o.ScopeEnd() }
func (t *taskLog) Graph(c *stages.GraphCall) stages.TaskID { return t.o.Graph(c) }

// ErrUnknownKernel is Cut's answer to a kernel the model does not have: a
// user's mistake (the --cut flag), which the CLI reports as a usage error.
var ErrUnknownKernel = errors.New("the model has no kernel of that name or code")

// Cut maps st's step cut before every task whose kernel is named kernel
// (or has that code).
func Cut(st *Step, kernel string) (*CutMap, error) {
	hit := func(k stages.KernelID) bool {
		return k >= 0 && int(k) < len(st.Kernels) && (copyOf(st.Kernels[k].Name, kernel) || copyOf(st.Kernels[k].Code, kernel))
	}
	known := false
	for i := range st.Kernels {
		known = known || hit(stages.KernelID(i))
	}
	if !known {
		return nil, fmt.Errorf("--cut %s: %w", kernel, ErrUnknownKernel)
	}
	name := probeName(st.Model, "eager")
	if err := st.Model.AddForm(name, []byte("params: "+paramsYAML(st.Params, st.Setting)+"\n"), true); err != nil {
		return nil, err
	}
	log := &taskLog{o: stages.NewOrdinaryPath(st.Model.EntryRoots())}
	if err := st.Model.Run(log, name); err != nil {
		return nil, err
	}
	var cuts []int
	for i, t := range log.tasks {
		if hit(t.kernels[0]) || hit(t.kernels[1]) {
			cuts = append(cuts, i)
		}
	}
	cm := &CutMap{Step: st, Kernel: kernel}
	if len(cuts) == 0 {
		return cm, nil
	}
	cm.Prefix = cuts[0]
	nEntry := len(st.Model.EntryRoots())
	var reps [][][]string
	for j, from := range cuts {
		to := len(log.tasks)
		if j+1 < len(cuts) {
			to = cuts[j+1]
		}
		fp := segmentPrint(st, log.tasks[from:to], nEntry)
		placed := false
		for ci, rep := range reps {
			if samePrint(rep, fp) {
				cm.Classes[ci].Segments = append(cm.Classes[ci].Segments, from)
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		k := &CutClass{Segments: []int{from}, Tasks: to - from}
		var head []string
		for _, t := range log.tasks[from:min(to, from+3)] {
			head = append(head, st.kernelName(firstKernel(t.kernels)))
		}
		k.Head = strings.Join(head, ", ")
		// Compared with the first earlier class of its length: a segment
		// of another length is another operation sequence altogether.
		for ci, rep := range reps {
			if len(rep) == len(fp) {
				k.Against, k.Differs = ci+1, firstDiffs(rep, fp, maxDiffs)
				break
			}
		}
		reps = append(reps, fp)
		cm.Classes = append(cm.Classes, k)
	}
	return cm, nil
}

// copyOf: name is kernel or one of upstream's numbered copies of it
// (hc_pre_rms_3 of hc_pre_rms).
func copyOf(name, kernel string) bool {
	if name == kernel {
		return true
	}
	rest, ok := strings.CutPrefix(name, kernel+"_")
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func firstKernel(k [3]stages.KernelID) stages.KernelID {
	for _, x := range k {
		if x >= 0 {
			return x
		}
	}
	return -1
}

// segmentPrint is a segment's tasks, one line each: kernel codes, then each
// argument's tag, root (an entry tensor by name, an allocation of the
// segment by its order, or "outer" for one made before the segment) and
// layout, then the scalar count.
func segmentPrint(st *Step, tasks []cutTask, nEntry int) [][]string {
	local := map[stages.RootID]int{}
	out := make([][]string, len(tasks))
	for i, t := range tasks {
		var parts []string
		if t.kind == stages.KindAlloc {
			parts = append(parts, "alloc")
		} else {
			var ks []string
			for _, k := range t.kernels {
				if k >= 0 {
					ks = append(ks, st.kernelIdentity(k))
				}
			}
			parts = append(parts, "kernel "+strings.Join(ks, "+"))
		}
		for j, a := range t.args {
			root := "outer"
			switch r := a.View.Root; {
			case int(r) < nEntry:
				root = st.rootName(r)
			default:
				if l, ok := local[r]; ok {
					root = fmt.Sprintf("local %d", l)
				}
			}
			if a.Tag == stages.TagOutput {
				root = "new"
			}
			parts = append(parts, fmt.Sprintf("arg %d %s %s %s", j, a.Tag, root, layoutText(a.View)))
		}
		parts = append(parts, fmt.Sprintf("%d scalars", t.scalars))
		for r := 0; r < t.nroots; r++ {
			local[t.root0+stages.RootID(r)] = len(local)
		}
		out[i] = parts
	}
	return out
}

func samePrint(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// firstDiffs names the first positions where two segments differ: the
// task (by its place in the segment) and the part of it.
func firstDiffs(a, b [][]string, limit int) []string {
	var out []string
	if len(a) != len(b) {
		out = append(out, fmt.Sprintf("its length: %d tasks vs %d", len(a), len(b)))
	}
	for i := range min(len(a), len(b)) {
		if len(out) >= limit {
			break
		}
		if slices.Equal(a[i], b[i]) {
			continue
		}
		if a[i][0] != b[i][0] || len(a[i]) != len(b[i]) {
			out = append(out, fmt.Sprintf("task %d: %s vs %s", i, a[i][0], b[i][0]))
			continue
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				out = append(out, fmt.Sprintf("task %d (%s): %s vs %s", i, a[i][0], a[i][j], b[i][j]))
				break
			}
		}
	}
	return out
}

// WriteText prints the cut map.
func (cm *CutMap) WriteText(w io.Writer) error {
	st := cm.Step
	segs := 0
	for _, k := range cm.Classes {
		segs += len(k.Segments)
	}
	fmt.Fprintf(w, "model %s: a step of %d tasks cut before every %s: %d segments in %d classes (%d tasks before the first cut); program params %s\n",
		st.Model.Name, st.Tasks, cm.Kernel, segs, len(cm.Classes), cm.Prefix, st.Setting.Text(st.Params))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "class\toccurrences\ttasks\tfirst kernels\tfirst task of each")
	for i, k := range cm.Classes {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\n", i+1, len(k.Segments), k.Tasks, k.Head, joinInts(k.Segments))
	}
	tw.Flush()
	for i, k := range cm.Classes {
		for _, d := range k.Differs {
			fmt.Fprintf(w, "class %d differs from class %d at %s\n", i+1, k.Against, d)
		}
	}
	fmt.Fprintln(w, "(a cut segment is no block call: no form is proposed; without --cut the map is by block call)")
	return nil
}

// JSON is the cut map as JSON.
func (cm *CutMap) JSON() any {
	type class struct {
		Occurrences int      `json:"occurrences"`
		Tasks       int      `json:"tasks"`
		Head        string   `json:"first_kernels"`
		Segments    []int    `json:"first_tasks"`
		Against     int      `json:"compared_with_class,omitempty"`
		Differs     []string `json:"differs,omitempty"`
	}
	out := struct {
		Model   string  `json:"model"`
		Cut     string  `json:"cut"`
		Tasks   int     `json:"tasks"`
		Prefix  int     `json:"tasks_before_first_cut"`
		Classes []class `json:"classes"`
	}{Model: cm.Step.Model.Name, Cut: cm.Kernel, Tasks: cm.Step.Tasks, Prefix: cm.Prefix, Classes: []class{}}
	for _, k := range cm.Classes {
		out.Classes = append(out.Classes, class{len(k.Segments), k.Tasks, k.Head, k.Segments, k.Against, k.Differs})
	}
	return out
}
