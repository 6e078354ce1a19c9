package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// fullDisk is a filesystem with free bytes left: a write past them writes
// what fits and fails with ENOSPC, as a full disk's does.
type fullDisk struct{ free int }

func (d *fullDisk) create(dir, pattern string) (outFile, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &fullFile{File: f, disk: d}, nil
}

type fullFile struct {
	*os.File
	disk *fullDisk
}

func (f *fullFile) Write(b []byte) (int, error) {
	n := min(len(b), f.disk.free)
	n, err := f.File.Write(b[:n])
	f.disk.free -= n
	if err == nil && n < len(b) {
		err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return n, err
}

// TestImagesFullDisk: --images on a disk that fills up while the second run
// image is written leaves the first run image whole, no part of the second
// nor any Definition, and no temporary; it says it wrote 1 run image and 0
// Definitions, and the run fails naming the full disk. It once wrote every
// file in place and counted every image the devices got: a full disk left
// a truncated run image and empty .def files, reported as written.
func TestImagesFullDisk(t *testing.T) {
	// A real run's images and store, written to a disk with room.
	whole, store := t.TempDir(), t.TempDir()
	f := testFlags(t, "--form", "full", "--rounds", "3", "--skip-device", "--store", store)
	f.images = whole
	if err := runCmd(context.Background(), &bytes.Buffer{}, &bytes.Buffer{}, "", f); err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(whole, "run-*.run"))
	defs, _ := filepath.Glob(filepath.Join(whole, "*.def"))
	if len(runs) != 3 || len(defs) == 0 {
		t.Fatalf("the run wrote %v and %v", runs, defs)
	}
	first, err := os.ReadFile(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The same images, observed by a dump whose disk fills up halfway
	// through the second.
	second, _ := os.ReadFile(runs[1])
	disk := &fullDisk{free: len(first) + len(second)/2}
	dir := t.TempDir()
	storeDir := store
	d, err := newImageDump(dir, &storeDir, false)
	if err != nil {
		t.Fatal(err)
	}
	d.create = disk.create
	observe := d.observe(nil)
	for _, path := range runs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := stages.DecodeRunImage(b)
		if err != nil {
			t.Fatal(err)
		}
		observe(img)
	}
	var stderr bytes.Buffer
	err = d.finish(store, &stderr)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "run-0002.run") {
		t.Errorf("want the full disk naming run-0002.run, got %v", err)
	}
	if want := fmt.Sprintf("wrote 1 run image and 0 Definitions to %s", dir); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not say %q", stderr.String(), want)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"run-0001.run"}) {
		t.Fatalf("the full disk holds %v, want only run-0001.run", names)
	}
	got, err := os.ReadFile(filepath.Join(dir, "run-0001.run"))
	if err != nil || !bytes.Equal(got, first) {
		t.Errorf("run-0001.run is not the whole image (%d bytes of %d): %v", len(got), len(first), err)
	}
}

// TestImagesDirRefusedUpFront: --images naming a directory that exists but
// takes no file is refused before the first pass, as a usage error (exit
// 2), with nothing run or printed: it once cost the whole run, then failed
// (FINDINGS.md F15). /proc refuses a new file to root too.
func TestImagesDirRefusedUpFront(t *testing.T) {
	if st, err := os.Stat("/proc"); err != nil || !st.IsDir() {
		t.Skip("no /proc here")
	}
	f := testFlags(t, "--form", "full", "--rounds", "2", "--skip-device", "--store", "off")
	f.images = "/proc"
	var stdout bytes.Buffer
	err := runCmd(context.Background(), &stdout, &bytes.Buffer{}, "", f)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--images: /proc takes no file") {
		t.Fatalf("got %v, want a usage error naming --images and /proc", err)
	}
	if stdout.Len() != 0 {
		t.Fatalf("a run was reported before the refusal:\n%s", stdout.String())
	}
}
