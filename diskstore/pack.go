package diskstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// A pack file (packs/<name>.hbgp) holds the Definitions one batch stored,
// little-endian throughout:
//
//	header   16 bytes: magic "HBGP", pack format (u32), 8 zero bytes
//	records  one after the other, from offset 16, each:
//	           record header (recHeaderSize bytes):
//	             magic "HBGR", image format version (u16), model length
//	             (u16), key length (u16), signature length (u16), image
//	             length (u32), full_key (u64), content hash (u64), sum
//	             (u64: xxhash of the 32 bytes before it, the model and
//	             the key)
//	           the model, the key, the signature, the image
//	toc      per record: its offset (u64), then a copy of its header,
//	         model and key: Open reads a pack's entries from here without
//	         reading an image
//	footer   32 bytes: toc offset (u64), record count (u32), toc length
//	         (u32), xxhash of the toc (u64), magic "HBGPEND1"
//
// The records tile the file from the header to the toc with no gap, and the
// toc's copies must equal the records' own headers: a reader checks both
// before it uses an offset, so no length a damaged or forged file claims
// reaches past the file or into another record. The image carries its own
// content hash, which every load checks, so the record's sum need not cover
// it.
//
// The signature is the recorder's (package peer/defsig's encoding of its
// signature and certificate), kept beside an image fetched from another
// node whose signature verified, so that a later load, or this node serving
// the image, knows who vouched for it; a record of an image recorded here
// has none (length 0). The sum does not cover it either: it verifies on its
// own, against the image's content hash, and one that does not is reported
// (Verify's Signed, hbgrun store verify) and not passed on, without making
// the image bad. Pack format 1 (hbg before signatures) had the signature
// length as 2 zero bytes, so its packs read as format 2's with no signature.
const (
	packMagic     = "HBGP"
	packFormat    = 2
	packFormatV1  = 1
	packHeader    = 16
	recMagic      = "HBGR"
	recHeaderSize = 40
	footMagic     = "HBGPEND1"
	footSize      = 32
	packSuffix    = ".hbgp"
	// maxTOC bounds the table of contents a reader allocates: far beyond
	// what the largest pack a store writes (maxPackBytes) holds.
	maxTOC = 64 << 20
	// maxImageBytes bounds one image a reader allocates, whatever a table
	// of contents declares: a Definition of 10^5 nodes is a few MB, and a
	// pack's lengths are checked only against the file's size, which a
	// sparse file makes as large as it likes.
	maxImageBytes = 256 << 20
	// sparseSlack is the size below which a pack is never called sparse
	// (a small file's last block may be partly empty).
	sparseSlack = 1 << 20
)

// packEntry is one record of a pack, as its table of contents says.
type packEntry struct {
	fullKey, hash uint64
	off           int64  // the record's offset in the pack
	imageLen      uint32 // the image's length
	sum           uint64 // the record header's sum
	version       uint16
	sigLen        uint16 // the signature's length (0: unsigned)
	model, key    string
}

// recLen is the record's whole length.
func (e *packEntry) recLen() int64 { return e.imageOff() + int64(e.imageLen) }

// sigOff is where the signature starts within the record, after the
// header, model and key.
func (e *packEntry) sigOff() int64 { return recHeaderSize + int64(len(e.model)) + int64(len(e.key)) }

// imageOff is where the image starts within the record.
func (e *packEntry) imageOff() int64 { return e.sigOff() + int64(e.sigLen) }

// splitRecord checks a record read whole (rec, e.recLen() bytes at e.off)
// against its table of contents entry e, and returns its signature and
// image, or why it is bad.
func splitRecord(rec []byte, e *packEntry) (sig, img []byte, reason string) {
	got, n, reason := parseRecordHeader(rec)
	switch {
	case reason != "":
		return nil, nil, reason
	case !sameRecord(&got, e) || int64(n) != e.sigOff() || int64(len(rec)) != e.recLen():
		return nil, nil, "differs from the pack's table of contents"
	}
	return rec[e.sigOff():e.imageOff():e.imageOff()], rec[e.imageOff():], ""
}

// appendRecordHeader appends the header of a record with these fields, its
// sum computed over the header's first 32 bytes, model and key.
func appendRecordHeader(b []byte, version uint16, model, key string, sigLen uint16, imageLen uint32, fullKey, hash uint64) []byte {
	start := len(b)
	b = append(b, recMagic...)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(model)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(key)))
	b = binary.LittleEndian.AppendUint16(b, sigLen)
	b = binary.LittleEndian.AppendUint32(b, imageLen)
	b = binary.LittleEndian.AppendUint64(b, fullKey)
	b = binary.LittleEndian.AppendUint64(b, hash)
	d := xxhash.New()
	_, _ = d.Write(b[start:])
	_, _ = d.WriteString(model)
	_, _ = d.WriteString(key)
	return binary.LittleEndian.AppendUint64(b, d.Sum64())
}

// parseRecordHeader reads a record header and the model and key after it
// from b (at least recHeaderSize bytes), checking its magic and sum. It
// returns the entry (off unset) and how many bytes of b the header, model
// and key take, or why they are bad.
func parseRecordHeader(b []byte) (packEntry, int, string) {
	if len(b) < recHeaderSize {
		return packEntry{}, 0, "record header cut short"
	}
	if string(b[:4]) != recMagic {
		return packEntry{}, 0, fmt.Sprintf("record magic %q, want %q", b[:4], recMagic)
	}
	ml, kl := int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint16(b[8:]))
	n := recHeaderSize + ml + kl
	if len(b) < n {
		return packEntry{}, 0, "record model and key cut short"
	}
	d := xxhash.New()
	_, _ = d.Write(b[:32])
	_, _ = d.Write(b[recHeaderSize:n])
	sum := binary.LittleEndian.Uint64(b[32:])
	if d.Sum64() != sum {
		return packEntry{}, 0, "record header sum does not verify"
	}
	return packEntry{
		version:  binary.LittleEndian.Uint16(b[4:]),
		sigLen:   binary.LittleEndian.Uint16(b[10:]),
		imageLen: binary.LittleEndian.Uint32(b[12:]),
		fullKey:  binary.LittleEndian.Uint64(b[16:]),
		hash:     binary.LittleEndian.Uint64(b[24:]),
		sum:      sum,
		model:    string(b[recHeaderSize : recHeaderSize+ml]),
		key:      string(b[recHeaderSize+ml : n]),
	}, n, ""
}

// sameRecord is whether a record's header (parsed from the record) is the
// one the toc copied.
func sameRecord(rec, toc *packEntry) bool {
	return rec.sum == toc.sum && rec.fullKey == toc.fullKey && rec.hash == toc.hash && rec.imageLen == toc.imageLen &&
		rec.sigLen == toc.sigLen && rec.version == toc.version && rec.model == toc.model && rec.key == toc.key
}

// packBuilder lays out one pack in memory: the records as items are added,
// the toc beside them, both joined with the footer by finish.
type packBuilder struct {
	buf, toc []byte
	n        int
	// entries are the records added, as the index holds them.
	entries []packEntry
}

func newPackBuilder(size int) *packBuilder {
	b := &packBuilder{buf: make([]byte, 0, size+footSize)}
	b.buf = append(b.buf, packMagic...)
	b.buf = binary.LittleEndian.AppendUint32(b.buf, packFormat)
	b.buf = append(b.buf, make([]byte, 8)...)
	return b
}

// add appends one record (sig at most math.MaxUint16 bytes).
func (b *packBuilder) add(version uint16, model, key string, sig, img []byte, fullKey, hash uint64) {
	off := len(b.buf)
	b.buf = appendRecordHeader(b.buf, version, model, key, uint16(len(sig)), uint32(len(img)), fullKey, hash)
	b.buf = append(b.buf, model...)
	b.buf = append(b.buf, key...)
	hdrEnd := len(b.buf)
	b.buf = append(b.buf, sig...)
	b.buf = append(b.buf, img...)
	b.toc = binary.LittleEndian.AppendUint64(b.toc, uint64(off))
	b.toc = append(b.toc, b.buf[off:hdrEnd]...)
	b.n++
	b.entries = append(b.entries, packEntry{fullKey: fullKey, hash: hash, off: int64(off), imageLen: uint32(len(img)),
		sum: binary.LittleEndian.Uint64(b.buf[off+32:]), version: version, sigLen: uint16(len(sig)), model: model, key: key})
}

// finish appends the toc and the footer and returns the pack's bytes.
func (b *packBuilder) finish() []byte {
	tocOff := len(b.buf)
	b.buf = append(b.buf, b.toc...)
	b.buf = binary.LittleEndian.AppendUint64(b.buf, uint64(tocOff))
	b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(b.n))
	b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(len(b.toc)))
	b.buf = binary.LittleEndian.AppendUint64(b.buf, xxhash.Sum64(b.toc))
	b.buf = append(b.buf, footMagic...)
	return b.buf
}

// recordSize is what an item adds to a pack: its record and its toc copy.
func recordSize(model, key string, sigLen, imageLen int) int {
	return 2*(recHeaderSize+len(model)+len(key)) + 8 + sigLen + imageLen
}

// parseFooter checks a pack's footer against the pack's size and returns
// where its toc is and how many records it lists.
func parseFooter(foot []byte, size int64) (tocOff int64, tocLen, count int, reason string) {
	if size < packHeader+footSize {
		return 0, 0, 0, fmt.Sprintf("%d bytes, too short for a pack", size)
	}
	if string(foot[24:32]) != footMagic {
		return 0, 0, 0, "no pack footer (not a pack, or cut short)"
	}
	tocOff = int64(binary.LittleEndian.Uint64(foot[0:]))
	count = int(binary.LittleEndian.Uint32(foot[8:]))
	tocLen = int(binary.LittleEndian.Uint32(foot[12:]))
	switch {
	case tocOff < packHeader || tocOff > size-footSize || tocOff+int64(tocLen)+footSize != size:
		return 0, 0, 0, fmt.Sprintf("footer places the table of contents at %d, %d bytes, in a pack of %d bytes", tocOff, tocLen, size)
	case tocLen > maxTOC:
		return 0, 0, 0, fmt.Sprintf("table of contents of %d bytes, more than a pack holds", tocLen)
	case count*(8+recHeaderSize) > tocLen:
		return 0, 0, 0, fmt.Sprintf("footer says %d records in a table of contents of %d bytes", count, tocLen)
	}
	return tocOff, tocLen, count, ""
}

// parseTOC reads a pack's toc (toc, whose footer gave tocOff, count and the
// toc's sum), checking that its records tile the pack from its header to
// the toc. intern shares the model strings of a pack's records.
func parseTOC(toc []byte, tocSum uint64, tocOff int64, count int, intern map[string]string) ([]packEntry, string) {
	if xxhash.Sum64(toc) != tocSum {
		return nil, "table of contents sum does not verify"
	}
	es := make([]packEntry, 0, count)
	next := int64(packHeader)
	for i := 0; i < count; i++ {
		if len(toc) < 8 {
			return nil, fmt.Sprintf("table of contents cut short at record %d of %d", i, count)
		}
		off := int64(binary.LittleEndian.Uint64(toc))
		e, n, reason := parseRecordHeader(toc[8:])
		if reason != "" {
			return nil, fmt.Sprintf("table of contents, record %d: %s", i, reason)
		}
		toc = toc[8+n:]
		e.off = off
		if e.imageLen > maxImageBytes {
			return nil, fmt.Sprintf("table of contents declares record %d's image as %d bytes, over the %d an image may have", i, e.imageLen, maxImageBytes)
		}
		if off != next || off+e.recLen() > tocOff {
			return nil, fmt.Sprintf("table of contents places record %d (%d bytes) at %d, want %d, before %d", i, e.recLen(), off, next, tocOff)
		}
		next = off + e.recLen()
		if m, ok := intern[e.model]; ok {
			e.model = m
		} else if intern != nil {
			intern[e.model] = e.model
		}
		es = append(es, e)
	}
	if len(toc) != 0 || next != tocOff {
		return nil, fmt.Sprintf("table of contents: %d bytes past its %d records, which end at %d of %d", len(toc), count, next, tocOff)
	}
	return es, ""
}

// readTOC reads the entries of the pack open as f, of size bytes, without
// reading an image: the footer and the toc (one read when the pack is small).
func readTOC(f rfile, size int64, intern map[string]string) ([]packEntry, string, error) {
	if size < packHeader+footSize {
		return nil, fmt.Sprintf("%d bytes, too short for a pack", size), nil
	}
	tail := min(size, 64<<10)
	b := make([]byte, tail)
	if err := f.readFullAt(b, size-tail); err != nil {
		return nil, "", err
	}
	head := b
	if tail < size {
		head = make([]byte, packHeader)
		if err := f.readFullAt(head, 0); err != nil {
			return nil, "", err
		}
	}
	if reason := checkPackHeader(head); reason != "" {
		return nil, reason, nil
	}
	if foreignFormat(head) {
		return nil, "", errForeign
	}
	tocOff, tocLen, count, reason := parseFooter(b[len(b)-footSize:], size)
	if reason != "" {
		return nil, reason, nil
	}
	tocSum := binary.LittleEndian.Uint64(b[len(b)-footSize+16:])
	var toc []byte
	if int64(tocLen)+footSize <= tail {
		toc = b[len(b)-footSize-tocLen : len(b)-footSize]
	} else {
		toc = make([]byte, tocLen)
		if err := f.readFullAt(toc, tocOff); err != nil {
			return nil, "", err
		}
	}
	es, reason := parseTOC(toc, tocSum, tocOff, count, intern)
	return es, reason, nil
}

// checkPackHeader checks a pack's magic.
func checkPackHeader(b []byte) string {
	if string(b[:4]) != packMagic {
		return fmt.Sprintf("pack magic %q, want %q", b[:4], packMagic)
	}
	return ""
}

// foreignFormat is a pack of another pack format: another hbg's, which this
// one neither reads nor calls bad (it is evicted by age as any pack is).
func foreignFormat(b []byte) bool {
	f := binary.LittleEndian.Uint32(b[4:])
	return f != packFormat && f != packFormatV1
}

// errForeign is a pack of another pack format (foreignFormat).
var errForeign = errors.New("a pack of another format")
