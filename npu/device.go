package npu

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// Refusals. Every error Die returns wraps one of these (or
// stages.ErrBadImage), and leaves the device as it was before the call: a
// refused request never half-applies, and the next request is served
// normally.
var (
	// ErrNoRunImage: Launch before any CopyRun (or after Reset).
	ErrNoRunImage = errors.New("npu: no run image copied")
	// ErrFanin: a task's fanin names a task that is not in the image, or a
	// later task (submission order must be topological).
	ErrFanin = errors.New("npu: bad fanin")
	// ErrCycle: the dependencies form a cycle.
	ErrCycle = errors.New("npu: dependency cycle")
	// ErrUnknownDefinition: a GRAPH task replays a Definition that was never
	// uploaded (or was dropped by Reset).
	ErrUnknownDefinition = errors.New("npu: Definition not uploaded")
	// ErrBoundaryMismatch: a GRAPH task's boundary does not match its
	// Definition's boundary signature.
	ErrBoundaryMismatch = errors.New("npu: boundary does not match the Definition's signature")
	// ErrInvalidImage: the run image or a Definition decodes but breaks a
	// device rule (unknown root, heap overlap, kernel slots, ...).
	ErrInvalidImage = errors.New("npu: invalid image")
	// ErrRaceWork: the race detector passed Config.MaxRaceWork steps
	// (a launch of tens of millions of unordered accesses): the launch
	// fails instead of taking minutes.
	ErrRaceWork = errors.New("npu: race detection past its bound")
)

// ObjectID names a shared device object (an uploaded Definition): its
// device address in the Definition region.
type ObjectID uint64

// defRegionBase is where Definition objects are placed in the device's
// address space (away from the run heap, which the host numbers from 0).
const defRegionBase = 1 << 40

// entryRegionBase is where entry roots are placed.
const entryRegionBase = 1 << 44

const objAlign = 512

func alignUp(n uint64) uint64 { return (n + objAlign - 1) &^ (objAlign - 1) }

// Stats is the device's memory and copy accounting.
type Stats struct {
	EntryRoots int
	// EntryBytes is the address space of the entry roots: addresses and
	// sizes only, never backed (DSv4: 42.7 GiB per rank).
	EntryBytes int64
	// DefinitionObjects and DefinitionBytes are the shared Definition
	// objects resident on the device.
	DefinitionObjects int
	DefinitionBytes   int64
	// Uploads counts Upload calls that succeeded; UploadHits those whose
	// content hash was already resident (the bytes crossed, no new object).
	Uploads    int
	UploadHits int
	// RunImageBytes is the resident run image.
	RunImageBytes int64
	// HeapBytes is the last launched run's heap (alloc roots and Graph heap
	// blocks; address space, like the entry roots), split by kind.
	HeapBytes      int64
	AllocRootBytes int64
	GraphHeapBytes int64
	// H2DBytes and H2DCopies count every host-to-device copy: each Upload
	// and each CopyRun (real bytes, really copied).
	H2DBytes  int64
	H2DCopies int
	Launches  int
	Refusals  int
	// Frees counts the objects freed (Free).
	Frees int
}

// Die is one rank's simulated a2a3 die. It is plain state: not safe for
// concurrent use (the device actor serializes its requests).
type Die struct {
	cfg       Config
	entries   []stages.Root
	entryInit []uint64
	kernels   []stages.Kernel
	defs      []*defObj
	byHash    map[uint64]*defObj // lookups only, never iterated
	nextDef   uint64
	run       []byte
	runGen    uint64
	// runTag is the sender's name for the resident run image (0: none or
	// unnamed): a patch applies only over the image it was made against.
	runTag uint64
	// runDec decodes each copied run image into storage reused launch
	// after launch: the plan made from one image is dropped (CopyRun,
	// Reset) before the next image is decoded over it.
	runDec  stages.RunImageDecoder
	plan    *plan
	planGen uint64
	sim     sim
	stats   Stats
	scratch stages.Definition // each object is read into it at its first launch
}

// New returns a device with cfg; zero fields take DefaultConfig values
// (Config.EnsureDefaults). It panics if the result does not Validate: a
// caller that takes a config from a user validates it first, as
// actors.Start does.
func New(cfg Config) *Die {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("npu.New: %v", err))
	}
	return &Die{cfg: cfg, byHash: map[uint64]*defObj{}, nextDef: defRegionBase}
}

// Config returns the device's configuration.
func (d *Die) Config() Config { return d.cfg }

// SetTimeline turns the per-core timeline on or off for later launches.
func (d *Die) SetTimeline(on bool) { d.cfg.Timeline = on }

// Stats returns the accounting so far.
func (d *Die) Stats() Stats {
	s := d.stats
	s.DefinitionObjects = len(d.defs)
	s.RunImageBytes = int64(len(d.run))
	return s
}

// RegisterEntry registers the entry roots once: root i takes RootID i
// (stages.NewOrdinaryPath numbers them the same way). Only addresses and sizes are
// kept; every entry root's contents start as the digest of its name at each
// launch. Registering again replaces the set.
func (d *Die) RegisterEntry(roots []stages.Root) {
	d.entries = append(d.entries[:0], roots...)
	d.entryInit = d.entryInit[:0]
	d.stats.EntryRoots = len(roots)
	d.stats.EntryBytes = 0
	for i := range roots {
		h := entryDigest(roots[i].Name)
		for _, v := range roots[i].Data {
			// Given contents are part of what a reader computes from.
			h = mix(h, uint64(v))
		}
		d.entryInit = append(d.entryInit, h)
		d.stats.EntryBytes += int64(alignUp(uint64(max(roots[i].Bytes(), 0))))
	}
	d.plan = nil
}

// EntryAddr is entry root i's device address (entry roots are laid out in
// registration order, 512-byte aligned, from a fixed base).
func (d *Die) EntryAddr(i int) uint64 {
	a := uint64(entryRegionBase)
	for j := 0; j < i && j < len(d.entries); j++ {
		a += alignUp(uint64(max(d.entries[j].Bytes(), 0)))
	}
	return a
}

// RegisterKernels installs the model's kernel table, indexed by KernelID:
// Code is hashed into every output digest, Core, Intensity and Touch feed
// the cost model. A KernelID beyond the table runs with
// code identity "kernel #id" and default intensity.
func (d *Die) RegisterKernels(ks []stages.Kernel) {
	d.kernels = append(d.kernels[:0], ks...)
	d.plan = nil
}

// Upload copies a Definition image, checks its header and content hash,
// and keeps it as a shared device object. Uploading a content hash already
// resident returns the existing object (the copy is still counted: the
// bytes crossed).
func (d *Die) Upload(image []byte) (ObjectID, error) {
	h := stages.DefinitionHash(image)
	if o, ok := d.byHash[h]; ok && string(o.image) == string(image) {
		o.refs++
		d.stats.Uploads++
		d.stats.UploadHits++
		d.stats.H2DBytes += int64(len(image))
		d.stats.H2DCopies++
		return o.id, nil
	}
	// Upload is the H2D copy and the header's checks (magic, version,
	// length, content hash); the device reads the image's records the first
	// time a launch replays it (materialize), as a device's scheduler reads
	// an uploaded object in place when it first expands a GRAPH task, so a
	// Definition the host loaded from its store costs the control plane a
	// copy, not a decode. A record that does not decode then refuses that
	// launch, naming the Definition.
	if err := imagefmt.CheckHeader(image, stages.DefinitionMagic, stages.DefinitionVersion,
		imagefmt.DefHeaderSize, imagefmt.DefTotalAt, imagefmt.DefHashAt, "Definition"); err != nil {
		d.stats.Refusals++
		return 0, fmt.Errorf("npu: upload refused: %w", err)
	}
	o := &defObj{hash: h, refs: 1}
	o.image = append([]byte(nil), image...) // the H2D copy
	o.id = ObjectID(d.nextDef)
	d.nextDef += alignUp(uint64(len(image)))
	d.defs = append(d.defs, o)
	d.byHash[o.hash] = o
	d.stats.Uploads++
	d.stats.DefinitionBytes += int64(len(image))
	d.stats.H2DBytes += int64(len(image))
	d.stats.H2DCopies++
	d.plan = nil
	return o.id, nil
}

// materialize reads o's records into the device's narrow form, once, at
// the first launch that replays it: each tensor template as it is decoded,
// the rest into a scratch Definition reused from one object to the next
// (defObj copies what it keeps). An image that does not decode, or breaks
// the device's rules, stays refused for every launch.
func (d *Die) materialize(o *defObj) error {
	if o.ready || o.err != nil {
		return o.err
	}
	def := &d.scratch
	var tensors []devTensor
	err := stages.DecodeDefinitionFunc(o.image, def, func(t *stages.TensorRef, i, n int) {
		if tensors == nil {
			tensors = make([]devTensor, n)
		}
		tensors[i] = newDevTensor(t)
	})
	if err == nil && def.Nested() {
		// A nested Definition's own image refers to its children: the
		// device runs only flattenings (stages.Flatten), never half a step.
		err = fmt.Errorf("%w: a nested Definition (it refers to %d child Definitions by hash) uploaded unflattened", stages.ErrBadImage, len(def.Children()))
	}
	if err == nil {
		var m *defObj
		if m, err = newDefObj(def, tensors); err == nil {
			err = d.checkCohorts(m)
		}
		if err == nil {
			m.id, m.image = o.id, o.image
			*o = *m
			o.ready = true
			return nil
		}
		err = fmt.Errorf("Definition %q: %w", def.Key, err)
	}
	d.stats.Refusals++
	o.err = err
	return err
}

// kernelSlotsOK reports whether a task's kernel slots fit its kind: an AIC
// task uses slot 0, an AIV task slot 1 (or 2: AIV1 alone), a MIX task two or more of its
// three (upstream's ActiveMask::to_shape: AIC + AIV0, AIV0 + AIV1 without
// an AIC, or all three; a MIX task naming AIC and AIV0 only runs the AIV0
// kernel on the second AIV too), and dummy, alloc and GRAPH tasks none.
// A MIX block holds its whole cluster, whichever slots it names.
func kernelSlotsOK(k stages.Kind, ks [3]stages.KernelID) bool {
	switch k {
	case stages.KindAIC:
		return ks[0] >= 0
	case stages.KindAIV:
		return ks[1] >= 0 || ks[2] >= 0
	case stages.KindMIX:
		n := 0
		for _, x := range ks {
			if x >= 0 {
				n++
			}
		}
		return n >= 2
	}
	return true
}

// aivSlot is the kernel slots the simulator runs a task by: an AIV task
// whose kernel is in slot 2 (upstream's MixedKernels with AIV1 alone) runs
// it as any AIV task does, from slot 1.
func aivSlot(k stages.Kind, ks [3]stages.KernelID) [3]stages.KernelID {
	if k == stages.KindAIV && ks[1] < 0 {
		ks[1], ks[2] = ks[2], -1
	}
	return ks
}

// maxBlockNum bounds a task's SPMD width (upstream: block_num × cores per
// block must fit total_required_subtasks, an int16).
const maxBlockNum = 1<<15 - 1

// CopyRun copies the run image to the device (one H2D copy of real bytes).
// It is checked when launched.
func (d *Die) CopyRun(image []byte) error {
	if len(image) == 0 {
		d.stats.Refusals++
		return fmt.Errorf("%w: empty run image", ErrNoRunImage)
	}
	d.run = append(d.run[:0], image...)
	d.runGen++
	d.runTag = 0
	d.plan = nil
	d.stats.H2DBytes += int64(len(image))
	d.stats.H2DCopies++
	return nil
}

// PatchRun brings the resident run image to image, naming it tag. When the
// resident image is the one named base (and of image's length), only the
// changed ranges are copied, and an image with none changed keeps the
// launch plan already made from it; otherwise the whole image is copied.
// sent is the bytes that crossed. A range outside image is the sender's
// bug: PatchRun panics.
func (d *Die) PatchRun(image []byte, tag, base uint64, changed []stages.ImageRange) (sent int, err error) {
	if base == 0 || base != d.runTag || len(d.run) != len(image) || len(image) == 0 {
		if err := d.CopyRun(image); err != nil {
			return 0, err
		}
		d.runTag = tag
		return len(image), nil
	}
	for _, r := range changed {
		copy(d.run[r.Off:r.Off+r.Len], image[r.Off:r.Off+r.Len])
		sent += r.Len
	}
	d.runTag = tag
	d.stats.H2DCopies += len(changed)
	d.stats.H2DBytes += int64(sent)
	if len(changed) > 0 {
		d.runGen++
		d.plan = nil
	}
	return sent, nil
}

// Launch decodes and checks the resident run image, simulates it and
// returns the run's result. A refused launch changes nothing; the resident
// image stays (a later CopyRun replaces it).
func (d *Die) Launch() (*Result, error) {
	if len(d.run) == 0 {
		d.stats.Refusals++
		return nil, ErrNoRunImage
	}
	if d.plan == nil || d.planGen != d.runGen {
		img, err := d.runDec.Decode(d.run)
		if err != nil {
			d.stats.Refusals++
			return nil, fmt.Errorf("npu: launch refused: %w", err)
		}
		p, err := d.check(img)
		if err != nil {
			d.stats.Refusals++
			return nil, fmt.Errorf("npu: launch refused: %w", err)
		}
		d.plan, d.planGen = p, d.runGen
	}
	p := d.plan
	d.stats.HeapBytes = p.img.HeapBytes
	d.stats.AllocRootBytes = p.allocBytes
	d.stats.GraphHeapBytes = p.graphBytes
	res, err := d.sim.run(d, p)
	if err != nil {
		d.stats.Refusals++
		return nil, err
	}
	d.stats.Launches++
	return res, nil
}

// Free drops one upload of the Definition object of content hash h (a
// host's residency budget evicted it); the object goes once every upload
// of it is freed, and its bytes leave DefinitionBytes. It reports whether
// the object went. A launch after that which replays it is refused, as
// one of a Definition never uploaded.
func (d *Die) Free(h uint64) bool {
	o := d.byHash[h]
	if o == nil {
		return false
	}
	if o.refs--; o.refs > 0 {
		return false
	}
	delete(d.byHash, h)
	if i := slices.Index(d.defs, o); i >= 0 {
		d.defs = slices.Delete(d.defs, i, i+1)
	}
	d.stats.DefinitionBytes -= int64(len(o.image))
	d.stats.Frees++
	d.plan = nil
	return true
}

// Reset drops every Definition object and the run image and clears the
// copy counters; the entry roots and the kernel table stay registered (they
// describe the model, not a run).
func (d *Die) Reset() {
	d.defs = nil
	clear(d.byHash)
	d.nextDef = defRegionBase
	d.run = d.run[:0]
	d.runGen++
	d.runTag = 0
	d.plan = nil
	entries, eb := d.stats.EntryRoots, d.stats.EntryBytes
	d.stats = Stats{EntryRoots: entries, EntryBytes: eb}
}

// checkCohorts refuses a Definition with a sync_start node wider than the
// die: its blocks, which start together, could never all find a core.
func (d *Die) checkCohorts(o *defObj) error {
	for i := range o.nodes {
		nd := &o.nodes[i]
		if nd.launch&stages.LaunchSyncStart != 0 && max(nd.blockNum, 1) > syncCapacity(&d.cfg, nd.kind) {
			return fmt.Errorf("%w: node %d is sync_start with block_num %d: its blocks start together, and the die has %d %s slots", ErrInvalidImage, i, nd.blockNum, syncCapacity(&d.cfg, nd.kind), nd.kind)
		}
	}
	return nil
}
