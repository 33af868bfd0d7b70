package events

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"sync"
)

// ErrRunBusy reports that another process is appending to a run.
var ErrRunBusy = errors.New("events: run is being written by another process")

// errLockHeld is what the per-OS lockByte returns when another process
// holds the byte (fcntl EAGAIN/EACCES, LockFileEx ERROR_LOCK_VIOLATION).
var errLockHeld = errors.New("byte range locked")

// runLocks are this process's run locks over one database: a one-byte
// kernel lock per run in the file <db>-runlock (fcntl on Unix, LockFileEx
// on Windows; runlock_unix.go, runlock_windows.go). The kernel drops a
// process's locks when it exits, so a killed run never leaves one behind.
type runLocks struct {
	mu   sync.Mutex
	file *os.File
	held map[string]bool // fcntl locks do not exclude the process itself
}

// LockRun makes this process the run's only writer until unlock: a run
// and a resume of it, or two resumes, would otherwise both go on from the
// same log (compare-and-append catches the second only if it read the log
// before the first wrote). It fails at once with ErrRunBusy when another
// process, or this one, holds the run.
//
// On PostgreSQL it is a lease (lease.go): a claim of the run's row in
// run_leases with a new epoch, renewed by a heartbeat; unlock releases it.
// A run this process claimed with ClaimRuns is handed over without a
// second claim.
func (db *DB) LockRun(runID string) (unlock func(), err error) {
	if db.pg != nil {
		return db.lockRunPostgres(runID)
	}
	l := &db.locks
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[runID] {
		return nil, fmt.Errorf("%w: %s", ErrRunBusy, runID)
	}
	if l.file == nil {
		f, err := os.OpenFile(db.path+"-runlock", os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, &Error{Op: "open run lock", Path: db.path + "-runlock", Err: err}
		}
		l.file, l.held = f, map[string]bool{}
	}
	off := runLockOffset(runID)
	if err := lockByte(l.file, off); err != nil {
		if errors.Is(err, errLockHeld) {
			return nil, fmt.Errorf("%w: %s", ErrRunBusy, runID)
		}
		return nil, &Error{Op: "lock run " + runID, Path: db.path + "-runlock", Err: err}
	}
	l.held[runID] = true
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.held[runID] || l.file == nil {
			return
		}
		_ = unlockByte(l.file, off)
		delete(l.held, runID)
	}, nil
}

// runLockOffset is the one byte of the lock file that stands for runID.
func runLockOffset(runID string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, runID)
	return int64(h.Sum64() >> 2)
}

func (l *runLocks) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		_ = l.file.Close() // releases every lock this process holds on it
		l.file, l.held = nil, nil
	}
}
