package diskstore

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"time"
)

// PackMagic is the first four bytes of a pack file.
const PackMagic = packMagic

// PackRecord is one record of a pack file as ReadPack found it: its entry
// and image, or why the record is bad (Problem; Image then nil).
type PackRecord struct {
	Entry Entry
	// Offset is the record's, ImageOffset its image's, in the pack.
	Offset, ImageOffset int64
	Image               []byte
	// Signature is the one kept beside the image (nil: none).
	Signature []byte
	Problem   string
}

// ReadPack reads a whole pack file's bytes (hbgrun describe): its records,
// each checked against the table of contents (an image's own checks are
// the caller's), or why the pack does not read.
func ReadPack(b []byte) ([]PackRecord, error) {
	if len(b) < packHeader+footSize {
		return nil, fmt.Errorf("%d bytes, too short for a pack", len(b))
	}
	if reason := checkPackHeader(b); reason != "" {
		return nil, fmt.Errorf("%s", reason)
	}
	if foreignFormat(b) {
		return nil, fmt.Errorf("pack format %d, this hbg reads %d", binary.LittleEndian.Uint32(b[4:]), packFormat)
	}
	foot := b[len(b)-footSize:]
	tocOff, tocLen, count, reason := parseFooter(foot, int64(len(b)))
	if reason != "" {
		return nil, fmt.Errorf("%s", reason)
	}
	es, reason := parseTOC(b[tocOff:tocOff+int64(tocLen)], binary.LittleEndian.Uint64(foot[16:]), tocOff, count, nil)
	if reason != "" {
		return nil, fmt.Errorf("%s", reason)
	}
	out := make([]PackRecord, len(es))
	p := &pack{}
	for i := range es {
		e := &es[i]
		r := PackRecord{Entry: entryOf(p, e, time.Time{}), Offset: e.off, ImageOffset: e.off + e.imageOff()}
		rec := b[e.off : e.off+e.recLen()]
		sig, img, reason := splitRecord(rec, e)
		if reason != "" {
			r.Problem = reason
		} else {
			r.Image = img
			if len(sig) > 0 {
				r.Signature = sig
			}
		}
		out[i] = r
	}
	return out, nil
}

// Image reads the image whose content hash is hash from the pack that
// holds it (an error wrapping fs.ErrNotExist when none does), its record
// checked against the pack's table of contents; the image's own checks
// are the caller's.
func (s *Store) Image(hash uint64) ([]byte, error) {
	if _, err := s.refresh(false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var p *pack
	var e packEntry
	for _, q := range s.packs {
		for i := range q.entries {
			if q.entries[i].hash == hash && loadable(&q.entries[i]) {
				p, e = q, q.entries[i]
				break
			}
		}
		if p != nil {
			break
		}
	}
	s.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("definition store: no image %016x: %w", hash, fs.ErrNotExist)
	}
	f, err := openFile(s.packDir + p.name)
	if err != nil {
		return nil, err
	}
	defer f.close()
	rec := make([]byte, e.recLen())
	if err := f.readFullAt(rec, e.off); err != nil {
		return nil, fmt.Errorf("definition store: pack %s: %w", p.name, err)
	}
	_, img, reason := splitRecord(rec, &e)
	if reason != "" {
		return nil, fmt.Errorf("definition store: pack %s, record of image %016x: %s", p.name, hash, reason)
	}
	return img, nil
}
