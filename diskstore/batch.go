package diskstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hbg-dev/hbg/stages"
)

// Item is one Definition to store: its image as stages.EncodeDefinition
// made it, and the orchestration identity (model) it belongs to.
type Item struct {
	Def   *stages.Definition
	Image []byte
	Model string
}

// maxBatch bounds the files one step of a batch holds open.
const maxBatch = 256

// Put stores a built Definition (its image as stages.EncodeDefinition made
// it) under its full_key, then evicts least-recently-used entries if the
// store is over its limit. model is the orchestration identity.
func (s *Store) Put(def *stages.Definition, img []byte, model string) error {
	_, err := s.PutBatch([]Item{{Def: def, Image: img, Model: model}})
	return err
}

// PutBatch stores items as Put stores each, with the same atomicity and
// durability, but makes them durable together: a store written one
// Definition at a time pays four syncs per Definition (its image, objects/,
// its entry, index/), and a cold pass of 10^4 new keys spent 55 s on them.
// It returns how many items are stored (one stored already counts) and
// the failures, joined; a failed item leaves at most an orphan image.
func (s *Store) PutBatch(items []Item) (int, error) {
	for _, it := range items {
		if it.Def.ContentHash == 0 || stages.DefinitionHash(it.Image) != it.Def.ContentHash {
			panic("diskstore: Put of an image that is not its Definition's")
		}
	}
	stored := 0
	var errs []error
	for len(items) > 0 {
		n := min(len(items), maxBatch)
		if err := s.lock.RLock(); err != nil {
			return stored, fmt.Errorf("definition store: %w", err)
		}
		added, ok, err := s.putBatch(items[:n])
		_ = s.lock.Unlock()
		items = items[n:]
		stored += ok
		if err != nil {
			errs = append(errs, err)
		}
		s.mu.Lock()
		s.size += added
		over := s.size > s.max
		s.mu.Unlock()
		if over {
			// Whoever holds the lock is evicting already. An eviction
			// scans the whole index: evicted to the low-water mark, the
			// next one is an eighth of the limit away, so a store at its
			// limit does not scan its 10^5 entries for every put.
			if _, err := s.evict(lowWater(s.max), false); err != nil && !errors.Is(err, errBusy) {
				errs = append(errs, err)
			}
		}
	}
	return stored, errors.Join(errs...)
}

// staged is one file of a batch written under tmp/, to be linked at path.
type staged struct {
	f         *os.File
	tmp, path string
	n         int64
	err       error
}

// putBatch stores up to maxBatch items: their new images, then their
// entries, each set written, synced, linked and its directory fsynced.
func (s *Store) putBatch(items []Item) (added int64, stored int, err error) {
	var files []*staged
	defer func() {
		for _, f := range files {
			if f.f != nil {
				_ = f.f.Close()
			}
			if f.tmp != "" {
				_, _ = s.remove(f.tmp)
			}
		}
	}()
	failed := make([]error, len(items))
	// Images: each new one once, however many items name it.
	objOf := make([]*staged, len(items))
	byPath := map[string]*staged{}
	var objs []*staged
	for i, it := range items {
		obj := s.objectPath(hex16(it.Def.ContentHash))
		if st := byPath[obj]; st != nil {
			objOf[i] = st
			continue
		}
		have, err := readRegular(obj)
		switch {
		case err == nil && !bytes.Equal(have, it.Image):
			// Damaged on disk, and left here by an entry that lost its
			// index (a load moves aside only an index it cannot read; a
			// missing one is a miss). A link never replaces: moved aside,
			// or the entry written next would point at it and be rejected
			// again.
			s.reject(it.Def.FullKey, "", obj)
			fallthrough
		case errors.Is(err, fs.ErrNotExist):
			st := s.stage(obj, it.Image)
			files = append(files, st)
			objs = append(objs, st)
			byPath[obj], objOf[i] = st, st
		case err != nil:
			failed[i] = fmt.Errorf("definition store: %w", err)
		}
	}
	added += s.commit(objs, s.objectDir)
	// Entries, once their images are in place for good.
	var ents []*staged
	entOf := make([]*staged, len(items))
	for i, it := range items {
		if failed[i] == nil && objOf[i] != nil && objOf[i].err != nil {
			failed[i] = objOf[i].err
		}
		if failed[i] != nil {
			continue
		}
		e := Entry{Format: entryFormat, FullKey: hex16(it.Def.FullKey), Hash: hex16(it.Def.ContentHash), Bytes: int64(len(it.Image)),
			Version: stages.DefinitionVersion, Model: it.Model, Key: it.Def.Key}
		data, err := json.Marshal(e)
		if err != nil {
			panic(err) // an Entry always marshals
		}
		st := s.stage(s.indexPath(it.Def.FullKey), append(data, '\n'))
		files = append(files, st)
		ents = append(ents, st)
		entOf[i] = st
	}
	added += s.commit(ents, s.indexDir)
	var errs []error
	for i := range items {
		if failed[i] == nil && entOf[i] != nil {
			failed[i] = entOf[i].err
		}
		if failed[i] == nil {
			stored++
		} else if len(errs) < 8 {
			errs = append(errs, failed[i])
		}
	}
	return added, stored, errors.Join(errs...)
}

// stage writes data to a new file under tmp/, unsynced, for path.
func (s *Store) stage(path string, data []byte) *staged {
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), filepath.Base(path)+".*")
	if err != nil {
		return &staged{path: path, err: fmt.Errorf("definition store: %w", err)}
	}
	st := &staged{f: f, tmp: f.Name(), path: path, n: int64(len(data))}
	if _, err := f.Write(data); err != nil {
		st.err = fmt.Errorf("definition store: writing %s: %w", path, err)
	}
	return st
}

// commit makes the staged files durable and links each into place (never
// replacing: a path that exists already is left as it is, 0 bytes added),
// then fsyncs dir once. A file that fails keeps its error.
func (s *Store) commit(files []*staged, dir string) (added int64) {
	var open []*staged
	for _, f := range files {
		if f.err == nil {
			open = append(open, f)
		}
	}
	if len(open) == 0 {
		return 0
	}
	if err := syncFiles(open); err != nil {
		for _, f := range open {
			f.err = fmt.Errorf("definition store: writing %s: %w", f.path, err)
		}
		return 0
	}
	var linked []*staged
	for _, f := range open {
		err := f.f.Close()
		f.f = nil
		if err == nil {
			err = s.root.Link(s.rel(f.tmp), s.rel(f.path))
		}
		switch {
		case errors.Is(err, fs.ErrExist):
			f.n = 0 // another writer put it first
		case err != nil:
			f.err = fmt.Errorf("definition store: %w", err)
		default:
			linked = append(linked, f)
		}
	}
	if len(linked) == 0 {
		return 0
	}
	if err := syncDir(filepath.Clean(dir)); err != nil {
		// Linked but maybe not durable: an entry must not name such an
		// image, and a caller must not count it stored.
		for _, f := range linked {
			f.err = err
		}
		return 0
	}
	for _, f := range linked {
		added += f.n
	}
	return added
}

// lowWater is what a put that finds the store over its limit max evicts
// down to.
func lowWater(max int64) int64 { return max - max/8 }
