//go:build !linux

package diskstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/gofrs/flock"
)

// entryFile is an index entry's file, open and locked shared: the pin that
// keeps every eviction away from the entry until it is closed.
type entryFile struct {
	fl   *flock.Flock
	path string
}

// entryStat is the state of an entry's file. Here it never identifies the
// file, so every load reads its entry.
type entryStat struct {
	size      int64
	mod       time.Time
	irregular bool // not a regular file: moved aside by a load
}

func (st entryStat) valid() bool { return false }

func statOf(info fs.FileInfo) entryStat { return entryStat{} }

// openEntry opens and pins the entry at path. ok is false on a miss: no
// entry, an evictor holds it (it is removing it), or it was removed or
// replaced between the open and the lock.
func openEntry(path string) (f entryFile, st entryStat, ok bool, err error) {
	fl := flock.New(path, flock.SetFlag(os.O_RDONLY))
	locked, err := fl.TryRLock()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return entryFile{}, entryStat{}, false, nil
	case err != nil:
		return entryFile{}, entryStat{}, false, fmt.Errorf("definition store: pinning %s: %w", path, err)
	case !locked:
		_ = fl.Close()
		return entryFile{}, entryStat{}, false, nil
	}
	f = entryFile{fl, path}
	fi, err := fl.Stat()
	if err != nil {
		f.close()
		return entryFile{}, entryStat{}, false, fmt.Errorf("definition store: %s: %w", path, err)
	}
	if cur, err := os.Stat(path); err != nil || !os.SameFile(fi, cur) {
		f.close()
		return entryFile{}, entryStat{}, false, nil
	}
	return f, entryStat{size: fi.Size(), mod: fi.ModTime(), irregular: !fi.Mode().IsRegular()}, true, nil
}

// read reads the entry.
func (f entryFile) read(buf []byte, st entryStat) ([]byte, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	return b, nil
}

// close releases the pin.
func (f entryFile) close() {
	if f.fl != nil {
		_ = f.fl.Close()
	}
}

// readImage reads the file at path, which should be n bytes long: the
// bytes when it is exactly that, else its length.
func readImage(path string, n int64) (img []byte, size int64, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("definition store: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("definition store: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, 0, errNotRegular
	}
	// A damaged entry must not make us allocate what it claims.
	if n > bigImage && st.Size() != n {
		return nil, st.Size(), nil
	}
	b := make([]byte, n+1)
	k, err := io.ReadFull(fh, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, 0, fmt.Errorf("definition store: reading %s: %w", path, err)
	}
	if int64(k) != n {
		size = int64(k)
		if st, err := fh.Stat(); err == nil {
			size = st.Size()
		}
		return nil, size, nil
	}
	return b[:n:n], n, nil
}

// readRegular reads the whole of the regular file at path, refusing
// (errNotRegular) anything else planted in the store: a directory, pipe,
// device or symbolic link.
func readRegular(path string) ([]byte, error) {
	if st, err := os.Lstat(path); err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("definition store: %s: %w", path, errNotRegular)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("definition store: %s: %w", path, errNotRegular)
	}
	return io.ReadAll(io.LimitReader(fh, st.Size()))
}
