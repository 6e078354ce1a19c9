package diskstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gofrs/flock"

	"github.com/hbg-dev/hbg/stages"
)

// errBusy: another process holds the store lock (it is evicting).
var errBusy = errors.New("definition store is busy")

// files is one scan of a store directory.
type files struct {
	entries    []Entry  // every readable index entry, any format version
	entryPath  []string // entries[i]'s file
	entryBytes []int64  // the entry file's own size
	entryStat  []entryStat
	badEntries []string // index files that do not parse
	objects    map[string]int64
	tmp        []string
	quarantine map[string]int64
}

func (s *Store) scan() (*files, error) {
	f := &files{objects: map[string]int64{}, quarantine: map[string]int64{}}
	idx, err := os.ReadDir(filepath.Join(s.dir, "index"))
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	for _, de := range idx {
		p := filepath.Join(s.dir, "index", de.Name())
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		data, err := readRegular(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed meanwhile
		case err != nil:
			// Unreadable (a directory, no permission): bad, not absent.
			f.badEntries = append(f.badEntries, p)
			continue
		}
		var e Entry
		if json.Unmarshal(data, &e) != nil || !validHash(e.Hash) {
			f.badEntries = append(f.badEntries, p)
			continue
		}
		e.LastUse = info.ModTime()
		f.entries = append(f.entries, e)
		f.entryPath = append(f.entryPath, p)
		f.entryBytes = append(f.entryBytes, info.Size())
		f.entryStat = append(f.entryStat, statOf(info))
	}
	for sub, m := range map[string]map[string]int64{"objects": f.objects, "quarantine": f.quarantine} {
		des, err := os.ReadDir(filepath.Join(s.dir, sub))
		if err != nil {
			return nil, fmt.Errorf("definition store: %w", err)
		}
		for _, de := range des {
			if info, err := de.Info(); err == nil {
				m[de.Name()] = info.Size()
			}
		}
	}
	tmp, err := os.ReadDir(filepath.Join(s.dir, "tmp"))
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	for _, de := range tmp {
		f.tmp = append(f.tmp, filepath.Join(s.dir, "tmp", de.Name()))
	}
	return f, nil
}

// total is every byte the store holds but what is being written.
func (f *files) total() int64 {
	var n int64
	for _, b := range f.entryBytes {
		n += b
	}
	for _, b := range f.objects {
		n += b
	}
	for _, b := range f.quarantine {
		n += b
	}
	return n
}

func (s *Store) measure() (int64, error) {
	f, err := s.scan()
	if err != nil {
		return 0, err
	}
	return f.total(), nil
}

// List returns every index entry, the most recently used first.
func (s *Store) List() ([]Entry, error) {
	f, err := s.scan()
	if err != nil {
		return nil, err
	}
	out := slices.Clone(f.entries)
	slices.SortStableFunc(out, func(a, b Entry) int { return b.LastUse.Compare(a.LastUse) })
	return out, nil
}

// Problem is one thing Verify found wrong.
type Problem struct {
	Path   string
	Reason string
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Entries int // index entries checked
	Images  int // image files checked
	Bytes   int64
	// Problems are bad entries and images: a load would reject them.
	Problems []Problem
	// Orphans are valid images no entry names (a process killed between
	// writing an image and its entry, or an entry evicted or rejected);
	// Temp are files a writer left under tmp/; Quarantined are files moved
	// aside. None of them is ever read; gc removes them.
	Orphans, Temp, Quarantined int
}

// Verify checks every entry and every image, reading without changing
// anything (a bad entry is moved aside when a load meets it, or by gc).
func (s *Store) Verify() (*VerifyReport, error) {
	f, err := s.scan()
	if err != nil {
		return nil, err
	}
	r := &VerifyReport{Entries: len(f.entries) + len(f.badEntries), Temp: len(f.tmp), Quarantined: len(f.quarantine), Bytes: f.total()}
	for _, p := range f.badEntries {
		r.Problems = append(r.Problems, Problem{p, "index entry does not parse"})
	}
	named := map[string]bool{}
	checked := map[string]string{} // object name -> problem ("" when good)
	for i, e := range f.entries {
		p := f.entryPath[i]
		fk, err := strconv.ParseUint(e.FullKey, 16, 64)
		switch {
		case err != nil:
			r.Problems = append(r.Problems, Problem{p, fmt.Sprintf("full_key %q is not hex", e.FullKey)})
			continue
		case filepath.Base(p) != fmt.Sprintf("%016x-v%d.json", fk, e.Version):
			r.Problems = append(r.Problems, Problem{p, fmt.Sprintf("entry for full_key %s version %d under another name", e.FullKey, e.Version)})
			continue
		}
		name := e.Hash + ".hbgd"
		named[name] = true
		if e.Version != stages.DefinitionVersion {
			// Another format's entry: this hbg never reads it, and it
			// does not check it either; gc evicts it when it is old.
			continue
		}
		if _, ok := f.objects[name]; !ok {
			r.Problems = append(r.Problems, Problem{p, "points to a missing image " + name})
			continue
		}
		img, err := readRegular(s.objectPath(e.Hash))
		if err != nil {
			r.Problems = append(r.Problems, Problem{p, err.Error()})
			continue
		}
		_, _, reason := checkImage(img, fk, e)
		if reason == "" {
			// A load leaves the rest of the image to the device; verify
			// checks all of it.
			if _, err := stages.DecodeDefinition(img); err != nil {
				reason = fmt.Sprintf("image %s: %v", e.Hash, err)
			}
		}
		checked[name] = reason
		if reason != "" {
			r.Problems = append(r.Problems, Problem{s.objectPath(e.Hash), reason})
		}
	}
	for name := range f.objects {
		if _, ok := checked[name]; ok {
			continue
		}
		r.Images++
		if reason := checkOrphan(filepath.Join(s.dir, "objects", name)); reason != "" {
			r.Problems = append(r.Problems, Problem{filepath.Join(s.dir, "objects", name), reason})
		} else if !named[name] {
			r.Orphans++
		}
	}
	r.Images += len(checked)
	slices.SortFunc(r.Problems, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return r, nil
}

// checkOrphan checks an image no current entry names: it must decode and
// be named by its content hash.
func checkOrphan(path string) string {
	img, err := readRegular(path)
	if err != nil {
		return err.Error()
	}
	def, err := stages.DecodeDefinition(img)
	if err != nil {
		return err.Error()
	}
	if want := hex16(def.ContentHash) + ".hbgd"; filepath.Base(path) != want {
		return "image has content hash " + hex16(def.ContentHash) + ", named " + filepath.Base(path)
	}
	return ""
}

// GCReport is what an eviction removed.
type GCReport struct {
	Before, After int64
	// Evicted are entries removed, least recently used first; Pinned the
	// entries over the limit kept because a pass has them loaded.
	Evicted []Entry
	Pinned  int
	// Orphans, Temp, Quarantined and BadEntries are leftover files removed.
	Orphans, Temp, Quarantined, BadEntries int
}

// GC brings the store under max bytes (0: the store's limit): it removes
// leftovers (files under tmp/, orphan images, quarantined files, entries
// that do not parse), then evicts the least recently used entries that no
// pass pins. It waits for writers to finish.
func (s *Store) GC(max int64) (*GCReport, error) {
	if max <= 0 {
		max = s.max
	}
	return s.evict(max, true)
}

func (s *Store) evict(max int64, wait bool) (*GCReport, error) {
	if wait {
		if err := s.lock.Lock(); err != nil {
			return nil, fmt.Errorf("definition store: %w", err)
		}
	} else {
		ok, err := s.lock.TryLock()
		if err != nil {
			return nil, fmt.Errorf("definition store: %w", err)
		}
		if !ok {
			return nil, errBusy
		}
	}
	defer s.lock.Unlock()
	s.evictions.Add(1)
	f, err := s.scan()
	if err != nil {
		return nil, err
	}
	r := &GCReport{Before: f.total()}
	total := r.Before
	// No writer holds the lock: every temp file is a dead writer's.
	for _, p := range f.tmp {
		if _, err := s.remove(p); err == nil {
			r.Temp++
		}
	}
	for _, p := range f.badEntries {
		if n, err := s.remove(p); err == nil {
			r.BadEntries++
			total -= n
		}
	}
	for name, n := range f.quarantine {
		if _, err := s.remove(filepath.Join(s.dir, "quarantine", name)); err == nil {
			r.Quarantined++
			total -= n
		}
	}
	named := map[string]bool{}
	for _, e := range f.entries {
		named[e.Hash+".hbgd"] = true
	}
	for name, n := range f.objects {
		if named[name] {
			continue
		}
		if _, err := s.remove(filepath.Join(s.dir, "objects", name)); err == nil {
			r.Orphans++
			total -= n
		}
	}
	order := make([]int, len(f.entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return f.entries[a].LastUse.Compare(f.entries[b].LastUse) })
	for _, i := range order {
		if total <= max {
			break
		}
		e, p := f.entries[i], f.entryPath[i]
		// A pinned entry holds a shared flock: the exclusive one fails
		// without waiting, and the entry stays.
		fl := flock.New(p, flock.SetFlag(os.O_RDONLY))
		ok, err := fl.TryLock()
		if err != nil || !ok {
			_ = fl.Close()
			r.Pinned++
			continue
		}
		_, err = s.remove(p)
		_ = fl.Close()
		if err != nil {
			continue
		}
		total -= f.entryBytes[i]
		if n, ok := f.objects[e.Hash+".hbgd"]; ok {
			if _, err := s.remove(s.objectPath(e.Hash)); err == nil {
				total -= n
			}
		}
		r.Evicted = append(r.Evicted, e)
	}
	for _, dir := range []string{"index", "objects"} {
		if err := syncDir(filepath.Join(s.dir, dir)); err != nil {
			return nil, err
		}
	}
	r.After = total
	s.mu.Lock()
	s.size = total
	s.mu.Unlock()
	return r, nil
}

// ParseSize reads a size: bytes, or a number with a unit (KiB, MiB, GiB,
// TiB, or KB, MB, GB, TB in powers of ten; K, M, G, T are binary).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	}[strings.ToLower(unit)]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || v <= 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with a unit (512MiB, 1GiB, 2GB)", s)
	}
	return int64(v * mult), nil
}
