//go:build windows

package events

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// openRunLockFile opens <db>-runlock beside the database's real path
// (symlinks resolved), whose bytes stand for runs: a byte-range lock on
// the database file itself would block SQLite's reads of it on Windows.
func openRunLockFile(path string) (*os.File, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	return os.OpenFile(real+"-runlock", os.O_RDWR|os.O_CREATE, 0o600)
}

// runLockBase is 0: the lock file holds nothing but locks.
const runLockBase = 0

// lockByte takes an exclusive LockFileEx lock on one byte of f without
// waiting; errLockHeld when another process holds it.
func lockByte(f *os.File, off int64) error {
	ol := overlappedAt(off)
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return fmt.Errorf("%w: %w", errLockHeld, err)
	}
	return err
}

// unlockByte releases the lock lockByte took.
func unlockByte(f *os.File, off int64) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, overlappedAt(off))
}

func overlappedAt(off int64) *windows.Overlapped {
	return &windows.Overlapped{Offset: uint32(off), OffsetHigh: uint32(off >> 32)}
}

// probeByte reports whether another process holds the byte lockByte would
// take: it takes the lock and gives it back at once.
func probeByte(f *os.File, off int64) (bool, error) {
	if err := lockByte(f, off); err != nil {
		if errors.Is(err, errLockHeld) {
			return true, nil
		}
		return false, err
	}
	return false, unlockByte(f, off)
}
