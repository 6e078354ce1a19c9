package actors

import (
	"os"
	"testing"

	"github.com/hbg-dev/hbg/internal/storetest"
)

// damage flips the last byte of image im in its pack.
func damage(t *testing.T, im storetest.Image) {
	t.Helper()
	b, err := os.ReadFile(im.Pack)
	if err != nil {
		t.Fatal(err)
	}
	b[im.Off+im.N-1] ^= 0xff
	if err := os.WriteFile(im.Pack, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
