// Package diskstore keeps Definition images on disk, so that they outlive
// the process and are shared by every process on the machine. A Definition
// holds no device address (the boundary is patched at every replay), so an
// image recorded by one process replays in another.
//
// Layout of a store directory:
//
//	lock                      held shared by writers, exclusive by eviction
//	objects/<hash>.hbgd       an image, named by its content hash (16 hex)
//	index/<full_key>-v<N>.json an entry: full_key, hash, bytes, model, key
//	tmp/                      files being written
//	quarantine/               files found bad, moved aside (never read again;
//	                          gc, or an eviction, removes them)
//
// The store removes files, so it removes only its own: a store whose
// subdirectory is a symbolic link or not a directory is refused at Open
// (ErrLayout), and every removal, rename and link goes through an os.Root
// of the store directory and removes only a regular file (Lstat), so a
// link planted later leads nothing out of the store.
//
// An entry is found by full_key and the image format version N, which
// together cover everything a Definition depends on: full_key hashes the
// orchestration identity (the model's name, form and file content hash),
// the graph key and every construction value; N is the format the device
// reads. The device's npu.Config (core counts, timings) shapes the
// simulation, never the image, so it is not part of the key.
//
// Never trust the disk. Load checks the entry (its full_key, format version
// and model), then the image: its length against the entry, magic, version,
// header length, content hash and section table
// (stages.DecodeDefinitionHost, which decodes only what the host replays
// with: the device decodes and checks the rest when it first replays it), the
// content hash against the file name and the entry, and the full_key in the
// image's header against the one asked for. An entry this process has read
// already (Open's scan reads every entry to measure the store) is not read
// and parsed again while its file is in the state it was read in (same
// device, inode, size and modification time: entries are written once,
// under a new inode, and a damaged one rewritten in place shows in its size
// or time), but still checked; the image is read and verified at every
// load. Anything wrong moves the files aside into quarantine/ and is
// returned as a *Rejected error: the caller records the Definition again
// and counts and reports the rejection.
//
// Writes are atomic: a file is written under tmp/, synced, then linked into
// place (link(2) never replaces: the first writer of a name wins, and a
// second writer of the same Definition wrote the same bytes), and the
// directory is fsynced. The image goes in before its entry (its link made
// durable before the entry's file is linked), so a process killed at any
// point leaves either nothing, an orphan image (no entry; gc removes it) or
// a complete entry; a half-written file only ever lives under tmp/. A batch
// (PutBatch) does each step for all its Definitions at once: their files
// synced together, one fsync of objects/ and one of index/.
//
// Concurrency: atomic links, plus github.com/gofrs/flock locks, because
// links alone do not stop an eviction racing a write (an evictor could
// remove an image a writer has just found present and is about to index).
// Writers hold the store lock shared (they never block one another);
// eviction and gc hold it exclusive, so they never see a write half done
// and every file under tmp/ they find belongs to a dead process. Readers take
// no store lock: a Load pins its entry with a shared flock on the entry's
// file, and eviction takes each entry's flock exclusive without waiting, so
// a pinned entry (loaded, not yet uploaded, by this process or any other)
// is never evicted. An evictor removes the entry's file while it holds the
// lock; a load that opened the file before that and locked it after sees a
// file with no link left, which is a miss. flock locks belong to open
// files, so they vanish with a killed process: no stale lock survives a
// crash.
package diskstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	"github.com/hbg-dev/hbg/stages"
)

// DefaultMax is the default size limit of a store: 1 GiB.
const DefaultMax = 1 << 30

// touchEvery is how stale an entry's last use may be before a load
// records it again: LRU eviction needs no finer order than this.
const touchEvery = time.Minute

// bigImage is the image size beyond which a load checks the file's length
// before it allocates what the entry claims.
const bigImage = 16 << 20

// entryFormat is the version of an index entry's JSON shape.
const entryFormat = 1

// Entry is one index entry: what the store knows of a Definition.
type Entry struct {
	Format  int    `json:"format"`
	FullKey string `json:"full_key"` // 16 hex digits
	Hash    string `json:"hash"`     // the image's content hash, 16 hex digits
	Bytes   int64  `json:"bytes"`
	// Version is the image format version (stages.DefinitionVersion).
	Version int `json:"version"`
	// Model is the orchestration identity: model, form and the model
	// file's content hash.
	Model string `json:"model"`
	Key   string `json:"key"`
	// LastUse is the entry file's modification time, touched by every
	// load; not stored in the JSON.
	LastUse time.Time `json:"-"`
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
}

// errNotRegular is an image path that holds no regular file (a
// directory, say): nothing hbg wrote, so the load moves it aside.
var errNotRegular = errors.New("not a regular file")

// Rejected is a store entry found bad on load: its files are moved aside
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
	lock *flock.Flock
	// indexDir and objectDir end with a separator; entrySuffix is
	// "-v<DefinitionVersion>.json".
	indexDir, objectDir, entrySuffix string

	mu   sync.Mutex
	pins map[uint64]*pin
	// known is the entries this process has read, each with the state of
	// its file when read: a load whose pinned file is still in that state
	// uses the entry as read, without reading or parsing it again. Open's
	// scan of the index (which reads every entry to measure the store)
	// fills it.
	known map[uint64]knownEntry
	// size is what this process knows of the store's bytes: measured at
	// Open and by each eviction, plus its own writes since. Other processes'
	// writes show up at the next eviction's scan.
	size int64
	// evictions counts the evictions (each a scan of the whole index).
	evictions atomic.Int64
}

type pin struct {
	n int
	f entryFile
}

// knownEntry is an entry as read from its file, and that file's state then.
type knownEntry struct {
	e  Entry
	st entryStat
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
// (0: DefaultMax).
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
	s := &Store{dir: dir, max: max, root: root, lock: flock.New(filepath.Join(dir, "lock"), flock.SetPermissions(0o644)),
		indexDir:    filepath.Join(dir, "index") + string(filepath.Separator),
		objectDir:   filepath.Join(dir, "objects") + string(filepath.Separator),
		entrySuffix: "-v" + strconv.Itoa(stages.DefinitionVersion) + ".json",
		pins:        map[uint64]*pin{}, known: map[uint64]knownEntry{}}
	f, err := s.scan()
	if err != nil {
		_ = root.Close()
		return nil, err
	}
	s.size = f.total()
	for i, e := range f.entries {
		fk, err := strconv.ParseUint(e.FullKey, 16, 64)
		if err == nil && f.entryPath[i] == s.indexPath(fk) && f.entryStat[i].valid() {
			s.known[fk] = knownEntry{e: e, st: f.entryStat[i]}
		}
	}
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
	return errors.Join(s.lock.Close(), s.root.Close())
}

// ErrLayout is a store directory whose layout hbg did not make: a
// subdirectory that is a symbolic link or not a directory. Eviction and gc
// remove files there, so the store refuses to open rather than delete
// files elsewhere.
var ErrLayout = errors.New("definition store layout is not hbg's")

// storeDirs are the store's subdirectories: files are removed from each.
var storeDirs = []string{"objects", "index", "tmp", "quarantine"}

// openLayout makes (or checks) the store's directories and opens its root.
func openLayout(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	for _, sub := range storeDirs {
		p := filepath.Join(dir, sub)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("definition store: %w", err)
		}
		st, err := os.Lstat(p)
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
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "file of mode " + m.String()
}

// rel is path (inside the store) relative to the store's root.
func (s *Store) rel(path string) string {
	r, err := filepath.Rel(s.dir, path)
	if err != nil || !filepath.IsLocal(r) {
		panic("diskstore: " + path + " is not inside the store " + s.dir)
	}
	return r
}

// remove removes the store's file at path when it is a regular file inside
// the store (checked with Lstat through the store's root, so no symbolic
// link is followed out of it), and returns its size. An empty directory
// (an index entry that was one, moved aside) goes too: remove never
// recurses, so it deletes nothing else.
func (s *Store) remove(path string) (int64, error) {
	r := s.rel(path)
	st, err := s.root.Lstat(r)
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		return 0, fmt.Errorf("definition store: not removing %s: %w (a %s)", path, errNotRegular, kindOf(st.Mode()))
	}
	return st.Size(), s.root.Remove(r)
}

func hex16(v uint64) string {
	var b [16]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = "0123456789abcdef"[v&15]
		v >>= 4
	}
	return string(b[:])
}

func (s *Store) indexPath(fullKey uint64) string {
	return s.indexDir + hex16(fullKey) + s.entrySuffix
}

func (s *Store) objectPath(hash string) string {
	return s.objectDir + hash + ".hbgd"
}

// Load finds fullKey's Definition: (nil, nil) on a miss, a *Rejected error
// when what is on disk is bad (its files are moved aside first), another
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
	idx     string
	f       entryFile
	st      entryStat
}

// Find pins fullKey's entry, if the store has one: nil (and a nil error) on
// a miss. It costs an open, a lock and a stat, so a caller can tell a miss
// at once and load a hit elsewhere (Found.Load reads, checks and decodes).
// The Found must be loaded.
func (s *Store) Find(fullKey uint64) (*Found, error) {
	idx := s.indexPath(fullKey)
	// Pin first, then read: an entry pinned is one no eviction removes
	// under us. The lock is taken without waiting: an evictor holding it
	// is removing the entry, which is a miss.
	f, st, ok, err := openEntry(idx)
	if !ok {
		return nil, err
	}
	return &Found{s: s, fullKey: fullKey, idx: idx, f: f, st: st}, nil
}

// Load reads, checks and decodes a found entry's Definition, as Store.Load
// does; on a nil Loaded the pin is released.
func (fd *Found) Load(model string) (*Loaded, error) {
	s, fullKey, idx, f, st := fd.s, fd.fullKey, fd.idx, fd.f, fd.st
	keep := false
	defer func() {
		if !keep {
			f.close()
		}
	}()
	if st.irregular {
		return nil, s.reject(fullKey, "index entry is not a regular file", idx)
	}
	e, known := s.knownEntry(fullKey, st)
	if !known {
		var buf [512]byte
		data, err := f.read(buf[:0], st)
		if err != nil {
			return nil, err
		}
		e = Entry{}
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, s.reject(fullKey, "index entry is not valid JSON: "+err.Error(), idx)
		}
	}
	switch {
	case e.Format != entryFormat:
		return nil, s.reject(fullKey, fmt.Sprintf("index entry format %d, want %d", e.Format, entryFormat), idx)
	case e.FullKey != hex16(fullKey):
		return nil, s.reject(fullKey, fmt.Sprintf("index entry is for full_key %s", e.FullKey), idx)
	case e.Version != stages.DefinitionVersion:
		return nil, s.reject(fullKey, fmt.Sprintf("index entry of image format version %d, this hbg reads version %d", e.Version, stages.DefinitionVersion), idx)
	case model != "" && e.Model != model:
		return nil, s.reject(fullKey, fmt.Sprintf("index entry is model %q, want %q", e.Model, model), idx)
	case !validHash(e.Hash):
		return nil, s.reject(fullKey, fmt.Sprintf("index entry hash %q is not 16 hex digits", e.Hash), idx)
	case e.Bytes < 0 || e.Bytes > math.MaxUint32:
		return nil, s.reject(fullKey, fmt.Sprintf("index entry says the image is %d bytes", e.Bytes), idx)
	}
	obj := s.objectPath(e.Hash)
	img, size, err := readImage(obj, e.Bytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, s.reject(fullKey, "index entry points to a missing image "+filepath.Base(obj), idx)
	case errors.Is(err, errNotRegular):
		return nil, s.reject(fullKey, "image "+filepath.Base(obj)+" is not a regular file", idx, obj)
	case err != nil:
		return nil, err
	case img == nil:
		return nil, s.reject(fullKey, fmt.Sprintf("image %s is %d bytes, its entry says %d", e.Hash, size, e.Bytes), idx, obj)
	}
	def, written, reason := checkImage(img, fullKey, e)
	if reason != "" {
		return nil, s.reject(fullKey, reason, idx, obj)
	}
	// Last use, for LRU eviction: touched when more than touchEvery
	// old, so that loading a store that is in use writes nothing to it.
	now := time.Now()
	e.LastUse = st.mod
	touch := now.Sub(st.mod) > touchEvery
	if touch {
		_ = os.Chtimes(idx, now, now)
		e.LastUse = now
	}
	s.mu.Lock()
	switch {
	case touch:
		delete(s.known, fullKey) // its file's state changed
	case !known:
		s.known[fullKey] = knownEntry{e: e, st: st}
	}
	p := s.pins[fullKey]
	if p == nil {
		s.pins[fullKey] = &pin{n: 1, f: f}
		keep = true
	} else {
		p.n++
	}
	s.mu.Unlock()
	return &Loaded{Def: def, Image: img, Written: written, Entry: e}, nil
}

// KnownFor is the entries of one orchestration identity (model) that this
// process has read (Open's scan, its own loads), most recently used first,
// at most max: what a first pass of that orchestration will likely ask
// for, and can be loaded before it asks. An entry may have gone since it
// was read; loading it tells.
func (s *Store) KnownFor(model string, max int) []Entry {
	s.mu.Lock()
	var es []Entry
	for _, k := range s.known {
		if k.e.Model == model {
			e := k.e
			e.LastUse = k.st.mod
			es = append(es, e)
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

// knownEntry is fullKey's entry as this process read it, if its file is
// still in the state it was then (st).
func (s *Store) knownEntry(fullKey uint64, st entryStat) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.known[fullKey]
	if !ok || !st.valid() || k.st != st {
		return Entry{}, false
	}
	return k.e, true
}

// checkImage verifies an image against its entry and the full_key asked
// for; it returns the host's part of the Definition and the boundary slots
// it writes (stages.DecodeDefinitionHost), or why the image is bad.
func checkImage(img []byte, fullKey uint64, e Entry) (*stages.Definition, []int32, string) {
	if int64(len(img)) != e.Bytes {
		return nil, nil, fmt.Sprintf("image %s is %d bytes, its entry says %d", e.Hash, len(img), e.Bytes)
	}
	def, written, err := stages.DecodeDefinitionHost(img)
	if err != nil {
		return nil, nil, fmt.Sprintf("image %s: %v", e.Hash, err)
	}
	if h := hex16(def.ContentHash); h != e.Hash {
		return nil, nil, fmt.Sprintf("image named %s has content hash %s", e.Hash, h)
	}
	if def.FullKey != fullKey {
		return nil, nil, fmt.Sprintf("image %s is full_key %016x (another model, form or key), want %016x", e.Hash, def.FullKey, fullKey)
	}
	return def, written, ""
}

func validHash(h string) bool {
	if len(h) != 16 {
		return false
	}
	_, err := strconv.ParseUint(h, 16, 64)
	return err == nil
}

// reject moves files aside and says why.
func (s *Store) reject(fullKey uint64, reason string, paths ...string) *Rejected {
	s.mu.Lock()
	delete(s.known, fullKey)
	s.mu.Unlock()
	r := &Rejected{FullKey: fullKey, Reason: reason}
	stamp := time.Now().UTC().Format("20060102T150405.000000000")
	for _, p := range paths {
		dst := filepath.Join(s.dir, "quarantine", filepath.Base(p)+"."+stamp)
		// Another process may have moved it already: then it is aside.
		if err := s.root.Rename(s.rel(p), s.rel(dst)); err == nil {
			r.Moved = append(r.Moved, filepath.Join("quarantine", filepath.Base(dst)))
		}
	}
	return r
}

// Quarantine moves fullKey's entry and its image aside, as a load that finds
// them bad does: for an entry whose image the host's checks took and the
// device then refused. It returns what it moved (nil when there was no
// entry).
func (s *Store) Quarantine(fullKey uint64, reason string) *Rejected {
	idx := s.indexPath(fullKey)
	data, err := readRegular(idx)
	if err != nil {
		return nil
	}
	paths := []string{idx}
	var e Entry
	if json.Unmarshal(data, &e) == nil && validHash(e.Hash) {
		paths = append(paths, s.objectPath(e.Hash))
	}
	return s.reject(fullKey, reason, paths...)
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
