package diskstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hbg-dev/hbg/stages"
)

// errBusy: another process holds the store lock (it is evicting).
var errBusy = errors.New("definition store is busy")

// leftover is the files of a store that are no pack: under tmp/ (a writer's,
// or a dead one's), quarantine/, and an earlier layout's objects/ and
// index/ (legacyDirs).
type leftover struct {
	tmp, quarantine, legacy []string // paths relative to the store
	foreign                 []string // names hbg's layout never makes: left alone
	bytes                   int64    // all of them but tmp/'s
}

// leftovers lists them. A directory of the store that cannot be read is
// an error, one that is not there (a legacy one) is empty.
func (s *Store) leftovers() (*leftover, error) {
	lo := &leftover{}
	for _, sub := range []string{"tmp", "quarantine", "objects", "index"} {
		des, err := fs.ReadDir(s.root.FS(), sub)
		if errors.Is(err, fs.ErrNotExist) && slices.Contains(legacyDirs, sub) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("definition store: %w", err)
		}
		for _, de := range des {
			rel := filepath.Join(sub, de.Name())
			if !ownName(sub, de.Name()) {
				lo.foreign = append(lo.foreign, rel)
				continue
			}
			switch sub {
			case "tmp":
				lo.tmp = append(lo.tmp, rel)
				continue
			case "quarantine":
				lo.quarantine = append(lo.quarantine, rel)
			default:
				lo.legacy = append(lo.legacy, rel)
			}
			if info, err := de.Info(); err == nil {
				lo.bytes += info.Size()
			}
		}
	}
	return lo, nil
}

// List returns every entry of the store, one per full_key and image format
// version, the most recently used first.
func (s *Store) List() ([]Entry, error) {
	if _, err := s.refresh(false); err != nil {
		return nil, err
	}
	s.refreshUse()
	s.mu.Lock()
	type kv struct {
		fk uint64
		v  uint16
	}
	seen := map[kv]bool{}
	var out []Entry
	for _, p := range s.packs {
		for i := range p.entries {
			e := &p.entries[i]
			if k := (kv{e.fullKey, e.version}); !seen[k] {
				seen[k] = true
				out = append(out, entryOf(p, e, p.mod))
			}
		}
	}
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Entry) int {
		if c := b.LastUse.Compare(a.LastUse); c != 0 {
			return c
		}
		return strings.Compare(a.FullKey, b.FullKey)
	})
	return out, nil
}

// refreshUse reads each pack's last use: another process's loads touch it.
func (s *Store) refreshUse() {
	s.mu.Lock()
	ps := make([]*pack, 0, len(s.packs))
	for _, p := range s.packs {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	for _, p := range ps {
		if st, err := s.root.Lstat(filepath.Join("packs", p.name)); err == nil {
			s.mu.Lock()
			p.mod = st.ModTime()
			s.mu.Unlock()
		}
	}
}

// shadowed is the packs every entry of which another pack kept holds (two
// processes that stored the same Definitions): gc removes them. A pack of
// another format, or one with no entry, is nobody's duplicate.
func shadowed(packs []*pack) []*pack {
	type kv struct {
		fk uint64
		v  uint16
	}
	// The packs with the most entries are kept first, so that fewer files
	// remain; then the oldest name, for an order every process agrees on.
	order := slices.Clone(packs)
	slices.SortFunc(order, func(a, b *pack) int {
		if c := len(b.entries) - len(a.entries); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	held := map[kv]bool{}
	var out []*pack
	for _, p := range order {
		dup := len(p.entries) > 0 && !p.foreign
		for i := range p.entries {
			if !held[kv{p.entries[i].fullKey, p.entries[i].version}] {
				dup = false
				break
			}
		}
		if dup {
			out = append(out, p)
			continue
		}
		for i := range p.entries {
			held[kv{p.entries[i].fullKey, p.entries[i].version}] = true
		}
	}
	return out
}

// Problem is one thing Verify found wrong.
type Problem struct {
	Path   string
	Reason string
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Packs   int // pack files checked
	Entries int // records in them, every one checked
	Images  int // images checked (the records of this hbg's image format)
	Bytes   int64
	// Problems are bad packs and records: a load would reject them (and
	// move their pack aside), or never read them.
	Problems []Problem
	// Shadowed are packs every entry of which another pack holds (two
	// processes stored the same Definitions); Temp are files a writer
	// left under tmp/; Quarantined are files moved aside; Legacy are an
	// earlier hbg's objects/ and index/ files. None of them is ever read;
	// gc removes them.
	Shadowed, Temp, Quarantined, Legacy int
	// Signed are the good records that keep a signature beside their
	// image, for the caller to verify (the store checks nothing of a
	// signature: package peer/defsig does).
	Signed []SignedRecord
}

// SignedRecord is a record that keeps a signature, as Verify found it.
type SignedRecord struct {
	Path      string // the pack's
	FullKey   uint64
	Key       string
	Hash      uint64 // the image's content hash, which Verify checked
	Version   uint16 // the image format version
	Signature []byte
}

// Verify checks every pack and every record in it, images whole, reading
// without changing anything (a bad pack is moved aside when a load meets
// it, or removed by gc).
func (s *Store) Verify() (*VerifyReport, error) { return s.VerifyContext(context.Background()) }

// VerifyContext is Verify, ended early (with ctx's error) when ctx is: it
// checks ctx before each record, so a store of large images stops within
// one image's check.
func (s *Store) VerifyContext(ctx context.Context) (*VerifyReport, error) {
	names, err := readDirNames(s.packDir)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	lo, err := s.leftovers()
	if err != nil {
		return nil, err
	}
	r := &VerifyReport{Temp: len(lo.tmp), Quarantined: len(lo.quarantine), Legacy: len(lo.legacy), Bytes: lo.bytes}
	for _, rel := range lo.foreign {
		r.Problems = append(r.Problems, Problem{filepath.Join(s.dir, rel), "not one hbg wrote (a name its layout never makes): gc leaves it; remove it by hand"})
	}
	var good []*pack
	for _, n := range names {
		path := s.packDir + n
		p, reason, err := s.readPack(n, nil)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			reason = err.Error()
		}
		r.Packs++
		if reason != "" {
			r.Problems = append(r.Problems, Problem{path, reason})
			continue
		}
		r.Bytes += p.size
		r.Entries += len(p.entries)
		probs, images, signed, err := s.verifyPack(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, sr := range signed {
			sr.Path = path
			r.Signed = append(r.Signed, sr)
		}
		r.Images += images
		for _, pr := range probs {
			r.Problems = append(r.Problems, Problem{path, pr})
		}
		if len(probs) == 0 {
			good = append(good, p)
		}
	}
	r.Shadowed = len(shadowed(good))
	return r, nil
}

// verifyPack reads and checks every record of p: its header against the
// table of contents, and its image in full (stages.DecodeDefinition, which
// checks what the device would). It returns what is wrong, and how many
// images it checked, and the good records that keep a signature.
func (s *Store) verifyPack(ctx context.Context, p *pack) ([]string, int, []SignedRecord, error) {
	f, err := openFile(s.packDir + p.name)
	if err != nil {
		return []string{err.Error()}, 0, nil, nil
	}
	defer f.close()
	head := make([]byte, packHeader)
	if err := f.readFullAt(head, 0); err != nil {
		return []string{"header: " + err.Error()}, 0, nil, nil
	}
	if reason := checkPackHeader(head); reason != "" || p.foreign {
		return nil, 0, nil, nil // readPack saw it; another format is not checked
	}
	var probs []string
	var signed []SignedRecord
	images := 0
	for i := range p.entries {
		if err := ctx.Err(); err != nil {
			return nil, images, nil, fmt.Errorf("definition store: verify: %w", err)
		}
		e := &p.entries[i]
		rec := make([]byte, e.recLen())
		if err := f.readFullAt(rec, e.off); err != nil {
			probs = append(probs, fmt.Sprintf("record %d (full_key %016x): %v", i, e.fullKey, err))
			continue
		}
		sig, img, reason := splitRecord(rec, e)
		switch {
		case reason != "":
		case !loadable(e):
			continue // another image format's: this hbg never reads it
		default:
			images++
			if _, _, reason = checkImage(img, e.fullKey, e); reason == "" {
				if _, err := decodeFull(img); err != nil {
					reason = fmt.Sprintf("image %016x: %v", e.hash, err)
				}
			}
		}
		if reason != "" {
			probs = append(probs, fmt.Sprintf("record %d (full_key %016x, key %q): %s", i, e.fullKey, e.key, reason))
		} else if len(sig) > 0 {
			signed = append(signed, SignedRecord{FullKey: e.fullKey, Key: e.key, Hash: e.hash, Version: e.version, Signature: sig})
		}
	}
	return probs, images, signed, nil
}

// GCReport is what an eviction removed.
type GCReport struct {
	Before, After int64
	// Evicted are entries removed with their packs, least recently used
	// first; Pinned the packs over the limit kept because a pass has one
	// of their entries loaded.
	Evicted []Entry
	Pinned  int
	// Shadowed, Temp, Quarantined, Legacy and BadPacks are files removed:
	// duplicate packs, leftovers of killed writers, files moved aside, an
	// earlier layout's files, and packs that do not read.
	Shadowed, Temp, Quarantined, Legacy, BadPacks int
	// Unreadable are packs moved aside (then removed) for an image that
	// does not check in full, their good records stored again.
	Unreadable int
}

// GC brings the store under max bytes (0: the store's limit): it removes
// leftovers (files under tmp/, quarantined files, the legacy layout's
// files, packs that do not read, and packs every entry of which another
// pack holds), then evicts the least recently used packs that no pass
// pins. It waits for writers to finish.
//
// gc checks every image in full first, as verify does, and moves aside a
// pack with an image the device would refuse (keeping its good records),
// so a store that fails runs is mended by gc alone.
func (s *Store) GC(max int64) (*GCReport, error) { return s.GCContext(context.Background(), max) }

// GCContext is GC, whose check of every image ends early (with ctx's
// error, nothing removed) when ctx is.
func (s *Store) GCContext(ctx context.Context, max int64) (*GCReport, error) {
	if max <= 0 {
		max = s.max
	}
	unreadable, err := s.moveUnreadable(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.evict(max, true, true)
	if r != nil {
		r.Unreadable = unreadable
	}
	return r, err
}

// moveUnreadable moves aside each pack of the index with a record that
// does not check in full; it returns how many.
func (s *Store) moveUnreadable(ctx context.Context) (int, error) {
	if _, err := s.refresh(true); err != nil {
		return 0, err
	}
	s.mu.Lock()
	packs := make([]*pack, 0, len(s.packs))
	for _, p := range s.packs {
		packs = append(packs, p)
	}
	s.mu.Unlock()
	n := 0
	for _, p := range packs {
		probs, _, _, err := s.verifyPack(ctx, p)
		if err != nil {
			return n, err
		}
		if len(probs) > 0 {
			// No key of the pack is excluded from salvage (0 is no
			// full_key a recording makes): each good record is kept.
			s.reject(0, probs[0], p)
			n++
		}
	}
	return n, nil
}

// evict brings the store under max bytes, under the exclusive store lock
// (waiting for it, or errBusy). gc also removes shadowed packs and lists
// what it evicted.
func (s *Store) evict(max int64, wait, gc bool) (*GCReport, error) {
	ok, err := s.lock.lock(wait)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errBusy
	}
	defer s.lock.unlock()
	s.evictions.Add(1)
	if _, err := s.refresh(true); err != nil {
		return nil, err
	}
	lo, err := s.leftovers()
	if err != nil {
		return nil, err
	}
	s.refreshUse()
	s.mu.Lock()
	packs := make([]*pack, 0, len(s.packs))
	mods := make(map[*pack]time.Time, len(s.packs))
	var total int64
	for _, p := range s.packs {
		packs = append(packs, p)
		mods[p] = p.mod
		total += p.size
	}
	bad := make([]string, 0, len(s.bad))
	for n := range s.bad {
		bad = append(bad, n)
	}
	s.mu.Unlock()
	r := &GCReport{}
	extra := lo.bytes
	// No writer holds the lock: every temp file is a dead writer's.
	for _, rel := range lo.tmp {
		if _, err := s.remove(rel); err == nil {
			r.Temp++
		}
	}
	for _, rel := range lo.quarantine {
		if n, err := s.remove(rel); err == nil {
			r.Quarantined++
			extra -= n
		}
	}
	for _, rel := range lo.legacy {
		if n, err := s.remove(rel); err == nil {
			r.Legacy++
			extra -= n
		}
	}
	for _, sub := range legacyDirs {
		_, _ = s.remove(sub) // when empty
	}
	for _, n := range bad {
		if sz, err := s.remove(filepath.Join("packs", n)); err == nil {
			r.BadPacks++
			extra -= sz
		} else if !errors.Is(err, fs.ErrNotExist) {
			if st, err := s.root.Lstat(filepath.Join("packs", n)); err == nil && st.Mode().IsRegular() {
				extra += st.Size()
			}
		}
	}
	r.Before = total + lo.bytes
	var gone []*pack
	var dups map[*pack]bool
	if gc {
		dups = map[*pack]bool{}
		for _, p := range shadowed(packs) {
			dups[p] = true
			if s.evictPack(p) {
				r.Shadowed++
				total -= p.size
				gone = append(gone, p)
			}
		}
	}
	slices.SortStableFunc(packs, func(a, b *pack) int {
		if c := mods[a].Compare(mods[b]); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for _, p := range packs {
		if total+extra <= max {
			break
		}
		if dups[p] {
			continue
		}
		if !s.evictPack(p) {
			r.Pinned++
			continue
		}
		total -= p.size
		gone = append(gone, p)
		if gc {
			for i := range p.entries {
				r.Evicted = append(r.Evicted, entryOf(p, &p.entries[i], mods[p]))
			}
		}
	}
	s.mu.Lock()
	s.forgetLocked(gone...)
	s.extra = extra
	s.size = total + extra
	s.mu.Unlock()
	if err := syncDir(filepath.Join(s.dir, "packs")); err != nil {
		return nil, err
	}
	r.After = total + extra
	return r, nil
}

// evictPack removes p unless a pass pins it: a pinned pack holds a shared
// flock, and the exclusive one fails without waiting. The pack is removed
// while its lock is held, so a load that opened it first sees no link left.
func (s *Store) evictPack(p *pack) bool {
	f, err := openFile(s.packDir + p.name)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) // gone already
	}
	defer f.close()
	ok, err := f.lock(true)
	if err != nil || !ok {
		return false
	}
	_, err = s.remove(filepath.Join("packs", p.name))
	return err == nil || errors.Is(err, fs.ErrNotExist)
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

// decodeFull decodes a whole image, as the device would.
func decodeFull(img []byte) (*stages.Definition, error) { return stages.DecodeDefinition(img) }
