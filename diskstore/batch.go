package diskstore

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/hbg-dev/hbg/stages"
)

// Item is one Definition to store: its image as stages.EncodeDefinition
// made it, and the orchestration identity (model) it belongs to.
type Item struct {
	Def   *stages.Definition
	Image []byte
	Model string
	// Signature, when set, is the recorder's signature of the image (an
	// image fetched from another node whose signature verified; package
	// peer/defsig's encoding), kept beside it. One over 64 KiB is not kept.
	Signature []byte
}

// sig is the signature the item's record keeps: none past a record's
// signature length field (a certificate chain that large is no node's).
func (it *Item) sig() []byte {
	if len(it.Signature) > math.MaxUint16 {
		return nil
	}
	return it.Signature
}

// maxPackBytes bounds a pack: one is built in memory whole, and an
// eviction removes it whole, so a pack is also at most an eighth of the
// store's limit (packLimit).
const maxPackBytes = 16 << 20

// packLimit is the most a pack of a store limited to max bytes holds (an
// item larger than that goes in a pack of its own).
func packLimit(max int64) int { return int(min(max/8, maxPackBytes)) }

// Put stores a built Definition (its image as stages.EncodeDefinition made
// it) under its full_key, then evicts least-recently-used packs if the
// store is over its limit. model is the orchestration identity. It is a
// PutBatch of one.
func (s *Store) Put(def *stages.Definition, img []byte, model string) error {
	_, err := s.PutBatch([]Item{{Def: def, Image: img, Model: model}})
	return err
}

// PutBatch stores items in one pack (or a few, past packLimit), durable
// together: one file written, synced and linked, and one directory sync,
// for the whole batch. A Definition the index holds already (this
// process's, or another's it has seen) is not written again. It returns
// how many items are stored (one stored already counts) and the failures,
// joined.
func (s *Store) PutBatch(items []Item) (int, error) {
	for _, it := range items {
		if it.Def.ContentHash == 0 || stages.DefinitionHash(it.Image) != it.Def.ContentHash {
			panic("diskstore: Put of an image that is not its Definition's")
		}
	}
	var errs []error
	if _, err := s.refresh(false); err != nil {
		errs = append(errs, err)
	}
	stored := 0
	var todo []Item
	seen := make(map[uint64]bool, len(items))
	s.mu.Lock()
	for _, it := range items {
		_, have := s.byKey[it.Def.FullKey]
		switch {
		case have || seen[it.Def.FullKey]:
			stored++
		case len(it.Model) > math.MaxUint16 || len(it.Def.Key) > math.MaxUint16 || len(it.Image) > maxImageBytes:
			errs = append(errs, fmt.Errorf("definition store: %q (model %.40q...): a model or key of more than 64 KiB, or an image of more than %d bytes, does not fit a pack record", it.Def.Key, it.Model, maxImageBytes))
		default:
			seen[it.Def.FullKey] = true
			todo = append(todo, it)
		}
	}
	s.mu.Unlock()
	limit := packLimit(s.max)
	for len(todo) > 0 {
		n, size := 0, 0
		for n < len(todo) {
			r := recordSize(todo[n].Model, todo[n].Def.Key, len(todo[n].sig()), len(todo[n].Image))
			if n > 0 && size+r > limit {
				break
			}
			size += r
			n++
		}
		if err := s.lock.rlock(); err != nil {
			return stored, errors.Join(append(errs, err)...)
		}
		p, err := s.writePack(todo[:n], size)
		s.lock.runlock()
		if err != nil {
			errs = append(errs, err)
		} else {
			stored += n
		}
		todo = todo[n:]
		s.mu.Lock()
		over := s.size > s.max
		s.mu.Unlock()
		if over && p != nil {
			// Whoever holds the lock is evicting already. Evicted to the
			// low-water mark, the next eviction is an eighth of the limit
			// away, so a store at its limit does not scan its packs for
			// every put.
			if _, err := s.evict(lowWater(s.max), false, false); err != nil && !errors.Is(err, errBusy) {
				errs = append(errs, err)
			}
		}
	}
	return stored, errors.Join(errs...)
}

// writePack writes items as one pack: built in memory, written under tmp/,
// synced, linked into packs/ under a new name, packs/ synced, the
// temporary name removed. The pack joins the index.
func (s *Store) writePack(items []Item, size int) (*pack, error) {
	b := newPackBuilder(packHeader + size)
	for _, it := range items {
		b.add(stages.DefinitionVersion, it.Model, it.Def.Key, it.sig(), it.Image, it.Def.FullKey, it.Def.ContentHash)
	}
	data := b.finish()
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "pack-*")
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	tmpRel := filepath.Join("tmp", filepath.Base(tmp.Name()))
	defer func() { _, _ = s.remove(tmpRel) }()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("definition store: writing a pack of %d Definitions: %w", len(items), err)
	}
	var name string
	for try := 0; ; try++ {
		name = newPackName()
		err = s.root.Link(tmpRel, filepath.Join("packs", name))
		if !errors.Is(err, fs.ErrExist) || try == 8 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	if err := syncDir(filepath.Join(s.dir, "packs")); err != nil {
		// Linked but maybe not durable: a caller must not count it stored.
		return nil, err
	}
	p := &pack{name: name, size: int64(len(data)), mod: time.Now(), entries: b.entries}
	s.mu.Lock()
	if s.packs[name] == nil {
		s.addLocked(p)
	}
	s.mu.Unlock()
	// The link changed packs/: noted here, on the writer's time, not by
	// the next miss of a pass.
	_, _ = s.refresh(false)
	return p, nil
}

// newPackName is a name no pack has: the time, which orders packs by when
// they were written, and 32 random bits, so that two processes writing in
// the same nanosecond differ (a link never replaces: the loser retries).
func newPackName() string {
	return hex16(uint64(time.Now().UnixNano())) + "-" + hex16(rand.Uint64())[8:] + packSuffix
}

// lowWater is what a put that finds the store over its limit max evicts
// down to.
func lowWater(max int64) int64 { return max - max/8 }
