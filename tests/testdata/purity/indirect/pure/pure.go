// Package pure imports nothing the purity rule names, and still reads the
// clock, through package clock: the rule over the whole import closure must
// refuse it (TestPurityClosureCatches).
package pure

import "github.com/hbg-dev/hbg/tests/testdata/purity/indirect/clock"

// Stamp looks like a pure step and is not.
func Stamp(x int64) int64 { return x + clock.Now() }
