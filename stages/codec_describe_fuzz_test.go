package stages

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// FuzzDescribeImage feeds `hbgrun describe` what a user may hand it: any
// bytes, and the same bytes with the content hash fixed up so the structural
// checks behind it are reached. It must never panic; what it refuses it
// refuses with ErrBadImage.
func FuzzDescribeImage(f *testing.F) {
	for _, name := range []string{"tiny.def", "tiny.run", "every-section.def", "every-section.run"} {
		b, err := os.ReadFile(filepath.Join("testdata", "image", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("HBGD\x02\x00"))
	f.Add([]byte("HBGR"))
	f.Fuzz(func(t *testing.T, b []byte) {
		describeOK(t, b)
		c := append([]byte(nil), b...)
		switch {
		case len(c) >= defHeaderSize && string(c[:4]) == DefinitionMagic:
			binary.LittleEndian.PutUint64(c[hashOff:], imagefmt.Hash(c, hashOff))
		case len(c) >= runHeaderSize && string(c[:4]) == RunImageMagic:
			binary.LittleEndian.PutUint64(c[runHashOff:], imagefmt.Hash(c, runHashOff))
		default:
			return
		}
		describeOK(t, c)
	})
}

func describeOK(t *testing.T, b []byte) {
	t.Helper()
	if err := DescribeImage(io.Discard, b); err != nil && !errors.Is(err, ErrBadImage) {
		t.Fatalf("DescribeImage: %v, want nil or an ErrBadImage", err)
	}
}
