package events

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// openRunLockFile opens the database file itself: its run locks are open
// file description locks (F_OFD_SETLK) on bytes far past any page, so they
// belong to the file, not to a name of it. Every path that reaches the
// file (a symlink, a hard link, a relative path, a bind mount) meets the
// same locks. Unlike classic fcntl locks they are not dropped when SQLite
// closes another descriptor of the file, they exclude two opens within one
// process as well, and they never overlap SQLite's own lock bytes (at 1 GiB).
func openRunLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR, 0)
}

// runLockBase is where the run lock bytes start in the database file:
// 2^56, past the largest database SQLite can write (2^32 pages of 64 KiB).
const runLockBase = 1 << 56

// lockByte takes an exclusive OFD lock on one byte of f without waiting;
// errLockHeld when another open of the file holds it.
func lockByte(f *os.File, off int64) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: off, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: %w", errLockHeld, err)
		}
		return err
	}
	return nil
}

// unlockByte releases the lock lockByte took.
func unlockByte(f *os.File, off int64) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: off, Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

// probeByte reports whether another open of f holds the byte lockByte
// would take, without taking it (F_OFD_GETLK): a probe never makes a
// concurrent LockRun fail.
func probeByte(f *os.File, off int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: off, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}
