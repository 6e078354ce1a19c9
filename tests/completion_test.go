package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// completed is what `hbgrun __complete ARGS` offers, without its directive
// line.
func completed(t *testing.T, args ...string) []string {
	t.Helper()
	out, stderr, code := runCLI(t, append([]string{"__complete"}, args...)...)
	require.Equal(t, 0, code, stderr)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, ":") && l != "" {
			got = append(got, l)
		}
	}
	return got
}

// TestCompletion: --form completes from the model file on the line,
// --forms its last element, and every enumerated flag its values.
func TestCompletion(t *testing.T) {
	assert.Equal(t, []string{"eager", "pair", "blocks", "full", "step"}, completed(t, "run", dsv4, "--form", ""))
	assert.Equal(t, []string{"eager", "pair", "blocks", "full", "step"}, completed(t, "run", "--form", ""), "the embedded default")
	assert.Equal(t, []string{"blocks"}, completed(t, "run", dsv4, "--form", "b"))
	assert.Equal(t, []string{"eager,pair", "eager,blocks", "eager,full", "eager,step"}, completed(t, "compare", dsv4, "--forms", "eager,"))
	assert.Equal(t, []string{"error", "warn"}, completed(t, "run", "--defects", ""))
	assert.Equal(t, []string{"error", "warn"}, completed(t, "compare", "--defects", ""))
	assert.Equal(t, []string{"true", "false"}, completed(t, "run", "--race="), "a bool takes its value after =")
	assert.Equal(t, []string{"off"}, completed(t, "run", "--store", "o"))
	assert.Equal(t, []string{"off"}, completed(t, "store", "ls", "--store", ""))
	assert.Equal(t, []string{"yaml", "yml"}, completed(t, "run", ""), "a MODEL is a YAML file")
}

// TestStoreHumanUnits: store ls says sizes and its limit with units.
func TestStoreHumanUnits(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "run", dsv4, "--rounds", "1", "--skip-device", "--store", dir)
	require.Equal(t, 0, code, stderr)
	out, stderr, code := runCLI(t, "store", "ls", "--store", dir)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, regexp.MustCompile(`(?m)^8 Definitions, [0-9.]+ KiB of images in .* \(limit 1\.0 GiB\)$`), out)
	assert.Regexp(t, regexp.MustCompile(`\s[0-9.]+ (B|KiB)\s`), out)
	_, err := os.Stat(filepath.Join(dir, "packs"))
	require.NoError(t, err)
}
