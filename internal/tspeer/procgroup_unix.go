//go:build unix

package tspeer

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts the server in a process group of its own, so that
// killGroup reaches node's children too.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the whole process group ownGroup started (negative pid).
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
