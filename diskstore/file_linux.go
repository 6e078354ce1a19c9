package diskstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The store's files are read with raw system calls: os.Open of a regular
// file costs openat, four fcntl (nonblocking mode set and cleared around a
// failed epoll registration), epoll_ctl and an fstat; a load here costs
// openat, flock and fstat of the pack, one pread of the record, and the
// close of the pack once its Definition is uploaded.

// rfile is a store file open for reading (a pack: its fd's shared flock is
// the pin that keeps every eviction away from the pack).
type rfile struct{ fd int }

// fileState is what fstat says of a file.
type fileState struct {
	dev, ino uint64
	size     int64
	mod      time.Time
	nlink    uint64
	regular  bool
}

func stateFrom(s *unix.Stat_t) fileState {
	return fileState{dev: s.Dev, ino: s.Ino, size: s.Size, mod: time.Unix(s.Mtim.Sec, s.Mtim.Nsec), nlink: uint64(s.Nlink),
		regular: s.Mode&unix.S_IFMT == unix.S_IFREG}
}

// openFile opens path for reading without following a symbolic link at its
// end (ELOOP, reported as errNotRegular) and without blocking: a named pipe
// planted in the store opens at once instead of waiting for a writer (which
// hung a load and verify past SIGTERM), and reads of it return at once.
// Reads of a regular file are the same either way. A missing file is an
// error wrapping fs.ErrNotExist.
func openFile(path string) (rfile, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		switch err {
		case nil:
			return rfile{fd}, nil
		case unix.EINTR:
			continue
		case unix.ELOOP:
			return rfile{-1}, fmt.Errorf("definition store: %s: %w (a symbolic link)", path, errNotRegular)
		}
		return rfile{-1}, fmt.Errorf("definition store: opening %s: %w", path, err)
	}
}

func (f rfile) stat() (fileState, error) {
	var s unix.Stat_t
	if err := retry(func() error { return unix.Fstat(f.fd, &s) }); err != nil {
		return fileState{}, fmt.Errorf("definition store: fstat: %w", err)
	}
	return stateFrom(&s), nil
}

// lock takes the file's flock, shared or exclusive, without waiting: false
// when another open file holds a conflicting one.
func (f rfile) lock(exclusive bool) (bool, error) {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	err := retry(func() error { return unix.Flock(f.fd, how|unix.LOCK_NB) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	}
	return false, fmt.Errorf("definition store: flock: %w", err)
}

// readFullAt fills b from off; a file that ends first is io.ErrUnexpectedEOF.
func (f rfile) readFullAt(b []byte, off int64) error {
	for k := 0; k < len(b); {
		n, err := unix.Pread(f.fd, b[k:], off+int64(k))
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EISDIR:
			return errNotRegular
		case err != nil:
			return fmt.Errorf("definition store: reading: %w", err)
		case n == 0:
			return io.ErrUnexpectedEOF
		}
		k += n
	}
	return nil
}

// touch sets the file's modification time (a pack's last use).
func (f rfile) touch(t time.Time) error {
	tv := []unix.Timeval{unix.NsecToTimeval(t.UnixNano()), unix.NsecToTimeval(t.UnixNano())}
	return unix.Futimes(f.fd, tv)
}

func (f rfile) close() {
	if f.fd >= 0 {
		_ = unix.Close(f.fd)
	}
}

// dirState is what says whether a directory changed: its identity, size,
// and change and modification times.
type dirState struct {
	ino, size  int64
	mtim, ctim int64 // ns
}

func statDir(path string) (dirState, error) {
	var s unix.Stat_t
	if err := retry(func() error { return unix.Stat(path, &s) }); err != nil {
		return dirState{}, fmt.Errorf("definition store: %w", err)
	}
	return dirState{ino: int64(s.Ino), size: s.Size, mtim: s.Mtim.Nano(), ctim: s.Ctim.Nano()}, nil
}

func (d dirState) modified() time.Time { return time.Unix(0, d.mtim) }

// readDirNames lists a directory's names, without the stat per file
// os.ReadDir's Info costs.
func readDirNames(path string) ([]string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("definition store: opening %s: %w", path, err)
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 8<<10)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("definition store: reading %s: %w", path, err)
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}

func retry(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

// noFile is no open file.
var noFile = rfile{-1}

// links is how many names the file of st has (a planted hard link has two).
func links(st fs.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Nlink)
	}
	return 1
}

// sparse reports whether the file has far fewer bytes on disk than its
// length claims: hbg never writes a sparse pack, and a 52 KB file that
// declares 16 GiB of images must not be read as 16 GiB of zeros.
func (f rfile) sparse() bool {
	var s unix.Stat_t
	if err := retry(func() error { return unix.Fstat(f.fd, &s) }); err != nil {
		return false
	}
	return s.Size > sparseSlack && s.Blocks*512 < s.Size/2
}
