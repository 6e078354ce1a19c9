package stages

// HostWaiter is a Submitter that orders the host's own accesses to device
// data with the tasks: upstream's wait_for_tensor_ready, which
// get_tensor_data (consumers false) and set_tensor_data (consumers true)
// call before they touch the tensor. A Submitter that wraps another passes
// it on.
type HostWaiter interface {
	HostWait(v View, consumers bool) TaskID
}

var _ HostWaiter = (*OrdinaryPath)(nil)

// HostWait makes every task submitted after it wait for what the host
// waits for before it reads (or, with consumers, writes) view v: v's
// root's creator and the writers the TensorMap holds over v's region
// (upstream's Step A and Step B), and for a write every task that waits on
// one of those (their consumers: a write must not overtake a read). The
// host blocks until they are done, so upstream submits nothing after the
// wait before they are: here the wait is a dummy task whose deps they are
// (and the previous wait, so waits stay in order), and every later task,
// in every scope, waits on the latest wait. It returns the wait's task, or
// NoTask when there is nothing to wait for. The wait is no task of
// upstream's: a trace leaves it out (refwriter), and the device runs it as
// a dummy.
func (o *OrdinaryPath) HostWait(v View, consumers bool) TaskID {
	id := TaskID(len(o.img.Tasks))
	fs := &o.fs
	fs.Begin(id)
	fs.Add(o.meta(v.Root).creator)
	o.tm.Lookup(&v, false, fs)
	if consumers && len(fs.Out) > 0 {
		prod := append([]TaskID(nil), fs.Out...)
		first := prod[0]
		for _, p := range prod {
			first = min(first, p)
		}
		// Only a later task can wait on a producer.
		for t := first + 1; t < id; t++ {
			for _, f := range o.Fanin(t) {
				if containsTask(prod, f) {
					fs.Add(t)
					break
				}
			}
		}
	}
	if len(fs.Out) == 0 {
		return NoTask
	}
	deps := append([]TaskID(nil), fs.Out...)
	if o.barrier != NoTask {
		deps = append(deps, o.barrier)
	}
	// Submit resolves the wait's fanin (its deps; a dummy has no args)
	// and adds the previous wait, which deps hold already.
	b := o.Submit(&Task{Kind: KindDummy, Kernel: [3]KernelID{-1, -1, -1}, BlockNum: -1, Deps: deps})
	o.barrier = b
	o.hostWaits = append(o.hostWaits, b)
	return b
}

// IsHostWait reports whether task id is a HostWait's, not a task the
// orchestration submitted.
func (o *OrdinaryPath) IsHostWait(id TaskID) bool {
	for _, w := range o.hostWaits {
		if w == id {
			return true
		}
	}
	return false
}

// HostWaits is the waits of the run so far, in order.
func (o *OrdinaryPath) HostWaits() []TaskID { return o.hostWaits }

func containsTask(s []TaskID, t TaskID) bool {
	for _, x := range s {
		if x == t {
			return true
		}
	}
	return false
}

// afterBarrier adds the latest host wait to the fanin being built for a
// task: upstream submits it only after the wait returned.
func (o *OrdinaryPath) afterBarrier() {
	if o.barrier != NoTask {
		o.fs.Add(o.barrier)
	}
}
