package diskstore

import (
	"errors"
	"fmt"
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

// openEntry opens and pins the entry at path and reads it into buf's
// storage (grown if it is too small). ok is false on a miss: no entry, an
// evictor holds it (it is removing it), or it was removed between the open
// and the lock (its file has no link left).
func openEntry(path string, buf []byte) (f entryFile, data []byte, mod time.Time, ok bool, err error) {
	fd, err := openRead(path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return entryFile{}, nil, time.Time{}, false, nil
		}
		return entryFile{}, nil, time.Time{}, false, fmt.Errorf("definition store: opening %s: %w", path, err)
	}
	f = entryFile{fd}
	if err := retry(func() error { return syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB) }); err != nil {
		f.close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return entryFile{}, nil, time.Time{}, false, nil
		}
		return entryFile{}, nil, time.Time{}, false, fmt.Errorf("definition store: pinning %s: %w", path, err)
	}
	var st syscall.Stat_t
	if err := retry(func() error { return syscall.Fstat(fd, &st) }); err != nil {
		f.close()
		return entryFile{}, nil, time.Time{}, false, fmt.Errorf("definition store: %s: %w", path, err)
	}
	if st.Nlink == 0 {
		// An evictor removed it after our open, before our lock: the
		// file we hold is no entry any more. (Entries are created by
		// link and removed by unlink or rename, never replaced in place.)
		f.close()
		return entryFile{}, nil, time.Time{}, false, nil
	}
	data, err = readAll(fd, buf, st.Size)
	if err != nil {
		f.close()
		return entryFile{}, nil, time.Time{}, false, fmt.Errorf("definition store: reading %s: %w", path, err)
	}
	return f, data, time.Unix(st.Mtim.Sec, st.Mtim.Nsec), true, nil
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

func openRead(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// readAll reads fd from its start into buf's storage (grown to hint bytes
// if smaller) until the end of the file or until hint bytes are read.
func readAll(fd int, buf []byte, hint int64) ([]byte, error) {
	if int64(cap(buf)) < hint {
		buf = make([]byte, 0, hint)
	}
	buf = buf[:0]
	for int64(len(buf)) < hint {
		n, err := syscall.Read(fd, buf[len(buf):hint])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
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
