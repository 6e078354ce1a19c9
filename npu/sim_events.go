package npu

// The event queue and the small queues the simulation is built on.

type evKind uint8

const (
	evBoot    evKind = iota // classification done: route the initially ready tasks
	evWake                  // agent a acts
	evCoreEnd               // the subtask on core a ends
)

type event struct {
	t    int64
	seq  uint64
	kind evKind
	a    int32
}

// eventHeap is a binary min-heap on (t, seq), without container/heap's
// interface boxing.
type eventHeap []event

func (e *event) less(o *event) bool { return e.t < o.t || (e.t == o.t && e.seq < o.seq) }

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].less(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q[r].less(&q[l]) {
			m = r
		}
		if !q[m].less(&q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// fifo is a queue of task (or instance, or core) numbers.
type fifo struct {
	q []int32
	h int
}

func (f *fifo) reset()         { f.q, f.h = f.q[:0], 0 }
func (f *fifo) push(x int32)   { f.q = append(f.q, x) }
func (f *fifo) len() int       { return len(f.q) - f.h }
func (f *fifo) peek() int32    { return f.q[f.h] }
func (f *fifo) pop() (x int32) { x = f.q[f.h]; f.h++; return x }
