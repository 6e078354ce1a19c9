// Package clock reads the wall clock: it may be any package of the module
// (trace, say) that a pure stage should not reach.
package clock

import "time"

// Now is the wall clock in nanoseconds.
func Now() int64 { return time.Now().UnixNano() }
