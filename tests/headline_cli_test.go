package tests

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunHeadlineFirst: `hbgrun run` (make run's default model) leads with
// the headline, and leaves out the all-zero rows unless -v.
func TestRunHeadlineFirst(t *testing.T) {
	out, stderr, code := runCLI(t, "run", "--rounds", "3", "--store", "off")
	require.Equal(t, 0, code, stderr)
	first, rest, _ := strings.Cut(out, "\n")
	assert.Regexp(t, regexp.MustCompile(`^dsv4_flash_decode full: control plane [0-9]+\.[0-9]{3} ms per pass \(warm median of 2\); `+
		`the ordinary path's host_orch not measured here \(hbgrun compare measures it\); golden match, 0 races \(1892 declared\); `+
		`device wall [0-9]+\.[0-9]{3} ms \(simulated\)$`), first)
	assert.True(t, strings.HasPrefix(rest, "model dsv4_flash_decode, form full"), rest)
	for _, zero := range []string{"store_load", "peer_fetch", "fetched_definitions"} {
		assert.NotContains(t, out, zero)
	}
	out, stderr, code = runCLI(t, "run", "--rounds", "2", "--store", "off", "-v")
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(out, "dsv4_flash_decode full: control plane "), out)
	for _, zero := range []string{"store_load", "peer_fetch", "fetched_definitions"} {
		assert.Contains(t, out, zero, "-v shows every row")
	}
}
