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

// rfile is a store file open for reading; lock takes a flock through a file
// of its own (gofrs/flock), closed with it.
type rfile struct {
	f    *os.File
	fl   *flock.Flock
	path string
}

// fileState is what a stat says of a file. nlink is 1 while the path still
// names the file open (os.SameFile), 0 once it does not.
type fileState struct {
	size    int64
	mod     time.Time
	nlink   uint64
	regular bool
}

// openFile opens path for reading, refusing a symbolic link at its end
// (errNotRegular); a named pipe is refused before it is opened, so that
// the open does not wait for a writer.
func openFile(path string) (rfile, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return rfile{}, fmt.Errorf("definition store: %w", err)
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		return rfile{}, fmt.Errorf("definition store: %s: %w (a %s)", path, errNotRegular, kindOf(st.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return rfile{}, fmt.Errorf("definition store: %w", err)
	}
	return rfile{f: f, path: path}, nil
}

func (f rfile) stat() (fileState, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return fileState{}, fmt.Errorf("definition store: %w", err)
	}
	st := fileState{size: fi.Size(), mod: fi.ModTime(), regular: fi.Mode().IsRegular()}
	if cur, err := os.Lstat(f.path); err == nil && os.SameFile(fi, cur) {
		st.nlink = 1
	}
	return st, nil
}

func (f *rfile) lock(exclusive bool) (bool, error) {
	if f.fl == nil {
		f.fl = flock.New(f.path, flock.SetFlag(os.O_RDONLY))
	}
	var ok bool
	var err error
	if exclusive {
		ok, err = f.fl.TryLock()
	} else {
		ok, err = f.fl.TryRLock()
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("definition store: flock: %w", err)
	}
	return ok, nil
}

func (f rfile) readFullAt(b []byte, off int64) error {
	_, err := f.f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (f rfile) touch(t time.Time) error { return os.Chtimes(f.path, t, t) }

func (f rfile) close() {
	if f.fl != nil {
		_ = f.fl.Close()
	}
	if f.f != nil {
		_ = f.f.Close()
	}
}

// dirState is what says whether a directory changed.
type dirState struct {
	size int64
	mod  time.Time
}

func statDir(path string) (dirState, error) {
	st, err := os.Stat(path)
	if err != nil {
		return dirState{}, fmt.Errorf("definition store: %w", err)
	}
	return dirState{size: st.Size(), mod: st.ModTime()}, nil
}

func (d dirState) modified() time.Time { return d.mod }

func readDirNames(path string) ([]string, error) {
	d, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("definition store: %w", err)
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// noFile is no open file.
var noFile = rfile{}

// links is 1 where the platform does not say.
func links(fs.FileInfo) uint64 { return 1 }

// sparse is false where the platform does not say.
func (rfile) sparse() bool { return false }
