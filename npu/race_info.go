package npu

import (
	"fmt"

	"github.com/hbg-dev/hbg/stages"
)

// TaskInfo names a device task for a person: the image task (the outer
// GRAPH task of a body node) and the node, the Definition's key for a
// node, and what ran.
type TaskInfo struct {
	Task TaskRef
	// Key is the Definition's key, for a body node.
	Key    string
	Kind   stages.Kind
	Kernel [3]stages.KernelID
	// KernelName is the name of the kernel the task ran (a MIX task's AIC
	// one), from the table the device was given; the core type where the
	// table has none (a dummy, an alloc, an unregistered kernel). A
	// person reads a race by its kernels: ids mean nothing to them.
	KernelName string
	// Op is the model file:line of the op that made the task, when the
	// host knows it (the device does not: actors fill it in).
	Op string
}

func (ti *TaskInfo) String() string {
	s := fmt.Sprintf("task %d", ti.Task.Task)
	if ti.Task.Node >= 0 {
		s += fmt.Sprintf(" (graph %q node %d)", ti.Key, ti.Task.Node)
	}
	if ti.Op != "" {
		s += " [" + ti.Op + "]"
	}
	if ti.KernelName != "" {
		s += " " + ti.KernelName
	}
	return s
}

// Segment is an element interval of a root at the end of a run, with one
// digest, and the task that last wrote it (Writer.Task.Task is -1 for
// contents no task wrote).
type Segment struct {
	Lo, Hi int64
	Digest uint64
	Writer TaskInfo
}

// taskInfo describes sim task ti (-1: none).
func (s *sim) taskInfo(ti int32) TaskInfo {
	if ti < 0 {
		return TaskInfo{Task: TaskRef{Task: stages.NoTask, Node: -1}}
	}
	t := &s.tasks[ti]
	info := TaskInfo{Task: TaskRef{Task: stages.TaskID(t.src), Node: t.node}, Kind: t.kind, Kernel: t.kern, KernelName: s.kernelName(t)}
	if t.node >= 0 {
		info.Key = s.p.insts[t.inst].def.key
	}
	return info
}

// kernelName is TaskInfo.KernelName of t.
func (s *sim) kernelName(t *dtask) string {
	k := t.kern[0]
	if t.kind == stages.KindAIV {
		k = t.kern[1]
	}
	if ks := s.dev.kernels; k >= 0 && int(k) < len(ks) && ks[k].Name != "" {
		return ks[k].Name
	}
	return t.kind.String()
}

// segments lists the output roots' segments, one allocation for all.
func (s *sim) segments(r *Result) {
	n := 0
	for i := range r.Outputs {
		n += len(s.objs[r.Outputs[i].Root].segs)
	}
	all := make([]Segment, 0, n)
	for i := range r.Outputs {
		o := &s.objs[r.Outputs[i].Root]
		from := len(all)
		for _, sg := range o.segs {
			all = append(all, Segment{Lo: sg.lo, Hi: sg.hi, Digest: sg.d, Writer: s.taskInfo(sg.w)})
		}
		r.Outputs[i].Segments = all[from:len(all):len(all)]
	}
}
