// Package imagefmt is the byte layout of the two images hbg's host ships to
// its device: the Definition (one recorded Graph body, uploaded once per
// full_key as a shared device object, and the unit of the on-disk store) and
// the run image (one pass: its task descriptors and Graph submissions, copied
// in one piece). It owns the magics, versions, header field offsets, section
// indices, record flags, the content hash and the byte primitives both
// formats are written and read with. The encoders and decoders, which know
// hbg's data model, are in package stages (stages.EncodeDefinition,
// stages.DecodeDefinition, stages.DecodeDefinitionInto,
// stages.DecodeDefinitionHost, stages.EncodeRunImage, stages.AppendRunImage, stages.DecodeRunImage);
// `hbgrun describe FILE` prints either image as an annotated tree.
//
// # Common ground
//
// Both images are pointer-free (roots and tasks are named by index, never by
// host address), versioned and little-endian. Each is a fixed header (magic,
// u16 version, u16 header size, a 64-bit content hash, counts, section
// offsets) followed by sections, back to back, in the order of the section
// offset table. Fixed-width sections (CSR arrays, the node table, u64 scalar
// pools) are plain little-endian arrays. Variable-width records (tensor
// templates, views, roots, boundary slots, predicates, tasks) are written
// back to back with LEB128 varints:
//
//	uvarint   unsigned LEB128 (encoding/binary.AppendUvarint): 7 bits a
//	          byte, low group first, high bit set on all but the last byte
//	varint    a signed value zig-zag mapped ((x << 1) ^ (x >> 63)), then
//	          written as a uvarint (encoding/binary.AppendVarint)
//
// A layout (a tensor's dtype, rank, shape and strides) is
//
//	u8  dtype                 stages.DType: 1 bf16, 2 fp16, 3 fp32, 4 int8,
//	                          5 int32, 6 int64, 7 uint8, 8 uint32, 9 uint64
//	u8  ndims | flags         rank (0..stages.MaxDims); StridesFlag (0x80) set
//	                          when strides follow, ManualDepFlag (0x40) when
//	                          the descriptor is manual_dep
//	    [fields of the record that embeds the layout, e.g. slot and delta]
//	uvarint shape[ndims]
//	varint  strides[ndims]    only with StridesFlag; otherwise the strides are
//	                          the contiguous row-major strides of the shape
//
// so a rank-2 contiguous tensor template costs ~8-14 bytes instead of the
// ~100 of a fixed five-dimension layout.
//
// Content hash: xxHash64 (seed 0, github.com/cespare/xxhash/v2) of the whole
// image with the 8-byte hash field read as zero (Hash). A decoder checks the
// magic, the version, the header size, the total length, the hash, every
// section offset (non-decreasing, inside the image, the last equal to its
// length) and every index and span inside the image, and returns an error
// wrapping ErrBadImage (never panics) on bad bytes. Counts are checked
// against the bytes that carry them before anything is allocated, so a
// forged count cannot make a decoder allocate more than a small multiple of
// the input size. Images larger than 4 GiB are not representable (u32
// offsets); a Definition costs ~150-300 bytes per node, so that is tens of
// millions of nodes.
//
// # Definition image, version 3
//
// Magic "HBGD" (DefinitionMagic), version 3 (DefinitionVersion; version 2
// added the external dependency slots, version 3 a node's launch flags). Header, 136 bytes (DefHeaderSize);
// offsets in bytes, the Def*At constants:
//
//	 0  [4]u8  magic "HBGD"
//	 4  u16    version (3)
//	 6  u16    header size (136)
//	 8  u64    full_key: hash of the orchestration identity, the graph key
//	           and its construction values; what a replay looks it up by
//	16  u64    content_hash (Hash with this field read as zero)
//	24  i64    heap_bytes: the heap block one call needs for its internal roots
//	32  u32    total_bytes: the image's length
//	36  u32    nodes
//	40  u32    edges (fanin entries)
//	44  u32    tensor templates
//	48  u32    scalars
//	52  u32    internal roots
//	56  u32    boundary tensors (slots of the boundary signature)
//	60  u32    boundary scalars a call passes (at most 2^31-1)
//	64  u32    predicates
//	68  u32    key bytes
//	72  u32    external dependency slots
//	76  u32    external dependency waits (entries of the ext CSR)
//	80  u32    section offsets[14], from the image's start, in this order
//	           (the DefSec* indices): fanin_off, fanin_idx, fanout_off,
//	           fanout_idx, ext_off, ext_idx, nodes, tensors, scalars, roots,
//	           boundary, predicates, key, end (= total_bytes)
//
// Sections, in order:
//
//	fanin_off   u32[nodes+1]  CSR offsets into fanin_idx: 0, then running
//	                          totals, the last = edges
//	fanin_idx   u32[edges]    node i's producers at [off[i], off[i+1]);
//	                          every producer < its consumer (node order is
//	                          topological, so no cycle can be written)
//	fanout_off  u32[nodes+1]  the transpose of fanin: derived from it when
//	fanout_idx  u32[edges]    encoding, consumers ascending; a decoder
//	                          checks it is exactly the transpose
//	ext_off     u32[slots+1]  per external dependency slot j (the recorded
//	ext_idx     u32[waits]    call's GraphCall.ExtDeps[j]), the nodes whose
//	                          explicit dependencies named slot j's task,
//	                          strictly ascending, each < nodes; then 0-7 zero
//	                          bytes so the node table starts 8-aligned
//	nodes       40 B a node (NodeRecordSize), the Node* offsets:
//	              0 u8 kind (stages.Kind: 1 aic, 2 aiv, 3 mix, 4 dummy,
//	                5 alloc; never 6 graph: a body does not nest)
//	              1 u8 launch flags (LaunchEarly 1: set_allow_early_resolve,
//	                LaunchSyncStart 2: set_require_sync_start; no other bit)
//	              2 u16 implied: the node's fanin edges the host's
//	                transitive reduction dropped as implied by its others
//	                (counted, never resolved; 0 in an image shipped with
//	                every edge)
//	              4 i32 block_num
//	              8 i32 kernel[3] (AIC, AIV0, AIV1; -1 = none)
//	             20 u32 tensor_off, 24 u32 tensor_n   (into tensors)
//	             28 u32 scalar_off, 32 u32 scalar_n   (into scalars)
//	             36 u32 predicate: 0 = none, else a 1-based index into
//	                predicates (nodes with one number them in node order)
//	tensors     tensor template records, back to back:
//	              u8 tag | src<<4   tag (stages.Tag: 1 input, 2 output,
//	                                3 output_existing, 4 inout, 5 no_dep),
//	                                src (stages.SourceKind: 1 boundary
//	                                exact, 2 boundary view, 3 internal,
//	                                4 own output)
//	              layout with, between ndims and shape:
//	                uvarint slot    the boundary slot (src 1, 2) or the
//	                                internal root (src 3, 4)
//	                varint  delta   elements past the boundary view's offset
//	                                (src 2) or into the internal root (3, 4)
//	scalars     u8 0, uvarint value (static: baked into the Definition)
//	          | u8 1, uvarint slot  (a boundary scalar, patched at every
//	                                replay; the record-time value is not
//	                                stored)
//	roots       internal roots, each: u8 dtype, u8 flags (RootManualDep),
//	            uvarint elems, uvarint creator (node index), uvarint
//	            heap_offset (bytes from the call's heap base); each inside
//	            heap_bytes
//	boundary    the boundary signature, a slot each: u8 tag, layout with,
//	            between ndims and shape, uvarint alias_rep+1 (0 = none, else
//	            the first earlier slot viewing the same root, itself a
//	            representative) and varint 0 (reserved); then uvarint
//	            root_elems (the size of the root the slot views, which a
//	            replay may not change)
//	predicates  in node order: u8 op (stages.PredOp: 0 gt, 1 ge, 2 eq,
//	            3 ne, 4 lt, 5 le), a tensor template
//	            record (as above), varint index, varint target
//	key         the graph key's bytes (key bytes long, not terminated)
//
// # Run image, version 4
//
// Magic "HBGR" (RunImageMagic), version 4 (RunImageVersion; version 2 sent
// a Graph submission's boundary as (root, offset) pairs, version 3 sends
// them as fixed-width records instead of varints, version 4 carries a
// task's launch flags). Header, 80 bytes
// (RunHeaderSize); the Run*At constants:
//
//	 0  [4]u8  magic "HBGR"
//	 4  u16    version (4)
//	 6  u16    header size (80)
//	 8  u64    content_hash (Hash with this field read as zero)
//	16  i64    heap_bytes: the run heap's high-water mark (alloc roots and
//	           Graph heap blocks)
//	24  u32    total_bytes
//	28  u32    tasks
//	32  u32    args
//	36  u32    scalars
//	40  u32    fanin entries
//	44  u32    roots
//	48  u32    graph submissions
//	52  u32    section offsets[7] (the RunSec* indices): tasks, args,
//	           scalars, fanin, roots, graphs, end (= total_bytes)
//
// Sections, in order:
//
//	tasks    a task descriptor each, in submission order (task id = index):
//	           u8 kind (stages.Kind, 1..6: a 6 is an outer GRAPH task)
//	           u8 flags (TaskPredicated 1, TaskEarly 2, TaskSyncStart 4,
//	                    TaskImplied 8; no other bit)
//	           varint kernel[3], varint block_num
//	           uvarint args_off, args_n        (into args)
//	           uvarint scalars_off, scalars_n  (into scalars)
//	           uvarint fanin_off, fanin_n      (into fanin; spans disjoint
//	                                           and in task order; the
//	                                           edges the host ships)
//	           with TaskImplied: uvarint implied (>= 1), the edges the
//	             host's transitive reduction dropped as implied by the
//	             others (counted, never resolved)
//	           varint graph                    (into graphs; -1 unless GRAPH)
//	           with TaskPredicated: u8 op, a view, varint index, varint target
//	args     an argument each: u8 tag, then
//	           without CompactArg: a view: varint root (stages.RootID),
//	             varint offset (elements), layout (no fields between ndims
//	             and shape)
//	           with CompactArg (tag | 0x80): u32 root, i64 offset only, so
//	             the record is 13 bytes (CompactArgSize), unaligned.
//	             Exactly the args of Graph submissions' boundaries are sent
//	             so: the rest of the view (dtype, shape, strides) is fixed by
//	             the Definition's boundary signature, which the host matched
//	             before replaying and the device holds. A warm pass's args
//	             are mostly boundaries, written as three stores each.
//	         then 0-7 zero bytes so the scalars start 8-aligned
//	scalars  u64[scalars]
//	fanin    u32[fanin]: producer task ids (each < tasks)
//	roots    roots the run creates (alloc outputs, runtime-allocated kernel
//	         outputs; entry roots are registered once and not listed), each:
//	         varint id, u8 dtype, u8 flags (RootManualDep), uvarint elems,
//	         varint creator (task id, -1 = none), uvarint addr (device
//	         address the host assigned from the run's heap)
//	graphs   a Graph submission each (the patch of one Graph call), in the
//	         order of their GRAPH tasks:
//	           varint task      its GRAPH task, whose graph field names it back
//	           u64 full_key     the Definition it replays
//	           u64 def_hash     that Definition's content hash
//	           uvarint boundary_off, boundary_n  (into args: exactly its
//	                            GRAPH task's args, in the Definition's slot
//	                            order; spans disjoint and in Graph order)
//	           uvarint scalars_off, scalars_n    (into scalars: the call's
//	                            boundary scalar values)
//	           uvarint heap_base  device address of the call's heap block;
//	                            internal root r lives at heap_base +
//	                            roots[r].heap_offset of the Definition
//
// A decoder of the run image checks every span and index inside it; the
// device checks the rest (topological order, roots, that each Definition is
// uploaded and that each boundary fits its signature).
package imagefmt
