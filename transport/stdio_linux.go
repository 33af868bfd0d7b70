//go:build linux

package transport

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts a stdio server in its own process group (so that a
// shutdown signal reaches what it spawned) and asks the kernel to kill it
// when agentctl dies, SIGKILL included (the parent-death signal).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends SIGTERM (or SIGKILL) to p's process group.
func signalGroup(p *os.Process, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-p.Pid, sig)
}

func exitSignal(st *os.ProcessState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}

// ProcessStartTime returns field 22 of /proc/PID/stat: the process's start
// time in clock ticks after boot. With the pid it names one process for
// good: a reused pid has another start time.
func ProcessStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold anything:
	// fields are counted after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := bytes.Fields(b[i+1:])
	const startField = 22 - 3 // fields after the name start at field 3 (state)
	if len(f) <= startField {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(string(f[startField]), 10, 64)
}

// KillRecorded kills the process group of a stdio server recorded with pid
// and startTime, if that very process is still alive: a pid now held by
// another process (another start time) is never signalled. It reports
// whether it signalled anything.
func KillRecorded(pid int, startTime uint64) (bool, error) {
	if pid <= 1 || startTime == 0 {
		return false, nil
	}
	st, err := ProcessStartTime(pid)
	if err != nil || st != startTime {
		return false, nil // gone, or the pid was reused
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return false, fmt.Errorf("kill stdio server group %d: %w", pid, err)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL) // in case it left its group
	return true, nil
}
