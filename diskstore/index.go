package diskstore

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/hbg-dev/hbg/stages"
)

// The store's index lives in memory: every pack's table of contents, read
// once per pack (packs are written once and never change; one that does
// shows at load, when its record does not match the table). Another
// process's packs show up at the next refresh, which costs one stat of
// packs/ while the directory is unchanged.

// pack is one pack file the index holds.
type pack struct {
	name    string
	size    int64
	mod     time.Time // last use: the file's modification time
	entries []packEntry
	// foreign: a pack of another pack format, another hbg's; it has no
	// entry this hbg reads, and ages out as any pack does.
	foreign bool
}

// loc is where an entry is: its pack and its place in the pack's entries.
type loc struct {
	p *pack
	i int32
}

// racyWindow is how close to a scan a change of packs/ may be and leave its
// modification time as it was: file systems stamp a directory from a
// coarse clock (a kernel tick, a few milliseconds). A scan closer than this
// to the directory's stamp is racy: a pack linked later in the same tick
// would not change the stamp, so the next look scans again.
const racyWindow = 20 * time.Millisecond

// refreshEvery bounds how often a refresh looks at packs/: a pass that
// misses 10^4 keys while its writer links a pack every few milliseconds
// would otherwise stat packs/ at every miss and list it at every link (a
// listing of every pack: quadratic in the packs a process sees written). A
// pack another process links is found by a Find that starts this long
// after the link; a miss meanwhile records the Definition again, and the
// duplicate is harmless (gc removes it). A racy scan is looked at again
// after this long too.
const refreshEvery = 10 * time.Millisecond

// refresh brings the index up to what packs/ holds: it reads the table of
// contents of every pack not seen before, forgets packs gone, and notes
// packs it refuses (bad). Unless force, it does nothing within
// refreshEvery of the last look, nor while packs/ is as the last scan
// found it (and that scan was not racy). It reports whether it scanned.
func (s *Store) refresh(force bool) (bool, error) {
	now := time.Now()
	s.mu.Lock()
	recent := now.Sub(s.checkedAt) < refreshEvery
	s.mu.Unlock()
	if recent && !force {
		return false, nil
	}
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	st, err := statDir(s.packDir)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	same := st == s.dirSt && !s.racy
	s.checkedAt = now
	s.mu.Unlock()
	if same && !force {
		return false, nil
	}
	s.scans.Add(1)
	names, err := readDirNames(s.packDir)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	present := make(map[string]bool, len(names))
	var fresh []string
	for _, n := range names {
		present[n] = true
		if s.packs[n] == nil && s.bad[n] == "" {
			fresh = append(fresh, n)
		}
	}
	var gone []*pack
	for n, p := range s.packs {
		if !present[n] {
			gone = append(gone, p)
		}
	}
	for n := range s.bad {
		if !present[n] {
			delete(s.bad, n)
		}
	}
	s.forgetLocked(gone...)
	s.mu.Unlock()
	for _, n := range fresh {
		p, reason, err := s.readPack(n, s.intern)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed meanwhile
		case err != nil:
			reason = err.Error()
		}
		s.mu.Lock()
		if reason != "" {
			s.bad[n] = reason
		} else if s.packs[n] == nil {
			s.addLocked(p)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.dirSt = st
	s.racy = now.Sub(st.modified()) < racyWindow
	s.mu.Unlock()
	return true, nil
}

// notOurs is why a pack path that holds no regular file is refused: hbg
// writes only regular files and removes only those (a link, pipe or
// device there is someone else's), so verify's report says who clears it.
const notOurs = "not a regular file, so not one hbg wrote: gc leaves it; remove it by hand"

// readPack reads the table of contents of packs/name: the pack, or why it
// is refused (not named as a pack, not a regular file, a bad footer or
// table). intern (the store's under scanMu, or nil) shares model strings.
func (s *Store) readPack(name string, intern map[string]string) (*pack, string, error) {
	if !strings.HasSuffix(name, packSuffix) {
		return nil, "not a pack (named " + name + ")", nil
	}
	f, err := openFile(s.packDir + name)
	if err != nil {
		if errors.Is(err, errNotRegular) {
			return nil, notOurs + ": " + err.Error(), nil
		}
		return nil, "", err
	}
	defer f.close()
	st, err := f.stat()
	if err != nil {
		return nil, "", err
	}
	if !st.regular {
		return nil, notOurs, nil
	}
	if f.sparse() {
		return nil, fmt.Sprintf("a sparse file (%d bytes long, far fewer on disk): hbg never writes one", st.size), nil
	}
	es, reason, err := readTOC(f, st.size, intern)
	switch {
	case errors.Is(err, errForeign):
		return &pack{name: name, size: st.size, mod: st.mod, foreign: true}, "", nil
	case errors.Is(err, errNotRegular):
		return nil, notOurs, nil
	case err != nil:
		return nil, "", fmt.Errorf("definition store: reading %s: %w", name, err)
	}
	if reason != "" {
		return nil, reason, nil
	}
	return &pack{name: name, size: st.size, mod: st.mod, entries: es}, "", nil
}

// loadable is whether this hbg loads the entry: one of its image format.
func loadable(e *packEntry) bool { return e.version == stages.DefinitionVersion }

// addLocked adds a pack to the index. A key already in another pack keeps
// the entry it had (two processes that stored the same Definition wrote
// the same bytes): the second is a duplicate, which gc removes once a whole
// pack is one.
func (s *Store) addLocked(p *pack) {
	s.packs[p.name] = p
	s.size += p.size
	for i := range p.entries {
		e := &p.entries[i]
		if !loadable(e) {
			continue
		}
		if _, ok := s.byKey[e.fullKey]; ok {
			s.dups = true
			continue
		}
		s.byKey[e.fullKey] = loc{p, int32(i)}
	}
}

// forgetLocked drops packs from the index (removed, or moved aside). A key
// they held that another pack holds too is found there again.
func (s *Store) forgetLocked(ps ...*pack) {
	if len(ps) == 0 {
		return
	}
	lost := false
	for _, p := range ps {
		if s.packs[p.name] != p {
			continue
		}
		delete(s.packs, p.name)
		s.size -= p.size
		for i := range p.entries {
			e := &p.entries[i]
			if l, ok := s.byKey[e.fullKey]; ok && l.p == p {
				delete(s.byKey, e.fullKey)
				lost = true
			}
		}
	}
	if lost && s.dups {
		// Rare (two writers of one Definition): find each lost key in
		// the packs left.
		s.dups = false
		for _, p := range s.packs {
			for i := range p.entries {
				e := &p.entries[i]
				if !loadable(e) {
					continue
				}
				if l, ok := s.byKey[e.fullKey]; !ok {
					s.byKey[e.fullKey] = loc{p, int32(i)}
				} else if l.p != p {
					s.dups = true
				}
			}
		}
	}
}

// lookup is where fullKey's entry is, if the index has it.
func (s *Store) lookup(fullKey uint64) (*pack, packEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.byKey[fullKey]
	if !ok {
		return nil, packEntry{}, false
	}
	return l.p, l.p.entries[l.i], true
}

// entryOf is the Entry an index entry is, last used at mod (its pack's,
// read under mu: a load touches it).
func entryOf(p *pack, e *packEntry, mod time.Time) Entry {
	return Entry{Format: packFormat, FullKey: hex16(e.fullKey), Hash: hex16(e.hash), Bytes: int64(e.imageLen),
		Version: int(e.version), Model: e.model, Key: e.key, LastUse: mod, Pack: p.name, Signed: e.sigLen > 0}
}
