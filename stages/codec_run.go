package stages

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// EncodeRunImage encodes a run image into a new buffer.
func EncodeRunImage(img *RunImage) []byte { return AppendRunImage(nil, img) }

// AppendRunImage encodes img into dst's storage (dst's contents are
// discarded) and returns the image. A caller that ships one image per pass
// passes back the previous pass's buffer once the device has copied it, so a
// warm pass encodes in one pass over the image with no allocation.
func AppendRunImage(dst []byte, img *RunImage) []byte {
	w := writer{imagefmt.Writer{B: dst[:0]}}
	w.B = append(w.B, RunImageMagic...)
	w.U16(RunImageVersion)
	w.U16(runHeaderSize)
	w.U64(0) // content hash, set last
	w.U64(uint64(img.HeapBytes))
	w.U32(0) // total, set last
	nargs := len(img.Args)
	if img.narrow {
		nargs += img.NumBound()
	}
	w.U32(uint32(len(img.Tasks)))
	w.U32(uint32(nargs))
	w.U32(uint32(len(img.Scalars)))
	pool := img.Fanin
	if img.reduced() {
		pool = img.ship
	}
	w.U32(uint32(len(pool)))
	w.U32(uint32(len(img.Roots)))
	w.U32(uint32(len(img.Graphs)))
	for range rsCount {
		w.U32(0) // section offsets, set as each section starts
	}
	if len(w.B) != runHeaderSize {
		panic(fmt.Sprintf("stages: run image header is %d bytes, want %d", len(w.B), runHeaderSize))
	}
	w.mark(rsTasks)
	// bound counts a narrow image's boundary args before task i: an
	// ordinary task's args come after them in the args section.
	var bound uint32
	for i := range img.Tasks {
		t := &img.Tasks[i]
		args := t.Args
		if img.narrow {
			if t.Graph >= 0 {
				args.Off += img.argsBefore[t.Graph]
				bound += args.N
			} else {
				args.Off += bound
			}
		}
		fan, implied := t.Fanin, t.Implied
		if img.reduced() {
			fan = img.shipSpan[i]
			implied += t.Fanin.N - fan.N
		}
		w.runTask(t, args, fan, implied)
	}
	w.mark(rsArgs)
	if img.narrow {
		w.narrowArgs(img)
	} else {
		w.runArgs(img)
	}
	w.Pad8()
	w.mark(rsScalars)
	for _, s := range img.Scalars {
		w.U64(s)
	}
	w.mark(rsFanin)
	for _, f := range pool {
		w.U32(uint32(f))
	}
	w.mark(rsRoots)
	for i := range img.Roots {
		w.runRoot(&img.Roots[i])
	}
	w.mark(rsGraphs)
	for i := range img.Graphs {
		b := img.Graphs[i].Boundary
		if img.narrow {
			b.Off += img.argsBefore[i]
		}
		w.graphSubmission(&img.Graphs[i], b)
	}
	w.mark(rsEnd)
	binary.LittleEndian.PutUint32(w.B[runTotalOff:], uint32(len(w.B)))
	binary.LittleEndian.PutUint64(w.B[runHashOff:], imageHash(w.B, runHashOff))
	return w.B
}

// mark sets run image section sec's offset to the end of what is written.
func (w *writer) mark(sec int) {
	binary.LittleEndian.PutUint32(w.B[imagefmt.RunSectionsAt+4*sec:], uint32(len(w.B)))
}

// runTask writes a task descriptor whose args are at args in the args
// section and whose shipped fanin is fan, implied more edges dropped.
func (w *writer) runTask(t *TaskDesc, args, fan Span, implied uint32) {
	w.U8(uint8(t.Kind))
	fl := uint8(t.Launch) << 1 // TaskEarly, TaskSyncStart
	if t.Pred.Valid {
		fl |= imagefmt.TaskPredicated
	}
	if implied > 0 {
		fl |= imagefmt.TaskImplied
	}
	w.U8(fl)
	for k := 0; k < 3; k++ {
		w.Varint(int64(t.Kernel[k]))
	}
	w.Varint(int64(t.BlockNum))
	w.Uvarint(uint64(args.Off))
	w.Uvarint(uint64(args.N))
	w.Uvarint(uint64(t.Scalars.Off))
	w.Uvarint(uint64(t.Scalars.N))
	w.Uvarint(uint64(fan.Off))
	w.Uvarint(uint64(fan.N))
	if implied > 0 {
		w.Uvarint(uint64(implied))
	}
	w.Varint(int64(t.Graph))
	if t.Pred.Valid {
		w.U8(uint8(t.Pred.Op))
		w.view(&t.Pred.View)
		w.Varint(t.Pred.Index)
		w.Varint(t.Pred.Target)
	}
}

// runArgs writes the args section of an image that is not narrow (one
// decoded, or built by hand; narrowArgs writes the host's). A Graph
// submission's boundary travels as fixed-width (tag, root, offset) records:
// the rest of each view (dtype, shape, strides) is fixed by the
// Definition's boundary signature, which the host matched before replaying
// and the device holds. A warm pass is mostly boundaries (DSv4 full: 2,962
// of 3,113 args), and a fixed record is three stores where varints took a
// loop per field. Graph boundary spans come in increasing order; one that
// does not (a forged image) is sent with layouts.
func (w *writer) runArgs(img *RunImage) {
	args := img.Args
	a := 0
	for gi := range img.Graphs {
		b := img.Graphs[gi].Boundary
		lo, hi := max(int(b.Off), a), min(int(b.Off)+int(b.N), len(args))
		if hi <= lo {
			continue
		}
		for ; a < lo; a++ {
			w.U8(uint8(args[a].Tag))
			w.view(&args[a].View)
		}
		w.compactArgs(args[lo:hi])
		a = hi
	}
	for ; a < len(args); a++ {
		w.U8(uint8(args[a].Tag))
		w.view(&args[a].View)
	}
}

// narrowArgs writes a narrow image's args section: the same bytes as
// runArgs writes for the image with every boundary in Args, each Graph's
// records copied where its submission put it among the other tasks'
// arguments.
func (w *writer) narrowArgs(img *RunImage) {
	args := img.Args
	a := 0
	for gi := range img.Graphs {
		for at := int(img.argsBefore[gi]); a < at; a++ {
			w.U8(uint8(args[a].Tag))
			w.view(&args[a].View)
		}
		b := img.Graphs[gi].Boundary
		w.B = append(w.B, img.Bound[int(b.Off)*imagefmt.CompactArgSize:int(b.Off+b.N)*imagefmt.CompactArgSize]...)
	}
	for ; a < len(args); a++ {
		w.U8(uint8(args[a].Tag))
		w.view(&args[a].View)
	}
}

// compactArgs writes Graph boundary args as CompactArgSize-byte records.
func (w *writer) compactArgs(args []Arg) {
	n := len(w.B)
	w.B = slices.Grow(w.B, imagefmt.CompactArgSize*len(args))[:n+imagefmt.CompactArgSize*len(args)]
	b := w.B[n:]
	for i := range args {
		putBound(b, args[i].Tag, args[i].View.Root, args[i].View.Offset)
		b = b[imagefmt.CompactArgSize:]
	}
}

func (w *writer) runRoot(rt *RootDesc) {
	w.Varint(int64(rt.ID))
	w.dtypeFlags(rt.DType, rt.ManualDep)
	w.Uvarint(uint64(rt.Elems))
	w.Varint(int64(rt.Creator))
	w.Uvarint(rt.Addr)
}

// graphSubmission writes a Graph submission whose boundary is at boundary in
// the args section.
func (w *writer) graphSubmission(g *GraphSubmission, boundary Span) {
	w.Varint(int64(g.Task))
	w.U64(g.FullKey)
	w.U64(g.DefHash)
	w.Uvarint(uint64(boundary.Off))
	w.Uvarint(uint64(boundary.N))
	w.Uvarint(uint64(g.Scalars.Off))
	w.Uvarint(uint64(g.Scalars.N))
	w.Uvarint(g.HeapBase)
}

// DecodeRunImage verifies and decodes a run image. It checks every span and
// index inside the image (args, scalars and fanin spans inside their pools,
// fanin spans disjoint and in task order, fanin task ids and Graph indices
// in range, Graph boundaries disjoint, in Graph order and equal to their
// GRAPH task's args, and layout-less args exactly the boundary slots); the
// device checks the rest (topological order, roots, Definitions, boundaries).
func DecodeRunImage(b []byte) (*RunImage, error) {
	var d RunImageDecoder
	return d.decode(b, new(RunImage))
}

// RunImageDecoder decodes run images into storage it keeps from one image
// to the next: a device reads a new image every pass, and DSv4's warm full
// pass decodes to ~400 KB (its args are 112 bytes each in memory). The
// zero value is ready to use; it is not safe for concurrent use.
type RunImageDecoder struct {
	img     RunImage
	compact []bool
	before  []uint32
}

// Decode is DecodeRunImage into the decoder's storage: the image is valid
// until the next Decode.
func (d *RunImageDecoder) Decode(b []byte) (*RunImage, error) {
	return d.decode(b, &d.img)
}

func (d *RunImageDecoder) decode(b []byte, img *RunImage) (*RunImage, error) {
	if err := imagefmt.CheckHeader(b, RunImageMagic, RunImageVersion, runHeaderSize, runTotalOff, runHashOff, "run"); err != nil {
		return nil, err
	}
	if err := d.decodeRunImage(b, img); err != nil {
		return nil, err
	}
	return img, nil
}

// decodeRunImage decodes a run image whose header has been checked into a
// new RunImage.
func decodeRunImage(b []byte) (*RunImage, error) {
	var d RunImageDecoder
	img := new(RunImage)
	if err := d.decodeRunImage(b, img); err != nil {
		return nil, err
	}
	return img, nil
}

// zeroed is s with length n and every element zero, in s's storage when it
// has room (never nil: an empty pool decodes as empty, not absent).
func zeroed[T any](s []T, n int) []T {
	if s == nil || cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// decodeRunImage decodes a run image whose header has been checked, section
// by section, into img's storage.
func (d *RunImageDecoder) decodeRunImage(b []byte, img *RunImage) error {
	le := binary.LittleEndian
	img.HeapBytes = int64(le.Uint64(b[imagefmt.RunHeapAt:]))
	c, sec, err := runLayout(b, img.HeapBytes)
	if err != nil {
		return err
	}
	img.Tasks = zeroed(img.Tasks, c.nt)
	if err = c.tasks(b[sec[rsTasks]:sec[rsArgs]], img.Tasks); err != nil {
		return err
	}
	// compact[i] marks arg i as sent layout-less; graphs checks that these
	// are exactly the Graph boundary slots.
	img.Args, d.compact = zeroed(img.Args, c.na), zeroed(d.compact, c.na)
	if err = c.args(b[sec[rsArgs]:sec[rsScalars]], img.Args, d.compact); err != nil {
		return err
	}
	img.Scalars = zeroed(img.Scalars, c.ns)
	sb := b[sec[rsScalars]:]
	for i := range img.Scalars {
		img.Scalars[i] = le.Uint64(sb[8*i:])
	}
	img.Fanin = zeroed(img.Fanin, c.nf)
	fb := b[sec[rsFanin]:]
	for i := range img.Fanin {
		v := le.Uint32(fb[4*i:])
		img.Fanin[i] = TaskID(int32(v))
	}
	for i := range img.Tasks {
		s := img.Tasks[i].Fanin
		for _, f := range img.Fanin[s.Off : s.Off+s.N] {
			if f < 0 || int(f) >= c.nt {
				return badf("run image task %d fanin names task %d, which is not in the image (%d tasks)", i, f, c.nt)
			}
		}
	}
	img.Roots = zeroed(img.Roots, c.nr)
	if err = c.roots(b[sec[rsRoots]:sec[rsGraphs]], img.Roots); err != nil {
		return err
	}
	img.Graphs = zeroed(img.Graphs, c.ng)
	if err = c.graphs(b[sec[rsGraphs]:sec[rsEnd]], img.Graphs, img.Tasks, d.compact); err != nil {
		return err
	}
	d.before = zeroed(d.before, len(d.compact)+1)
	return checkOrdinaryArgs(img.Tasks, d.compact, d.before)
}

// runCounts is a run image's header counts.
type runCounts struct{ nt, na, ns, nf, nr, ng int }

// runLayout reads a run image's counts and section offsets and checks them
// against one another, before anything is allocated.
func runLayout(b []byte, heapBytes int64) (runCounts, []int, error) {
	le := binary.LittleEndian
	c := runCounts{
		nt: int(le.Uint32(b[imagefmt.RunTasksAt:])),
		na: int(le.Uint32(b[imagefmt.RunArgsAt:])),
		ns: int(le.Uint32(b[imagefmt.RunScalarsAt:])),
		nf: int(le.Uint32(b[imagefmt.RunFaninAt:])),
		nr: int(le.Uint32(b[imagefmt.RunRootsAt:])),
		ng: int(le.Uint32(b[imagefmt.RunGraphsAt:])),
	}
	if heapBytes < 0 {
		return c, nil, badf("run image heap bytes %d negative", heapBytes)
	}
	sec, err := imagefmt.Sections(b, imagefmt.RunSectionsAt, rsCount, runHeaderSize, "run")
	if err != nil {
		return c, nil, err
	}
	secLen := func(i int) int { return sec[i+1] - sec[i] }
	// Fixed-width sections have exactly their size; minimum record sizes
	// bound the other counts.
	if uint64(secLen(rsScalars)) != 8*uint64(c.ns) || uint64(secLen(rsFanin)) != 4*uint64(c.nf) ||
		c.nt*13 > secLen(rsTasks) || c.na*3 > secLen(rsArgs) || c.nr*6 > secLen(rsRoots) || c.ng*22 > secLen(rsGraphs) {
		return c, nil, badf("run image section sizes do not match its counts (%d tasks, %d args, %d scalars, %d fanin, %d roots, %d graphs)", c.nt, c.na, c.ns, c.nf, c.nr, c.ng)
	}
	return c, sec, nil
}

// tasks decodes the task descriptors, each span inside its pool.
func (c *runCounts) tasks(b []byte, tasks []TaskDesc) error {
	span := func(s Span, n int, what string, i int) error {
		if uint64(s.Off)+uint64(s.N) > uint64(n) {
			return badf("run image task %d %s [%d, +%d) exceed the pool of %d", i, what, s.Off, s.N, n)
		}
		return nil
	}
	var faninEnd uint32
	r := newReader(b, "task")
	for i := range tasks {
		t := &tasks[i]
		t.Kind = Kind(r.U8())
		fl := r.U8()
		for k := 0; k < 3; k++ {
			t.Kernel[k] = KernelID(r.Int32())
		}
		t.BlockNum = r.Int32()
		t.Args = Span{Off: r.Uint32(), N: r.Uint32()}
		t.Scalars = Span{Off: r.Uint32(), N: r.Uint32()}
		t.Fanin = Span{Off: r.Uint32(), N: r.Uint32()}
		if fl&imagefmt.TaskImplied != 0 {
			if t.Implied = r.Uint32(); t.Implied == 0 && r.Err == nil {
				return badf("run image task %d is flagged with implied edges and has none", i)
			}
		}
		t.Graph = r.Int32()
		if fl&imagefmt.TaskPredicated != 0 {
			t.Pred.Valid = true
			t.Pred.Op = PredOp(r.U8())
			r.view(&t.Pred.View)
			t.Pred.Index = r.Varint()
			t.Pred.Target = r.Varint()
		}
		if r.Err != nil {
			return r.Err
		}
		if fl&^(imagefmt.TaskPredicated|imagefmt.TaskEarly|imagefmt.TaskSyncStart|imagefmt.TaskImplied) != 0 {
			return badf("run image task %d has flags %d", i, fl)
		}
		t.Launch = Launch(fl>>1) & (LaunchEarly | LaunchSyncStart)
		if t.Kind < KindAIC || t.Kind > KindGraph {
			return badf("run image task %d has kind %d", i, t.Kind)
		}
		if t.Pred.Valid && !validPredOp(t.Pred.Op) {
			return badf("run image task %d predicate op %d", i, t.Pred.Op)
		}
		if err := span(t.Args, c.na, "args", i); err != nil {
			return err
		}
		if err := span(t.Scalars, c.ns, "scalars", i); err != nil {
			return err
		}
		if err := span(t.Fanin, c.nf, "fanin", i); err != nil {
			return err
		}
		// Fanin spans are disjoint and in task order, as the host appends
		// them: overlapping spans would count more edges than the pool
		// holds, and the device sizes its fanout CSR by the pool.
		if t.Fanin.N > 0 {
			if t.Fanin.Off < faninEnd {
				return badf("run image task %d fanin [%d, +%d) overlaps an earlier task's (which end at %d)", i, t.Fanin.Off, t.Fanin.N, faninEnd)
			}
			faninEnd = t.Fanin.Off + t.Fanin.N
		}
		if t.Graph < -1 || int(t.Graph) >= c.ng {
			return badf("run image task %d names graph submission %d of %d", i, t.Graph, c.ng)
		}
	}
	r.Done()
	if r.Err != nil {
		return r.Err
	}
	return nil
}

// args decodes the args section into zeroed args; compact[i] says arg i was
// sent as (root, offset) only, its layout left unset (DTypeInvalid): it is
// the Definition's.
func (c *runCounts) args(b []byte, args []Arg, compact []bool) error {
	r := newReader(b, "arg")
	for i := range args {
		a := &args[i]
		tag := r.U8()
		if tag&compactArg != 0 {
			a.View.Root = RootID(int32(r.U32()))
			a.View.Offset = int64(r.U64())
			compact[i] = true
		} else {
			r.view(&a.View)
		}
		a.Tag = Tag(tag &^ compactArg)
		if r.Err != nil {
			return r.Err
		}
		if !validTag(a.Tag) {
			return badf("run image arg %d has tag %d", i, a.Tag)
		}
	}
	// The args section may carry up to 7 bytes of alignment padding.
	if rest := len(r.B) - r.Off; rest > 7 {
		return badf("run image args section has %d trailing bytes", rest)
	}
	return nil
}

// roots decodes the roots the run creates.
func (c *runCounts) roots(b []byte, roots []RootDesc) error {
	r := newReader(b, "root")
	for i := range roots {
		rt := &roots[i]
		rt.ID = RootID(r.Int32())
		dt := r.U8()
		fl := r.U8()
		rt.Elems = r.Nonneg()
		rt.Creator = TaskID(r.Int32())
		rt.Addr = r.Uvarint()
		if r.Err != nil {
			return r.Err
		}
		if dt == 0 || int(dt) >= len(dtypeNames) || fl > imagefmt.RootManualDep {
			return badf("run image root %d has dtype %d flags %d", i, dt, fl)
		}
		rt.DType, rt.ManualDep = DType(dt), fl == imagefmt.RootManualDep
		if rt.Creator < NoTask || int(rt.Creator) >= c.nt {
			return badf("run image root %d has creator task %d of %d", i, rt.Creator, c.nt)
		}
	}
	r.Done()
	if r.Err != nil {
		return r.Err
	}
	return nil
}

// graphs decodes the Graph submissions, each pointing at a GRAPH task that
// points back, its boundary that task's args, and checks that the compact
// args are exactly the boundary slots.
func (c *runCounts) graphs(b []byte, graphs []GraphSubmission, tasks []TaskDesc, compact []bool) error {
	r := newReader(b, "graph")
	// Boundary spans come in Graph order and do not overlap, as the host
	// appends them (the encoder relies on it); boundEnd is where the last
	// one ended, walking the args from there.
	var boundEnd uint32
	for i := range graphs {
		g := &graphs[i]
		g.Task = TaskID(r.Int32())
		g.FullKey = r.U64()
		g.DefHash = r.U64()
		g.Boundary = Span{Off: r.Uint32(), N: r.Uint32()}
		g.Scalars = Span{Off: r.Uint32(), N: r.Uint32()}
		g.HeapBase = r.Uvarint()
		if r.Err != nil {
			return r.Err
		}
		if g.Task < 0 || int(g.Task) >= c.nt || tasks[g.Task].Graph != int32(i) {
			return badf("run image graph submission %d names task %d, whose descriptor does not point back to it", i, g.Task)
		}
		if uint64(g.Boundary.Off)+uint64(g.Boundary.N) > uint64(c.na) || uint64(g.Scalars.Off)+uint64(g.Scalars.N) > uint64(c.ns) {
			return badf("run image graph submission %d boundary or scalars exceed their pools", i)
		}
		if t := &tasks[g.Task]; t.Args != g.Boundary {
			return badf("run image graph submission %d boundary [%d, +%d) is not its GRAPH task %d's args [%d, +%d)", i, g.Boundary.Off, g.Boundary.N, g.Task, t.Args.Off, t.Args.N)
		}
		if g.Boundary.N == 0 {
			continue
		}
		if g.Boundary.Off < boundEnd {
			return badf("run image graph submission %d boundary [%d, +%d) overlaps or precedes an earlier submission's (which end at %d)", i, g.Boundary.Off, g.Boundary.N, boundEnd)
		}
		// Every compact arg must be a Graph boundary slot (there is nothing
		// else to take its layout from), and every slot compact.
		for a := boundEnd; a < g.Boundary.Off+g.Boundary.N; a++ {
			if in := a >= g.Boundary.Off; compact[a] != in {
				return compactErr(a, in)
			}
		}
		boundEnd = g.Boundary.Off + g.Boundary.N
	}
	r.Done()
	if r.Err != nil {
		return r.Err
	}
	for a := int(boundEnd); a < c.na; a++ {
		if compact[a] {
			return compactErr(uint32(a), false)
		}
	}
	return nil
}

// checkOrdinaryArgs: an ordinary task cannot take a layout-less arg: it has
// no Definition to take the layout from. (GRAPH tasks' args are their
// boundaries, checked by graphs.) Arg spans may overlap, so compact args are
// counted by prefix sums rather than walking each span.
func checkOrdinaryArgs(tasks []TaskDesc, compact []bool, before []uint32) error {
	// before[a] counts the compact args before index a.
	for a, c := range compact {
		before[a+1] = before[a]
		if c {
			before[a+1]++
		}
	}
	for i := range tasks {
		t := &tasks[i]
		if t.Kind != KindGraph && before[t.Args.Off+t.Args.N] != before[t.Args.Off] {
			return badf("run image task %d (%s) takes a Graph boundary slot sent without a layout among its args [%d, +%d)", i, t.Kind, t.Args.Off, t.Args.N)
		}
	}
	return nil
}

func compactErr(arg uint32, inBoundary bool) error {
	if inBoundary {
		return badf("run image arg %d is a Graph boundary slot sent with a layout (want root and offset only)", arg)
	}
	return badf("run image arg %d is sent without a layout but is no Graph boundary slot", arg)
}

// RunImageHash computes a run image's content hash (the header's hash field
// read as zero); 0 if b is shorter than the field's end.
func RunImageHash(b []byte) uint64 {
	if len(b) < runHashOff+8 {
		return 0
	}
	return imageHash(b, runHashOff)
}
