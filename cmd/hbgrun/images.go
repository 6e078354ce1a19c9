package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hbg-dev/hbg/stages"
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

	mu   sync.Mutex
	runs int
	defs map[uint64]bool // content hashes the run images replay
	err  error
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
	d := &imageDump{dir: dir, defs: map[uint64]bool{}}
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
		if d.err == nil {
			if err := os.WriteFile(filepath.Join(d.dir, fmt.Sprintf("run-%04d.run", d.runs)), b, 0o644); err != nil {
				d.err = fmt.Errorf("--images: %w", err)
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
// stopped: read from the store at storeDir (objects/<hash>.hbgd, package
// diskstore's layout) and checked. It says on stderr what it wrote.
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
	for _, h := range hashes {
		name := fmt.Sprintf("%016x", h)
		b, rerr := os.ReadFile(filepath.Join(storeDir, "objects", name+".hbgd"))
		if rerr == nil && stages.DefinitionHash(b) != h {
			rerr = fmt.Errorf("its content hash is %#016x", stages.DefinitionHash(b))
		}
		if rerr == nil {
			_, rerr = stages.DecodeDefinition(b)
		}
		if rerr == nil {
			rerr = os.WriteFile(filepath.Join(d.dir, name+".def"), b, 0o644)
		}
		if rerr == nil {
			written++
		} else {
			err = errors.Join(err, fmt.Errorf("--images: Definition %s, which a run image replays: %w", name, rerr))
		}
	}
	fmt.Fprintf(stderr, "hbgrun: wrote %d run images and %d Definitions to %s (hbgrun describe FILE prints one)\n", d.runs, written, d.dir)
	return err
}
