package tests

import (
	"errors"
	"os"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
)

// The run images of one warm DSv4 `full` pass, as shipped to the device:
// the good one, and the same with one task's fanin count changed from 3 to
// 7 (hash recomputed), which made the fanin spans overlap and sum past the
// fanin pool and panicked the device.
const (
	goodRunImage        = "../stages/testdata/dsv4-run-image-good.bin"
	overlappingRunImage = "../stages/testdata/dsv4-run-image-overlapping-fanin.bin"
)

// fullFormDevice is a device with DSv4's entry roots and kernels registered
// and the full form's Definitions uploaded, as after one pass of
// `hbgrun run --form full`. It returns each Definition's hash by full_key.
func fullFormDevice(t *testing.T, m *config.Model) (*npu.Die, map[uint64]uint64) {
	t.Helper()
	o := &collector{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots()), seen: map[uint64]bool{}, identity: m.Name + "/full"}
	if err := m.Run(o, "full"); err != nil {
		t.Fatal(err)
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	d := npu.New(npu.Config{})
	d.RegisterEntry(m.EntryRoots())
	d.RegisterKernels(m.Kernels())
	byKey := map[uint64]uint64{}
	for _, b := range o.images {
		if _, err := d.Upload(b); err != nil {
			t.Fatal(err)
		}
		def, err := stages.DecodeDefinition(b)
		if err != nil {
			t.Fatal(err)
		}
		byKey[def.FullKey] = def.ContentHash
	}
	return d, byKey
}

// eagerDigest runs DSv4's eager form on a device of its own.
func eagerDigest(t *testing.T, m *config.Model) uint64 {
	t.Helper()
	o := stages.NewOrdinaryPath(m.EntryRoots())
	if err := m.Run(o, "eager"); err != nil {
		t.Fatal(err)
	}
	d := npu.New(npu.Config{})
	d.RegisterEntry(m.EntryRoots())
	d.RegisterKernels(m.Kernels())
	if err := d.CopyRun(stages.EncodeRunImage(o.Image())); err != nil {
		t.Fatal(err)
	}
	res, err := d.Launch()
	if err != nil {
		t.Fatal(err)
	}
	return res.Digest
}

// TestShippedRunImages launches the stored images: the bit-flipped one is
// refused with an error (not a panic caught as "request panicked"), and the
// device still runs the good one to eager's digest.
func TestShippedRunImages(t *testing.T) {
	m := loadDSv4(t)
	d, byKey := fullFormDevice(t, m)
	good := readImage(t, goodRunImage)
	bad := readImage(t, overlappingRunImage)

	if err := d.CopyRun(bad); err != nil {
		t.Fatal(err)
	}
	_, err := launchNoPanic(t, d)
	if !errors.Is(err, stages.ErrBadImage) {
		t.Fatalf("overlapping fanin: err = %v, want a refusal wrapping stages.ErrBadImage", err)
	}

	// The image names its Definitions by full_key and content hash; the
	// hash follows the Definition encoding, so point it at today's.
	img, err := stages.DecodeRunImage(good)
	if err != nil {
		t.Fatal(err)
	}
	for i := range img.Graphs {
		g := &img.Graphs[i]
		h, ok := byKey[g.FullKey]
		if !ok {
			t.Fatalf("graph submission %d replays full_key %#016x, which the full form does not record", i, g.FullKey)
		}
		g.DefHash = h
	}
	if err := d.CopyRun(stages.EncodeRunImage(img)); err != nil {
		t.Fatal(err)
	}
	res, err := launchNoPanic(t, d)
	if err != nil {
		t.Fatalf("good image: %v", err)
	}
	if want := eagerDigest(t, m); res.Digest != want {
		t.Fatalf("good image digest %016x, eager %016x", res.Digest, want)
	}
}

func readImage(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func launchNoPanic(t *testing.T, d *npu.Die) (res *npu.Result, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("launch panicked: %v", p)
		}
	}()
	return d.Launch()
}
