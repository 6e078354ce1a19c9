package imagefmt

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Magics and the versions this hbg writes and reads; a decoder refuses any
// other version.
const (
	DefinitionMagic   = "HBGD"
	RunImageMagic     = "HBGR"
	DefinitionVersion = 3 // 2: external dependency slots; 3: a node's launch flags
	RunImageVersion   = 4 // 2: Graph boundaries as (root, offset); 3: as fixed-width records; 4: a task's launch flags
)

// Fields every header starts with.
const (
	MagicAt      = 0 // [4]u8
	VersionAt    = 4 // u16
	HeaderSizeAt = 6 // u16
)

// Definition header: its size and its fields' offsets.
const (
	DefHeaderSize = 136

	DefFullKeyAt         = 8  // u64
	DefHashAt            = 16 // u64 content hash
	DefHeapAt            = 24 // i64 heap bytes
	DefTotalAt           = 32 // u32 image length
	DefNodesAt           = 36 // u32
	DefEdgesAt           = 40 // u32
	DefTensorsAt         = 44 // u32
	DefScalarsAt         = 48 // u32
	DefRootsAt           = 52 // u32 internal roots
	DefBoundaryAt        = 56 // u32 boundary tensors
	DefBoundaryScalarsAt = 60 // u32
	DefPredicatesAt      = 64 // u32
	DefKeyLenAt          = 68 // u32
	DefExtSlotsAt        = 72 // u32 external dependency slots
	DefExtWaitsAt        = 76 // u32
	DefSectionsAt        = 80 // u32[DefSecCount]
)

// Definition sections: indices into the header's section offset table, in
// the order the sections follow the header. DefSecEnd's offset is the
// image's length.
const (
	DefSecFaninOff = iota
	DefSecFaninIdx
	DefSecFanoutOff
	DefSecFanoutIdx
	DefSecExtOff
	DefSecExtIdx
	DefSecNodes
	DefSecTensors
	DefSecScalars
	DefSecRoots
	DefSecBoundary
	DefSecPredicates
	DefSecKey
	DefSecEnd
	DefSecCount
)

// DefSectionNames names the Definition sections, by index.
var DefSectionNames = [DefSecCount]string{
	"fanin_off", "fanin_idx", "fanout_off", "fanout_idx", "ext_off", "ext_idx",
	"nodes", "tensors", "scalars", "roots", "boundary", "predicates", "key", "end",
}

// Node record of a Definition: its size and its fields' offsets.
const (
	NodeRecordSize = 40

	NodeKindAt      = 0  // u8, then u8 launch flags and u16 implied
	NodeLaunchAt    = 1  // u8: LaunchEarly | LaunchSyncStart
	NodeImpliedAt   = 2  // u16: fanin edges the reduction dropped as implied
	NodeBlockNumAt  = 4  // i32
	NodeKernelAt    = 8  // i32[3]
	NodeTensorOffAt = 20 // u32
	NodeTensorNAt   = 24 // u32
	NodeScalarOffAt = 28 // u32
	NodeScalarNAt   = 32 // u32
	NodePredicateAt = 36 // u32, 0 = none, else 1-based
)

// Run image header: its size and its fields' offsets.
const (
	RunHeaderSize = 80

	RunHashAt       = 8  // u64 content hash
	RunHeapAt       = 16 // i64 heap bytes
	RunTotalAt      = 24 // u32 image length
	RunTasksAt      = 28 // u32
	RunArgsAt       = 32 // u32
	RunScalarsAt    = 36 // u32
	RunFaninAt      = 40 // u32
	RunRootsAt      = 44 // u32
	RunGraphsAt     = 48 // u32
	RunSectionsAt   = 52 // u32[RunSecCount]
	runHeaderFields = RunSectionsAt + 4*RunSecCount
)

// Run image sections: indices into the header's section offset table.
const (
	RunSecTasks = iota
	RunSecArgs
	RunSecScalars
	RunSecFanin
	RunSecRoots
	RunSecGraphs
	RunSecEnd
	RunSecCount
)

// RunSectionNames names the run image sections, by index.
var RunSectionNames = [RunSecCount]string{"tasks", "args", "scalars", "fanin", "roots", "graphs", "end"}

// Flag bits inside records.
const (
	// StridesFlag, or'd into a layout's ndims byte, says strides follow the
	// shape.
	StridesFlag = 0x80
	// ManualDepFlag, or'd into a layout's ndims byte, says the tensor is
	// manual_dep (upstream's ChipTensor::manual_dep on that descriptor).
	ManualDepFlag = 0x40
	// CompactArg, or'd into a run image arg's tag byte, marks a Graph
	// boundary arg sent as (root, offset) only, in a CompactArgSize-byte
	// record: the tag byte, u32 root, i64 offset.
	CompactArg     = 0x80
	CompactArgSize = 13
	// TaskPredicated, in a run image task's flags, says a predicate follows.
	TaskPredicated = 1
	// TaskEarly and TaskSyncStart, in a run image task's flags, are its
	// launch flags (stages.LaunchEarly, stages.LaunchSyncStart, shifted
	// past TaskPredicated).
	TaskEarly     = 2
	TaskSyncStart = 4
	// LaunchEarly and LaunchSyncStart are a Definition node's launch flags
	// byte (NodeLaunchAt); no other bit is set.
	LaunchEarly     = 1
	LaunchSyncStart = 2
	// TaskImplied, in a run image task's flags, says a uvarint follows the
	// fanin span: the edges the host's transitive reduction dropped from
	// the task as implied by its other edges (at least 1).
	TaskImplied = 8
	// RootManualDep, in a root's flags, marks a root of a manual scope.
	RootManualDep = 1
	// ScalarStatic and ScalarBoundary are a Definition scalar's source byte.
	ScalarStatic   = 0
	ScalarBoundary = 1
)

// The headers' sizes are the sums of their fields.
var (
	_ [DefHeaderSize - (DefSectionsAt + 4*DefSecCount)]struct{}
	_ [(DefSectionsAt + 4*DefSecCount) - DefHeaderSize]struct{}
	_ [RunHeaderSize - runHeaderFields]struct{}
	_ [runHeaderFields - RunHeaderSize]struct{}
)

// ErrBadImage is wrapped by every decode error.
var ErrBadImage = errors.New("bad image")

// Badf is an ErrBadImage error with a message.
func Badf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadImage, fmt.Sprintf(format, args...))
}

// Hash is an image's content hash: xxHash64 of b with the 8 bytes at off
// read as zero.
func Hash(b []byte, off int) uint64 {
	var zero [8]byte
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(b[:off])
	_, _ = d.Write(zero[:])
	_, _ = d.Write(b[off+8:])
	return d.Sum64()
}

// CheckHeader verifies magic, version, header size, total length and hash;
// what names the image in errors.
func CheckHeader(b []byte, magic string, version uint16, hsize int, totalOff, hashOff int, what string) error {
	if len(b) < hsize {
		return Badf("%s image of %d bytes is shorter than its %d-byte header", what, len(b), hsize)
	}
	if string(b[:4]) != magic {
		return Badf("%s image magic %q, want %q", what, b[:4], magic)
	}
	if v := binary.LittleEndian.Uint16(b[VersionAt:]); v != version {
		return Badf("%s image version %d, this device reads version %d", what, v, version)
	}
	if h := binary.LittleEndian.Uint16(b[HeaderSizeAt:]); int(h) != hsize {
		return Badf("%s image header size %d, want %d", what, h, hsize)
	}
	if t := binary.LittleEndian.Uint32(b[totalOff:]); uint64(t) != uint64(len(b)) {
		return Badf("%s image says %d bytes, got %d", what, t, len(b))
	}
	want := binary.LittleEndian.Uint64(b[hashOff:])
	if got := Hash(b, hashOff); got != want {
		return Badf("%s image content hash %#016x does not verify (computed %#016x)", what, want, got)
	}
	return nil
}

// Sections reads and checks the k section offsets at b[at:]: non-decreasing,
// inside [hsize, len(b)], the last equal to len(b).
func Sections(b []byte, at, k, hsize int, what string) ([]int, error) {
	s := make([]int, k)
	prev := hsize
	for i := 0; i < k; i++ {
		v := int(binary.LittleEndian.Uint32(b[at+4*i:]))
		if v < prev || v > len(b) {
			return nil, Badf("%s image section %d offset %d out of order or out of bounds (previous %d, image %d bytes)", what, i, v, prev, len(b))
		}
		s[i] = v
		prev = v
	}
	if s[k-1] != len(b) {
		return nil, Badf("%s image sections end at %d, image is %d bytes", what, s[k-1], len(b))
	}
	return s, nil
}
