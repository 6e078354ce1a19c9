package diskstore

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"
)

// A load's files are read with raw system calls: os.Open of a regular file
// costs openat, four fcntl (nonblocking mode set and cleared around a
// failed epoll registration), epoll_ctl and, in os.ReadFile, an fstat; a
// load read three files that way and spent more time entering the kernel
// than checking the image. Here an entry costs openat, flock, fstat and
// one read, and an image openat, two reads and close.

// entryFile is an index entry's file, open and locked shared: the pin that
// keeps every eviction away from the entry until it is closed.
type entryFile struct{ fd int }

// entryStat is the state of an entry's file: which file it is (entries are
// written once, under a new inode, and never rewritten in place by hbg),
// its size and its last use. A file in the same state holds the same entry.
type entryStat struct {
	dev, ino uint64
	size     int64
	mod      time.Time
	// irregular: not a regular file (a directory, a device): no entry
	// hbg wrote, and one a load moves aside.
	irregular bool
}

func (st entryStat) valid() bool { return st.ino != 0 }

func statFrom(s *syscall.Stat_t) entryStat {
	return entryStat{dev: s.Dev, ino: s.Ino, size: s.Size, mod: time.Unix(s.Mtim.Sec, s.Mtim.Nsec),
		irregular: s.Mode&syscall.S_IFMT != syscall.S_IFREG}
}

// statOf is the state of the file info describes (a directory scan's).
func statOf(info fs.FileInfo) entryStat {
	s, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return entryStat{}
	}
	return statFrom(s)
}

// openEntry opens and pins the entry at path. ok is false on a miss: no
// entry, an evictor holds it (it is removing it), or it was removed between
// the open and the lock (its file has no link left).
func openEntry(path string) (f entryFile, st entryStat, ok bool, err error) {
	fd, err := openRead(path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return entryFile{}, entryStat{}, false, nil
		}
		return entryFile{}, entryStat{}, false, fmt.Errorf("definition store: opening %s: %w", path, err)
	}
	f = entryFile{fd}
	if err := retry(func() error { return syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB) }); err != nil {
		f.close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return entryFile{}, entryStat{}, false, nil
		}
		return entryFile{}, entryStat{}, false, fmt.Errorf("definition store: pinning %s: %w", path, err)
	}
	var s syscall.Stat_t
	if err := retry(func() error { return syscall.Fstat(fd, &s) }); err != nil {
		f.close()
		return entryFile{}, entryStat{}, false, fmt.Errorf("definition store: %s: %w", path, err)
	}
	if s.Nlink == 0 {
		// An evictor removed it after our open, before our lock: the
		// file we hold is no entry any more. (Entries are created by
		// link and removed by unlink or rename, never replaced in place.)
		f.close()
		return entryFile{}, entryStat{}, false, nil
	}
	return f, statFrom(&s), true, nil
}

// read reads the entry (st.size bytes) into buf's storage, grown if it is
// too small.
func (f entryFile) read(buf []byte, st entryStat) ([]byte, error) {
	b, err := readAll(f.fd, buf, st.size)
	if err != nil {
		return nil, fmt.Errorf("definition store: reading an index entry: %w", err)
	}
	return b, nil
}

// close releases the pin.
func (f entryFile) close() {
	if f.fd > 0 {
		_ = syscall.Close(f.fd)
	}
}

// readImage reads the file at path, which should be n bytes long: the
// bytes when it is exactly that (in a slice of their own, which the caller
// keeps), else its length. A missing file is an error wrapping
// fs.ErrNotExist.
func readImage(path string, n int64) (img []byte, size int64, err error) {
	fd, err := openRead(path)
	if err != nil {
		return nil, 0, fmt.Errorf("definition store: opening %s: %w", path, err)
	}
	defer syscall.Close(fd)
	if n > bigImage {
		// A damaged entry must not make us allocate what it claims.
		var st syscall.Stat_t
		if err := retry(func() error { return syscall.Fstat(fd, &st) }); err != nil {
			return nil, 0, fmt.Errorf("definition store: %s: %w", path, err)
		}
		if st.Size != n {
			return nil, st.Size, nil
		}
	}
	// One byte more than expected: a longer file shows without a stat.
	// A read of a regular file returns less than asked only at its end,
	// so one that returns the n bytes expected needs no second read to
	// see the end (were it cut short on some other file system, the bytes
	// would still be the n the image's own length and hash are checked
	// against).
	b := make([]byte, n+1)
	k, err := readFull(fd, b, n)
	if errors.Is(err, syscall.EISDIR) {
		return nil, 0, errNotRegular
	}
	if err != nil {
		return nil, 0, fmt.Errorf("definition store: reading %s: %w", path, err)
	}
	b = b[:k]
	if int64(len(b)) != n {
		size = int64(len(b))
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil {
			size = st.Size
		}
		return nil, size, nil
	}
	return b, n, nil
}

// openRead opens path for reading without following a symbolic link at
// its end (ELOOP, reported as errNotRegular) and without blocking: a named
// pipe planted in the store opens at once instead of waiting for a writer
// (which hung a load and verify past SIGTERM), and reads of it return at
// once. Reads of a regular file are the same either way.
func openRead(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.ELOOP:
			return -1, fmt.Errorf("%w (a symbolic link)", errNotRegular)
		}
		return fd, err
	}
}

// readRegular reads the whole of the regular file at path: the store's
// maintenance reads (verify, gc, a batch's comparison, Quarantine) go
// through it, so a directory, pipe, device or symbolic link planted in the
// store is errNotRegular, never a read that blocks or does not end.
func readRegular(path string) ([]byte, error) {
	fd, err := openRead(path)
	if err != nil {
		return nil, fmt.Errorf("definition store: opening %s: %w", path, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := retry(func() error { return syscall.Fstat(fd, &st) }); err != nil {
		return nil, fmt.Errorf("definition store: %s: %w", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fmt.Errorf("definition store: %s: %w", path, errNotRegular)
	}
	b, err := readAll(fd, nil, st.Size)
	if err != nil {
		return nil, fmt.Errorf("definition store: reading %s: %w", path, err)
	}
	return b, nil
}

// readAll reads fd from its start into buf's storage (grown to hint bytes
// if smaller) until the end of the file or until hint bytes are read.
func readAll(fd int, buf []byte, hint int64) ([]byte, error) {
	if int64(cap(buf)) < hint {
		buf = make([]byte, 0, hint)
	}
	n, err := readFull(fd, buf[:hint], hint)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// readFull reads fd into b until b is full, the file ends, or a read
// returns exactly enough to make stop bytes.
func readFull(fd int, b []byte, stop int64) (int, error) {
	k := 0
	for k < len(b) {
		n, err := syscall.Read(fd, b[k:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return k, nil
		}
		k += n
		if int64(k) == stop {
			return k, nil
		}
	}
	return k, nil
}

func retry(f func() error) error {
	for {
		if err := f(); err != syscall.EINTR {
			return err
		}
	}
}
