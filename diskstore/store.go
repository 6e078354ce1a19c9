// Package diskstore keeps Definition images on disk, so that they outlive
// the process and are shared by every process on the machine. A Definition
// holds no device address (the boundary is patched at every replay), so an
// image recorded by one process replays in another.
//
// Layout of a store directory:
//
//	HBG-STORE             the marker: a directory is a store when it holds it
//	                      (marker.go says when one is written or refused)
//	lock                  held shared by writers, exclusive by eviction and gc
//	packs/<name>.hbgp     a pack: the Definitions one batch stored, each a
//	                      record (its entry: full_key, content hash, image
//	                      format version, model, key; then the recorder's
//	                      signature, for an image fetched signed, and its
//	                      image), and a table of contents (pack.go has the
//	                      byte layout)
//	tmp/                  packs being written
//	quarantine/           files found bad, moved aside (never read again;
//	                      gc, or an eviction, removes them)
//
// A batch is one file, because files are what a store paid for: a cold pass
// of 10^4 new keys spent 65% of its time creating, linking and removing two
// files per Definition (about 70 us a file create on ext4), 14 times the
// pass without a store. A pack costs one create, write, sync, link and
// directory sync for its whole batch; a Definition in it costs a copy.
//
// Earlier hbg versions kept one file per Definition (objects/<hash>.hbgd and
// index/<full_key>-v<N>.json). This one never reads those: a store that
// still holds them counts them (Verify's Legacy), and gc, or the next
// eviction, removes them (regular files only, as everywhere): their
// Definitions are recorded again when asked for, once.
//
// The store removes files, so it removes only its own: a store whose
// subdirectory is a symbolic link or not a directory is refused at Open
// (ErrLayout), and every removal, rename and link goes through an os.Root
// of the store directory and removes only a regular file (Lstat), so a
// link planted later leads nothing out of the store. Files are opened
// O_NOFOLLOW|O_NONBLOCK and used only when regular, so a planted link,
// named pipe, device or directory is refused without being followed or
// blocking on.
//
// An entry is found by full_key and the image format version N, which
// together cover everything a Definition depends on: full_key hashes the
// orchestration identity (the model's name, form and file content hash),
// the graph key and every construction value; N is the format the device
// reads. The device's npu.Config (core counts, timings) shapes the
// simulation, never the image, so it is not part of the key.
//
// The index is in memory: Open reads every pack's table of contents (not
// its images), and a refresh reads the tables of packs it has not seen,
// which another process wrote. A miss costs at most a stat of packs/, and
// a listing of it only when it changed (racyWindow says how a change
// within a clock tick of the last listing is caught); both at most every
// refreshEvery (10 ms), so a pass of 10^4 new keys, whose writer links a
// pack every few milliseconds, neither stats nor lists the directory 10^4
// times. An entry another process committed is found without restarting,
// by a Find that starts 10 ms after the commit; a miss before that records
// the Definition again, and the duplicate is harmless (below).
//
// Never trust the disk. Before a pack's table is used, its footer is checked
// against the file's size, the table against its sum, and every record's
// offset and length against the table's tiling of the file, so no length
// the file claims makes a read past it or an allocation larger than it.
// Load reads the record, checks its header (magic, sum, and every field
// against the table of contents read before), the entry (its full_key,
// format version and model), then the image: magic, version, header
// length, content hash and section table (stages.DecodeDefinitionHost,
// which decodes only what the host replays with: the device decodes and
// checks the rest when it first replays it), the content hash against the
// entry, and the full_key in the image's header against the one asked for.
// Anything wrong moves the whole pack aside into quarantine/ (its file can
// no longer be trusted) and is returned as a *Rejected error: the caller
// records the Definition again and counts and reports the rejection. The
// pack's other records that still verify as a load would are stored again
// in a new pack first (salvage), so one bad record does not lose the others,
// which a pass may have loaded already and so would not record again. A
// pack whose table does not read is never used (its entries are misses)
// and never moved by a load: Verify reports it and gc removes it.
//
// Writes are atomic: a pack is written under tmp/, synced, then linked into
// packs/ under a new name (link(2) never replaces), the directory is
// fsynced, and the temporary name removed. A process killed at any point
// leaves either nothing, a file under tmp/ (gc removes it), or a whole pack.
// Two processes that store the same Definition both write it: a key in two
// packs loads from either, and gc removes a pack every entry of which
// another pack holds.
//
// Concurrency: atomic links, plus flock(2) locks (github.com/gofrs/flock
// for the store's, with an in-process RWMutex: storeLock), because links
// alone do not stop an eviction racing a write or a load. Writers hold the
// store lock shared (they never block one another); eviction and gc hold
// it exclusive, so every file under tmp/
// they find belongs to a dead process. Readers take no store lock: a Load
// pins its entry's pack with a shared flock on the pack's file, and eviction
// takes each pack's flock exclusive without waiting, so a pinned pack
// (loaded, not yet uploaded, by this process or any other) is never
// evicted. Eviction removes whole packs, least recently used first (a
// load touches its pack's modification time at most once a minute), while
// it holds the pack's lock; a load that opened the file before that and
// locked it after sees a file with no link left, which is a miss. flock
// locks belong to open files, so they vanish with a killed process: no
// stale lock survives a crash.
//
// A store's packs are at most an eighth of its limit (maxPackBytes), so
// that an eviction to the low-water mark (lowWater) has whole packs to
// choose from: a store whose limit is smaller than one Definition keeps
// nothing but what is pinned.
package diskstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	"github.com/hbg-dev/hbg/stages"
)

// DefaultMax is the default size limit of a store: 1 GiB.
const DefaultMax = 1 << 30

// touchEvery is how stale a pack's last use may be before a load records
// it again: LRU eviction needs no finer order than this.
const touchEvery = time.Minute

// Entry is one entry of the store: what it knows of a Definition.
type Entry struct {
	Format  int    // the pack format
	FullKey string // 16 hex digits
	Hash    string // the image's content hash, 16 hex digits
	Bytes   int64  // the image's
	// Version is the image format version (stages.DefinitionVersion).
	Version int
	// Model is the orchestration identity: model, form and the model
	// file's content hash.
	Model string
	Key   string
	// LastUse is the pack's modification time, touched by loads.
	LastUse time.Time
	// Pack is the name of the pack file (under packs/) holding it.
	Pack string
	// Signed says the record keeps a signature beside the image (Loaded's
	// Signature; whether it verifies is the reader's to check).
	Signed bool
}

// Loaded is a Definition read back from disk, verified. Def is the host's
// part of it (stages.DecodeDefinitionHost: no tensor, scalar, fanin or root
// pool); Image is the whole, for the device.
type Loaded struct {
	Def   *stages.Definition
	Image []byte
	// Written is the boundary slots the body writes
	// (stages.Definition.WrittenSlots of the whole Definition).
	Written []int32
	Entry   Entry
	// Signature is the recorder's signature kept beside the image
	// (Item.Signature), nil when there is none. The store checks nothing
	// of it: the reader verifies it (package peer/defsig) before it takes
	// the image as signed.
	Signature []byte
}

// errNotRegular is a path that holds no regular file (a directory, say):
// nothing hbg wrote.
var errNotRegular = errors.New("not a regular file")

// Rejected is a store entry found bad on load: its pack is moved aside
// into quarantine/ (Moved), and the Definition must be recorded again.
type Rejected struct {
	FullKey uint64
	Reason  string
	Moved   []string
}

// ErrRejected matches every *Rejected (errors.Is): an entry found bad and
// moved aside.
var ErrRejected = errors.New("definition store: entry rejected")

// Is makes errors.Is(err, ErrRejected) hold.
func (r *Rejected) Is(target error) bool { return target == ErrRejected }

func (r *Rejected) Error() string {
	return fmt.Sprintf("definition store: entry %016x rejected: %s (moved aside: %s)", r.FullKey, r.Reason, strings.Join(r.Moved, ", "))
}

// Store is a Definition store directory. Its methods are safe for
// concurrent use.
type Store struct {
	dir string
	max int64
	// root is the store directory: every removal, rename and link goes
	// through it, so none reaches a file outside the store (a symbolic
	// link planted in place of a subdirectory after Open).
	root *os.Root
	lock *storeLock
	// packDir ends with a separator.
	packDir string
	// strict: the device refused an image this store gave (Quarantine),
	// so each load checks its image in full.
	strict atomic.Bool

	// scanMu serializes refreshes; mu guards what follows.
	scanMu sync.Mutex
	mu     sync.Mutex
	pins   map[uint64]*pin
	packs  map[string]*pack
	byKey  map[uint64]loc
	// bad is the files in packs/ refused, and why: never read again
	// while there; Verify reports them and gc removes them.
	bad map[string]string
	// dups: some key is in two packs.
	dups bool
	// intern shares model strings across the packs' entries.
	intern map[string]string
	// dirSt is packs/ as the last scan found it; racy when that was
	// within racyWindow of the directory's last change.
	dirSt dirState
	racy  bool
	// checkedAt is the last look at packs/ (refreshEvery).
	checkedAt time.Time
	// size is what this process knows of the store's bytes: the packs the
	// index holds, plus extra (quarantined, temporary and legacy files,
	// refused packs) as Open and each eviction measured them.
	size, extra int64
	// evictions counts the evictions, scans the listings of packs/.
	evictions, scans atomic.Int64
}

type pin struct {
	n int
	f rfile
}

// DefaultDir is where a store lives unless told otherwise:
// os.UserCacheDir()/hbg/definitions.
func DefaultDir() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("definition store: no user cache directory: %w", err)
	}
	return filepath.Join(c, "hbg", "definitions"), nil
}

// Open opens (creating it if needed) the store in dir, bounded to max bytes
// (0: DefaultMax). It reads every pack's table of contents.
func Open(dir string, max int64) (*Store, error) {
	if max == 0 {
		max = DefaultMax
	}
	if max < 0 {
		return nil, fmt.Errorf("definition store %s: size limit %d: want a positive size", dir, max)
	}
	root, err := openLayout(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, max: max, root: root, lock: &storeLock{fl: flock.New(filepath.Join(dir, "lock"), flock.SetPermissions(0o644))},
		packDir: filepath.Join(dir, "packs") + string(filepath.Separator),
		pins:    map[uint64]*pin{}, packs: map[string]*pack{}, byKey: map[uint64]loc{}, bad: map[string]string{},
		intern: map[string]string{}}
	if _, err := s.refresh(true); err != nil {
		_ = root.Close()
		return nil, err
	}
	lo, err := s.leftovers()
	if err != nil {
		_ = root.Close()
		return nil, err
	}
	s.mu.Lock()
	s.extra = lo.bytes
	s.size += lo.bytes
	s.mu.Unlock()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Max is the store's size limit in bytes.
func (s *Store) Max() int64 { return s.max }

// Close releases every pin.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, p := range s.pins {
		p.f.close()
		delete(s.pins, k)
	}
	return errors.Join(s.lock.fl.Close(), s.root.Close())
}

// ErrLayout is a store directory whose layout hbg did not make: a
// subdirectory that is a symbolic link or not a directory. Eviction and gc
// remove files there, so the store refuses to open rather than delete
// files elsewhere.
var ErrLayout = errors.New("definition store layout is not hbg's")

// storeDirs are the store's subdirectories: files are removed from each.
// legacyDirs are an earlier layout's, checked when present (gc empties and
// removes them), never made.
var (
	storeDirs  = []string{"packs", "tmp", "quarantine"}
	legacyDirs = []string{"objects", "index"}
)

// openLayout makes (or checks) the store's directories and opens its root.
func openLayout(dir string) (*os.Root, error) {
	if err := claim(dir); err != nil {
		return nil, err
	}
	for _, sub := range append(slices.Clone(storeDirs), legacyDirs...) {
		p := filepath.Join(dir, sub)
		if !slices.Contains(legacyDirs, sub) {
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("definition store: %w", err)
			}
		}
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) && slices.Contains(legacyDirs, sub) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("definition store: %w", err)
		}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			return nil, fmt.Errorf("definition store %s: %w: %s is a symbolic link (to %s), want a directory of its own: remove it, or give another store", dir, ErrLayout, sub, to)
		case !st.IsDir():
			return nil, fmt.Errorf("definition store %s: %w: %s is a %s, want a directory", dir, ErrLayout, sub, kindOf(st.Mode()))
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	return root, nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "file of mode " + m.String()
}

// remove removes the store's file at rel (a path relative to the store)
// when it is a regular file (checked with Lstat through the store's root,
// so no symbolic link is followed out of it), and returns its size. An
// empty directory goes too: remove never recurses, so it deletes nothing
// else.
func (s *Store) remove(rel string) (int64, error) {
	sub, name := filepath.Split(rel)
	sub = filepath.Clean(sub)
	if name == "" || (sub == "." && !slices.Contains(legacyDirs, name)) || (sub != "." && !ownName(sub, name)) {
		return 0, fmt.Errorf("definition store: not removing %s: %w", rel, errNotOwn)
	}
	st, err := s.root.Lstat(rel)
	if err != nil {
		return 0, err
	}
	switch {
	case st.IsDir(): // only when empty: Remove never recurses
	case !st.Mode().IsRegular():
		return 0, fmt.Errorf("definition store: not removing %s: %w (a %s)", rel, errNotRegular, kindOf(st.Mode()))
	case links(st) != 1 && sub != "tmp":
		// A hard link to a file elsewhere: the store does not own what
		// it points at. (A pack being written has a second name once it
		// is linked into packs/, and a writer killed then leaves it so:
		// removing a name under tmp/ never changes the file.)
		return 0, fmt.Errorf("definition store: not removing %s: %w (%d links)", rel, errNotOwn, links(st))
	}
	return st.Size(), s.root.Remove(rel)
}

// errNotOwn: a file whose name hbg's layout does not make, or that has
// another name outside the store: maintenance leaves it.
var errNotOwn = errors.New("not a file of hbg's store")

func hex16(v uint64) string {
	var b [16]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = "0123456789abcdef"[v&15]
		v >>= 4
	}
	return string(b[:])
}

// Load finds fullKey's Definition: (nil, nil) on a miss, a *Rejected error
// when what is on disk is bad (its pack is moved aside first), another
// error when the store cannot be read. model, when not empty, must be the
// entry's orchestration identity. A loaded entry is pinned until Unpin: no
// eviction, by this process or another, removes it meanwhile. Load is Find,
// then Found.Load.
func (s *Store) Load(fullKey uint64, model string) (*Loaded, error) {
	f, err := s.Find(fullKey)
	if f == nil {
		return nil, err
	}
	return f.Load(model)
}

// Found is an entry Find pinned, not yet loaded.
type Found struct {
	s       *Store
	fullKey uint64
	p       *pack
	e       packEntry
	f       rfile
	st      fileState
}

// Find pins fullKey's entry, if the store has one: nil (and a nil error) on
// a miss. A hit costs an open, a lock and a stat of its pack, a miss a stat
// of packs/ (refresh), so a caller can tell a miss at once and load a hit
// elsewhere (Found.Load reads, checks and decodes). The Found must be
// loaded.
func (s *Store) Find(fullKey uint64) (*Found, error) {
	for try := 0; ; try++ {
		p, e, ok := s.lookup(fullKey)
		if !ok {
			if try > 0 {
				return nil, nil
			}
			scanned, err := s.refresh(false)
			if err != nil || !scanned {
				return nil, err
			}
			continue
		}
		f, st, err := s.pinPack(p)
		switch {
		case err != nil:
			return nil, err
		case st.nlink == 0 && try == 0:
			// Evicted, or moved aside, by another process: forgotten, and
			// packs/ looked at again for the key in another pack.
			f.close()
			s.mu.Lock()
			s.forgetLocked(p)
			s.checkedAt = time.Time{}
			s.mu.Unlock()
			continue
		case st.nlink == 0:
			f.close()
			return nil, nil
		}
		return &Found{s: s, fullKey: fullKey, p: p, e: e, f: f, st: st}, nil
	}
}

// pinPack opens p and takes its shared lock (the pin), without waiting: an
// evictor holding it is removing the pack, which the returned state shows
// as no link left, as it does a pack removed between the open and the lock.
func (s *Store) pinPack(p *pack) (rfile, fileState, error) {
	f, err := openFile(s.packDir + p.name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return noFile, fileState{}, nil
	case errors.Is(err, errNotRegular):
		return f, fileState{nlink: 1}, nil // a symbolic link: the load rejects it
	case err != nil:
		return f, fileState{}, err
	}
	ok, err := f.lock(false)
	if err != nil || !ok {
		f.close()
		return noFile, fileState{}, err
	}
	st, err := f.stat()
	if err != nil {
		f.close()
		return noFile, fileState{}, err
	}
	return f, st, nil
}

// Load reads, checks and decodes a found entry's Definition, as Store.Load
// does; on a nil Loaded the pin is released.
func (fd *Found) Load(model string) (*Loaded, error) {
	s, fullKey, p, e, f, st := fd.s, fd.fullKey, fd.p, &fd.e, fd.f, fd.st
	keep := false
	defer func() {
		if !keep {
			f.close()
		}
	}()
	if !st.regular {
		return nil, s.reject(fullKey, "pack "+p.name+" is not a regular file", p)
	}
	rec := make([]byte, e.recLen())
	if err := f.readFullAt(rec, e.off); err != nil {
		if errors.Is(err, errNotRegular) {
			return nil, s.reject(fullKey, "pack "+p.name+" is not a regular file", p)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, s.reject(fullKey, fmt.Sprintf("pack %s is cut short before record %016x's end", p.name, fullKey), p)
		}
		return nil, fmt.Errorf("definition store: pack %s: %w", p.name, err)
	}
	sig, img, reason := splitRecord(rec, e)
	switch {
	case reason != "":
		return nil, s.reject(fullKey, fmt.Sprintf("pack %s, record %016x: %s", p.name, fullKey, reason), p)
	case model != "" && e.model != model:
		return nil, s.reject(fullKey, fmt.Sprintf("entry is model %q, want %q", e.model, model), p)
	}
	def, written, reason := checkImage(img, fullKey, e)
	if reason == "" && s.strict.Load() {
		if _, err := decodeFull(img); err != nil {
			reason = fmt.Sprintf("image %016x: %v", e.hash, err)
		}
	}
	if reason != "" {
		return nil, s.reject(fullKey, "pack "+p.name+": "+reason, p)
	}
	// Last use, for LRU eviction: touched when more than touchEvery old,
	// so that loading a store that is in use writes nothing to it.
	now := time.Now()
	mod := st.mod
	if st.nlink == 1 && now.Sub(st.mod) > touchEvery && f.touch(now) == nil {
		mod = now
	}
	s.mu.Lock()
	p.mod = mod
	pn := s.pins[fullKey]
	if pn == nil {
		s.pins[fullKey] = &pin{n: 1, f: f}
		keep = true
	} else {
		pn.n++
	}
	s.mu.Unlock()
	l := &Loaded{Def: def, Image: img, Written: written, Entry: entryOf(p, e, mod)}
	if len(sig) > 0 {
		l.Signature = sig
	}
	return l, nil
}

// KnownFor is the entries of one orchestration identity (model) in the
// index (Open's read of every pack's table, and the packs found since),
// most recently used first, at most max: what a first pass of that
// orchestration will likely ask for, and can be loaded before it asks. An
// entry may have gone since; loading it tells.
func (s *Store) KnownFor(model string, max int) []Entry {
	s.mu.Lock()
	var es []Entry
	for _, l := range s.byKey {
		e := &l.p.entries[l.i]
		if e.model == model {
			es = append(es, entryOf(l.p, e, l.p.mod))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(es, func(a, b Entry) int {
		if c := b.LastUse.Compare(a.LastUse); c != 0 {
			return c
		}
		return strings.Compare(a.FullKey, b.FullKey)
	})
	return es[:min(len(es), max)]
}

// checkImage verifies an image against its entry and the full_key asked
// for; it returns the host's part of the Definition and the boundary slots
// it writes (stages.DecodeDefinitionHost), or why the image is bad.
func checkImage(img []byte, fullKey uint64, e *packEntry) (*stages.Definition, []int32, string) {
	def, written, err := stages.DecodeDefinitionHost(img)
	if err != nil {
		return nil, nil, fmt.Sprintf("image %016x: %v", e.hash, err)
	}
	if def.ContentHash != e.hash {
		return nil, nil, fmt.Sprintf("image listed as %016x has content hash %016x", e.hash, def.ContentHash)
	}
	if def.FullKey != fullKey {
		return nil, nil, fmt.Sprintf("image %016x is full_key %016x (another model, form or key), want %016x", e.hash, def.FullKey, fullKey)
	}
	return def, written, ""
}

// reject moves a pack aside and says why. The pack's other records that
// still verify (record, and the host's checks of the image, as a load's)
// are first read, and stored again once it is aside: a pack is one file,
// but one bad record should not cost the others, which a pass may have
// loaded from it already (and so would not record again).
func (s *Store) reject(fullKey uint64, reason string, p *pack) *Rejected {
	s.mu.Lock()
	s.forgetLocked(p)
	s.checkedAt = time.Time{} // the key may be in a pack not seen yet
	s.mu.Unlock()
	keep := s.salvage(p, fullKey)
	r := &Rejected{FullKey: fullKey, Reason: reason}
	if m := s.moveAside(filepath.Join("packs", p.name)); m != "" {
		r.Moved = append(r.Moved, m)
	}
	if len(keep) > 0 {
		// A failure leaves them misses, which are recorded again.
		_, _ = s.PutBatch(keep)
	}
	return r
}

// salvage reads the records of p, but fullKey's, that verify.
func (s *Store) salvage(p *pack, fullKey uint64) []Item {
	f, err := openFile(s.packDir + p.name)
	if err != nil {
		return nil
	}
	defer f.close()
	if st, err := f.stat(); err != nil || !st.regular {
		return nil
	}
	var keep []Item
	for i := range p.entries {
		e := &p.entries[i]
		if e.fullKey == fullKey || !loadable(e) {
			continue
		}
		rec := make([]byte, e.recLen())
		if f.readFullAt(rec, e.off) != nil {
			continue
		}
		sig, img, reason := splitRecord(rec, e)
		if reason != "" {
			continue
		}
		// Checked in full, as the device reads it: a pack is moved aside
		// also for an image the device refused, and its neighbours,
		// written by the same batch, may be as bad.
		if def, _, reason := checkImage(img, e.fullKey, e); reason == "" {
			if _, err := decodeFull(img); err == nil {
				keep = append(keep, Item{Def: def, Image: img, Model: e.model, Signature: sig})
			}
		}
	}
	return keep
}

// moveAside renames the store's file at rel into quarantine/, and returns
// its new path relative to the store ("" when it is not there: another
// process moved it already).
func (s *Store) moveAside(rel string) string {
	if sub, name := filepath.Split(rel); !ownName(filepath.Clean(sub), name) {
		return ""
	}
	stamp := time.Now().UTC().Format("20060102T150405.000000000")
	dst := filepath.Join("quarantine", filepath.Base(rel)+"."+stamp)
	if err := s.root.Rename(rel, dst); err != nil {
		return ""
	}
	return dst
}

// Quarantine moves the pack of fullKey's entry aside, as a load that finds
// it bad does: for an entry whose image the host's checks took and the
// device then refused. Its other entries become misses. It returns what it
// moved (nil when there was no entry).
//
// A refusal makes the store strict: from then on a load checks each image
// in full, as the device does, so the other images a bad batch or a bad
// writer left are refused on load, in one pass, rather than one at a
// device launch each.
func (s *Store) Quarantine(fullKey uint64, reason string) *Rejected {
	s.strict.Store(true)
	p, _, ok := s.lookup(fullKey)
	if !ok {
		return nil
	}
	return s.reject(fullKey, reason, p)
}

// Unpin releases a pin Load took (once the Definition is uploaded).
func (s *Store) Unpin(fullKey uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pins[fullKey]
	if p == nil {
		return
	}
	if p.n--; p.n == 0 {
		p.f.close()
		delete(s.pins, fullKey)
	}
}

// Pinned reports whether this process pins fullKey's entry.
func (s *Store) Pinned(fullKey uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pins[fullKey] != nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("definition store: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("definition store: syncing %s: %w", dir, err)
	}
	return nil
}
