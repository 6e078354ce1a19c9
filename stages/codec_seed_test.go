package stages

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/hbg-dev/hbg/stages/imagefmt"
)

// addImageSeeds adds the golden images of one kind (ext "def" or "run")
// to a decoder's fuzz corpus, as written and with the version one before
// the current one (hash fixed up, so the version check is what refuses
// it): the fuzzer starts from every section of the current version and
// from its version boundary.
func addImageSeeds(f *testing.F, ext string) {
	hashAt, version := hashOff, uint16(DefinitionVersion)
	if ext == "run" {
		hashAt, version = runHashOff, uint16(RunImageVersion)
	}
	for _, name := range []string{"tiny", "every-section"} {
		b, err := os.ReadFile(filepath.Join("testdata", "image", name+"."+ext))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		old := append([]byte(nil), b...)
		binary.LittleEndian.PutUint16(old[imagefmt.VersionAt:], version-1)
		binary.LittleEndian.PutUint64(old[hashAt:], imagefmt.Hash(old, hashAt))
		f.Add(old)
	}
}
