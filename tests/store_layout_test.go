package tests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoreSymlinkRefused: a store whose quarantine/ or tmp/ is a symbolic
// link to another directory is refused by run (with eviction due: a small
// --store-max) and by store gc, and the files behind the link survive.
func TestStoreSymlinkRefused(t *testing.T) {
	for _, sub := range []string{"quarantine", "tmp"} {
		t.Run(sub, func(t *testing.T) {
			store, outside := t.TempDir(), t.TempDir()
			runStored(t, store) // a store with entries
			planted := filepath.Join(outside, "precious.txt")
			require.NoError(t, os.WriteFile(planted, []byte("not the store's"), 0o644))
			require.NoError(t, os.RemoveAll(filepath.Join(store, sub)))
			require.NoError(t, os.Symlink(outside, filepath.Join(store, sub)))
			for _, args := range [][]string{
				{"run", dsv4, "--rounds", "1", "--store", store, "--store-max", "100KiB"},
				{"store", "gc", "--store", store},
			} {
				_, stderr, code := runCLI(t, args...)
				assert.NotEqual(t, 0, code, "%v: %s", args, stderr)
				assert.Contains(t, stderr, "is a symbolic link", "%v", args)
			}
			_, err := os.Stat(planted)
			assert.NoError(t, err, "the file behind the link")
		})
	}
}
