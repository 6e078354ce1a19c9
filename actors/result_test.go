package actors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hbg-dev/hbg/npu"
)

func TestPassResultDurations(t *testing.T) {
	var skipped PassResult
	_, ok := skipped.DeviceWall()
	assert.False(t, ok, "a pass the device did not run has no device wall")
	_, ok = skipped.CriticalPath()
	assert.False(t, ok)

	r := PassResult{Device: &npu.Result{SimNs: 30_622_000, CriticalPathNs: 12_500}}
	wall, ok := r.DeviceWall()
	assert.True(t, ok)
	assert.Equal(t, 30622*time.Microsecond, wall)
	cp, ok := r.CriticalPath()
	assert.True(t, ok)
	assert.Equal(t, 12500*time.Nanosecond, cp)
}
