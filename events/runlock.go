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
// kernel lock per run, keyed on the database file itself rather than on
// the name it was opened by. On Linux the bytes are open file description
// locks on the database file (runlock_linux.go), so a symlink, a hard link,
// a relative path or a bind mount to the same file meets the same locks;
// elsewhere they are in <db>-runlock beside the file's real path (fcntl on
// other Unixes, LockFileEx on Windows; runlock_bsd.go, runlock_windows.go).
// The kernel drops a process's locks when it exits, so a killed run never
// leaves one behind.
type runLocks struct {
	mu   sync.Mutex
	file *os.File
	held map[string]bool // this DB's own locks: a second LockRun of one is refused here
	// id is the database file SQLite opened (stat at Open); the lock file
	// is opened only while the path still names that file (same device
	// and inode), so the locks are never taken on a file put in its place.
	id os.FileInfo
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
	return db.lockRunFile(runID)
}

// LockNewRun is LockRun for a run this process is creating: its id is new
// and nothing of it is recorded yet. On PostgreSQL the lease's row is
// inserted by the run's first commit rather than by a commit of its own
// (one commit per run fewer), and that commit skips reading the tip; on
// SQLite it is LockRun.
func (db *DB) LockNewRun(runID string) (unlock func(), err error) {
	if db.pg != nil {
		return db.lockNewRunPostgres(runID)
	}
	return db.lockRunFile(runID)
}

// lockRunFile is LockRun on SQLite: a byte lock of the database file.
func (db *DB) lockRunFile(runID string) (unlock func(), err error) {
	l := &db.locks
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[runID] {
		return nil, fmt.Errorf("%w: %s", ErrRunBusy, runID)
	}
	if l.file == nil {
		f, err := l.open(db.path)
		if err != nil {
			return nil, &Error{Op: "open run lock", Path: db.path, Err: err}
		}
		l.file, l.held = f, map[string]bool{}
	}
	off := runLockBase + runLockOffset(runID)
	if err := lockByte(l.file, off); err != nil {
		if errors.Is(err, errLockHeld) {
			return nil, fmt.Errorf("%w: %s", ErrRunBusy, runID)
		}
		return nil, &Error{Op: "lock run " + runID, Path: l.file.Name(), Err: err}
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

// probe reports whether a process (this one through this DB, or another
// open of the file) holds runID's lock, without taking it.
func (l *runLocks) probe(path, runID string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[runID] {
		return true, nil
	}
	if l.file == nil {
		f, err := l.open(path)
		if err != nil {
			return false, &Error{Op: "open run lock", Path: path, Err: err}
		}
		l.file, l.held = f, map[string]bool{}
	}
	held, err := probeByte(l.file, runLockBase+runLockOffset(runID))
	if err != nil {
		return false, &Error{Op: "probe the lock of run " + runID, Path: l.file.Name(), Err: err}
	}
	return held, nil
}

// runLockOffset is the one byte of the lock file (past runLockBase) that
// stands for runID.
func runLockOffset(runID string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, runID)
	return int64(h.Sum64() >> 8)
}

// open opens the lock file of the database at path after checking that
// path still names the file Open opened (device and inode): a database
// replaced under its name since would otherwise be locked in the wrong
// place.
func (l *runLocks) open(path string) (*os.File, error) {
	now, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if l.id == nil || !os.SameFile(now, l.id) {
		return nil, fmt.Errorf("%s is no longer the database file this process opened (replaced or moved since)", path)
	}
	f, err := openRunLockFile(path)
	if err != nil {
		return nil, err
	}
	if runLockBase != 0 { // the locks are on the database file itself: the one SQLite has open
		fi, err := f.Stat()
		if err != nil || !os.SameFile(fi, l.id) {
			_ = f.Close()
			return nil, fmt.Errorf("%s changed while its run lock was opened", path)
		}
	}
	return f, nil
}

func (l *runLocks) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		_ = l.file.Close() // releases every lock this process holds on it
		l.file, l.held = nil, nil
	}
}
