//go:build unix

package events

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

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
