//go:build !linux

package transport

import (
	"errors"
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup signals the process itself (no process group here).
func signalGroup(p *os.Process, kill bool) {
	if kill {
		_ = p.Kill()
		return
	}
	_ = p.Signal(os.Interrupt)
}

func exitSignal(*os.ProcessState) string { return "" }

// ProcessStartTime is unknown outside Linux.
func ProcessStartTime(int) (uint64, error) {
	return 0, errors.New("process start time: unsupported on this platform")
}

// KillRecorded does nothing outside Linux: without a start time a reused
// pid cannot be told apart.
func KillRecorded(int, uint64) (bool, error) { return false, nil }
