package diskstore

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncFiles makes the data of files durable. Past two, one syncfs(2) of
// their file system costs less than an fsync each: on this project's ext4
// each fsync is a journal commit of its own (writing 200 small files and
// syncing each took 0.4-1.1 ms a file, one syncfs after them 0.23-0.45 ms).
func syncFiles(files []*staged) error {
	if len(files) <= 2 {
		for _, f := range files {
			if err := f.f.Sync(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := unix.Syncfs(int(files[0].f.Fd())); err != nil {
		return fmt.Errorf("syncfs: %w", os.NewSyscallError("syncfs", err))
	}
	return nil
}
