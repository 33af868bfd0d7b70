//go:build unix && !linux

package events

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// openRunLockFile opens the file whose bytes stand for runs. Without Linux's
// open file description locks, a classic fcntl lock on the database file
// itself would be dropped whenever SQLite closes any descriptor of it, so
// the locks live in <db>-runlock beside the database's real path (symlinks
// resolved: every name of the file through a symlink, a relative path or a
// bind mount meets the same lock file; a second hard link does not).
func openRunLockFile(path string) (*os.File, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	return os.OpenFile(real+"-runlock", os.O_RDWR|os.O_CREATE, 0o600)
}

// runLockBase is 0: the lock file holds nothing but locks.
const runLockBase = 0

// lockByte takes an exclusive fcntl lock on one byte of f without waiting;
// errLockHeld when another process holds it.
func lockByte(f *os.File, off int64) error {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: off, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			return fmt.Errorf("%w: %w", errLockHeld, err)
		}
		return err
	}
	return nil
}

// unlockByte releases the lock lockByte took.
func unlockByte(f *os.File, off int64) error {
	lk := syscall.Flock_t{Type: syscall.F_UNLCK, Whence: io.SeekStart, Start: off, Len: 1}
	return syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
}

// probeByte reports whether another process holds the byte lockByte would
// take: it takes the lock and gives it back at once (F_GETLK would not see
// a lock of this process's other descriptors).
func probeByte(f *os.File, off int64) (bool, error) {
	if err := lockByte(f, off); err != nil {
		if errors.Is(err, errLockHeld) {
			return true, nil
		}
		return false, err
	}
	return false, unlockByte(f, off)
}
