package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// imageDump writes what the device got (run --images DIR): every run image
// as the runtime copied it, run-NNNN.run in the order the devices got them
// (all ranks together), and every Definition those images replay,
// <content hash>.def, taken from the store the run wrote it to.
type imageDump struct {
	dir string
	// tmpStore is the store a run with --store off keeps its Definitions
	// in, removed by finish.
	tmpStore string

	// create makes a file's temporary (os.CreateTemp; a test's can fail
	// as a full disk does).
	create func(dir, pattern string) (outFile, error)

	mu      sync.Mutex
	runs    int             // run images the devices got
	written int             // of them, those written
	defs    map[uint64]bool // content hashes the run images replay
	err     error
}

// outFile is what writeFile writes through: an *os.File.
type outFile interface {
	io.Writer
	Chmod(mode os.FileMode) error
	Sync() error
	Close() error
	Name() string
}

func createTemp(dir, pattern string) (outFile, error) { return os.CreateTemp(dir, pattern) }

// writeFile writes b to dir/name as the whole file or not at all: into a
// temporary in dir, renamed to name once written and synced. A failure (a
// full disk) removes the temporary, so dir never holds a partial file
// under an image's name, nor a stray temporary.
func (d *imageDump) writeFile(name string, b []byte) error {
	f, err := d.create(d.dir, "."+name+".*.tmp")
	if err != nil {
		return err
	}
	// CreateTemp's file is the owner's alone; an image is anyone's to read,
	// as a file os.WriteFile makes.
	err = f.Chmod(0o644)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(d.dir, name))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// newImageDump makes dir and, when the run has no store (*storeDir ""),
// a temporary one for it, so that every Definition built is on disk.
// Without retention no Definition is kept past its pass, on disk or
// anywhere, so there is nothing to write them from.
func newImageDump(dir string, storeDir *string, noRetain bool) (*imageDump, error) {
	if noRetain {
		return nil, usageError{errors.New("--images with --no-retain: the Definitions of a pass are kept nowhere to be written from; drop one of them")}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, usageError{fmt.Errorf("--images: %w", err)}
	}
	// A directory that exists but takes no file (read-only, another
	// user's) is refused now, as --out and --trace-out are, not after the
	// run it would cost.
	probe, err := os.CreateTemp(dir, ".hbgrun-probe-*.tmp")
	if err != nil {
		return nil, usageError{fmt.Errorf("--images: %s takes no file: %w", dir, err)}
	}
	probe.Close()
	os.Remove(probe.Name())
	d := &imageDump{dir: dir, defs: map[uint64]bool{}, create: createTemp}
	if *storeDir == "" {
		tmp, err := os.MkdirTemp("", "hbgrun-images-store")
		if err != nil {
			return nil, fmt.Errorf("--images: a store for the run's Definitions: %w", err)
		}
		d.tmpStore, *storeDir = tmp, tmp
	}
	return d, nil
}

// observe is the runtime's image hook: it runs next, then the image is
// written as the runtime encodes it (the encoding is a function of the
// image, so these are the bytes the device copies).
func (d *imageDump) observe(next func(*stages.RunImage)) func(*stages.RunImage) {
	return func(img *stages.RunImage) {
		if next != nil {
			next(img)
		}
		b := stages.EncodeRunImage(img)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.runs++
		for _, g := range img.Graphs {
			d.defs[g.DefHash] = true
		}
		// After a failure the rest are not tried: the disk is full, or
		// the directory gone, and one error says so.
		if d.err == nil {
			if err := d.writeFile(fmt.Sprintf("run-%04d.run", d.runs), b); err != nil {
				d.err = fmt.Errorf("--images: %w", err)
			} else {
				d.written++
			}
		}
	}
}

// close removes the temporary store, if any.
func (d *imageDump) close() {
	if d.tmpStore != "" {
		_ = os.RemoveAll(d.tmpStore)
	}
}

// finish writes the Definitions the run images replay, once the runtime has
// stopped: read from the store at storeDir (diskstore.Store.Image finds
// each in its pack) and checked. It says on stderr what it wrote, which
// is every file there is: a file that failed is not there.
func (d *imageDump) finish(storeDir string, stderr io.Writer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.err
	hashes := make([]uint64, 0, len(d.defs))
	for h := range d.defs {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	written := 0
	store, serr := diskstore.Open(storeDir, 0)
	if serr == nil {
		defer store.Close()
	}
	for _, h := range hashes {
		name := fmt.Sprintf("%016x", h)
		var b []byte
		rerr := serr
		if rerr == nil {
			if b, rerr = store.Image(h); rerr != nil {
				// A nested Definition is kept as parts: the run image
				// replays its flattening, the store holds its own image
				// and its children's, written instead.
				var parts map[uint64][]byte
				if parts = nestedParts(store, h); parts != nil {
					for ph, pb := range parts {
						if werr := d.writeFile(fmt.Sprintf("%016x.def", ph), pb); werr != nil {
							err = errors.Join(err, werr)
							continue
						}
						written++
					}
					continue
				}
			}
		}
		if rerr == nil && stages.DefinitionHash(b) != h {
			rerr = fmt.Errorf("its content hash is %#016x", stages.DefinitionHash(b))
		}
		if rerr == nil {
			_, rerr = stages.DecodeDefinition(b)
		}
		if rerr == nil {
			rerr = d.writeFile(name+".def", b)
		}
		if rerr == nil {
			written++
		} else {
			err = errors.Join(err, fmt.Errorf("--images: Definition %s, which a run image replays: %w", name, rerr))
		}
	}
	fmt.Fprintf(stderr, "hbgrun: wrote %s and %s to %s (hbgrun describe FILE prints one)\n", trace.Plural(int64(d.written), "run image"), trace.Plural(int64(written), "Definition"), d.dir)
	return err
}

// nestedParts finds the nested Definition of the store whose flattening
// hashes to flat, and returns its own image and its children's (nested
// ones' parts too) by content hash; nil when none does.
func nestedParts(store *diskstore.Store, flat uint64) map[uint64][]byte {
	es, err := store.List()
	if err != nil {
		return nil
	}
	byKey := map[uint64][]byte{}
	for _, e := range es {
		fk, err1 := strconv.ParseUint(e.FullKey, 16, 64)
		h, err2 := strconv.ParseUint(e.Hash, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if b, err := store.Image(h); err == nil {
			byKey[fk] = b
		}
	}
	var assemble func(own []byte, parts map[uint64][]byte) (*stages.Published, error)
	assemble = func(own []byte, parts map[uint64][]byte) (*stages.Published, error) {
		parts[stages.DefinitionHash(own)] = own
		return stages.AssembleNested(own, func(c stages.Child) (*stages.Published, error) {
			b := byKey[c.FullKey]
			if b == nil {
				return nil, nil
			}
			d, written, err := stages.DecodeDefinitionHost(b)
			if err != nil {
				return nil, err
			}
			if d.Nested() {
				return assemble(b, parts)
			}
			parts[d.ContentHash] = b
			return &stages.Published{Def: d, Image: b, Hash: d.ContentHash, Written: written}, nil
		}, true)
	}
	for _, own := range byKey {
		if d, _, err := stages.DecodeDefinitionHost(own); err != nil || !d.Nested() {
			continue
		}
		parts := map[uint64][]byte{}
		if p, err := assemble(own, parts); err == nil && p.Hash == flat {
			return parts
		}
	}
	return nil
}
