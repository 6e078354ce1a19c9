//go:build !linux

package diskstore

// syncFiles makes the data of files durable: an fsync each, where there is
// no syncfs(2).
func syncFiles(files []*staged) error {
	for _, f := range files {
		if err := f.f.Sync(); err != nil {
			return err
		}
	}
	return nil
}
