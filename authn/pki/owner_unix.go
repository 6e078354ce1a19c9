//go:build unix

package pki

import (
	"os"
	"syscall"
)

// owner is the uid that owns the file.
func owner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
