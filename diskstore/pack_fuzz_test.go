package diskstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// FuzzReadPack: a pack file is what another process (or an attacker with
// the store directory) wrote, so neither ReadPack nor a store that finds
// it in packs/ may panic, hang or allocate past the file on any bytes. The
// input is a real pack of three Definitions with one byte changed (at, x);
// with resum, and a footer that still parses, the table of contents' sum
// is made right again, so that the change reaches the records. Every
// record ReadPack accepts lies inside the file, in order; a store that
// finds the pack lists, loads or rejects each entry (errors.Is
// ErrRejected), and verifies without error. Fuzz it with
// -fuzzminimizetime 0: each run opens a store, and minimizing an input
// takes minutes.
func FuzzReadPack(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(dir, DefaultMax)
	if err != nil {
		f.Fatal(err)
	}
	var items []Item
	for i := uint64(1); i <= 3; i++ {
		d, img := testDef(0x100+i, int(4*i))
		items = append(items, Item{Def: d, Image: img, Model: "m/full@1"})
	}
	if _, err := s.PutBatch(items); err != nil {
		f.Fatal(err)
	}
	s.Close()
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*"+packSuffix))
	if len(packs) != 1 {
		f.Fatalf("%d packs", len(packs))
	}
	seed, err := os.ReadFile(packs[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, uint16(0), byte(0), false)
	f.Add(seed, uint16(20), byte(0xff), true)
	f.Add(seed, uint16(len(seed)-30), byte(1), true)
	f.Fuzz(func(t *testing.T, pack []byte, at uint16, x byte, resum bool) {
		b := bytes.Clone(pack)
		if len(b) > 0 {
			b[int(at)%len(b)] ^= x
		}
		if resum && len(b) >= packHeader+footSize {
			foot := b[len(b)-footSize:]
			if tocOff, tocLen, _, reason := parseFooter(foot, int64(len(b))); reason == "" {
				binary.LittleEndian.PutUint64(foot[16:], xxhash.Sum64(b[tocOff:tocOff+int64(tocLen)]))
			}
		}
		if recs, err := ReadPack(b); err == nil {
			end := int64(packHeader)
			for i, r := range recs {
				if r.Offset != end || r.ImageOffset <= r.Offset || r.ImageOffset+int64(len(r.Image)) > int64(len(b)) {
					t.Fatalf("record %d at %d (image at %d, %d bytes), want %d, in %d bytes", i, r.Offset, r.ImageOffset, len(r.Image), end, len(b))
				}
				if r.Problem != "" {
					break // its length is the table's: the next record's offset is unchecked
				}
				end = r.ImageOffset + int64(len(r.Image))
			}
		}
		dir := t.TempDir()
		s, err := Open(dir, DefaultMax)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := os.WriteFile(filepath.Join(dir, "packs", "fuzz"+packSuffix), b, 0o644); err != nil {
			t.Fatal(err)
		}
		es, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			fk, err := strconv.ParseUint(e.FullKey, 16, 64)
			if err != nil {
				t.Fatalf("entry full_key %q: %v", e.FullKey, err)
			}
			switch l, err := s.Load(fk, ""); {
			case err == nil && l != nil:
				s.Unpin(fk)
			case err != nil && !errors.Is(err, ErrRejected):
				t.Fatalf("load %s: %v, want a rejection", e.FullKey, err)
			}
		}
		if _, err := s.Verify(); err != nil {
			t.Fatalf("verify: %v", err)
		}
	})
}
