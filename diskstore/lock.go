package diskstore

import (
	"fmt"
	"sync"

	"github.com/gofrs/flock"
)

// storeLock is the store's lock: the flock of its lock file, which other
// processes see, and an in-process RWMutex, because a flock belongs to the
// open file: two goroutines of one process would share it (an eviction
// would turn a writer's shared lock exclusive and remove its temporary
// file; the first writer to finish would release the lock of the others).
// The first writer in the process takes the flock shared, the last
// releases it.
type storeLock struct {
	rw      sync.RWMutex
	mu      sync.Mutex
	readers int
	fl      *flock.Flock
}

func (l *storeLock) rlock() error {
	l.rw.RLock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers == 0 {
		if err := l.fl.RLock(); err != nil {
			l.rw.RUnlock()
			return fmt.Errorf("definition store: %w", err)
		}
	}
	l.readers++
	return nil
}

func (l *storeLock) runlock() {
	l.mu.Lock()
	if l.readers--; l.readers == 0 {
		_ = l.fl.Unlock()
	}
	l.mu.Unlock()
	l.rw.RUnlock()
}

// lock takes the lock exclusive, waiting for it or not (false: another
// goroutine or process holds it).
func (l *storeLock) lock(wait bool) (bool, error) {
	if wait {
		l.rw.Lock()
	} else if !l.rw.TryLock() {
		return false, nil
	}
	var ok bool
	var err error
	if wait {
		ok, err = true, l.fl.Lock()
	} else {
		ok, err = l.fl.TryLock()
	}
	if err != nil || !ok {
		l.rw.Unlock()
		if err != nil {
			return false, fmt.Errorf("definition store: %w", err)
		}
		return false, nil
	}
	return true, nil
}

func (l *storeLock) unlock() {
	_ = l.fl.Unlock()
	l.rw.Unlock()
}
