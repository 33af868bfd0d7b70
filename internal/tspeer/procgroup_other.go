//go:build !unix

package tspeer

import (
	"os"
	"os/exec"
)

// ownGroup: no process groups here; killGroup kills the process itself.
func ownGroup(*exec.Cmd) {}

// killGroup kills the server process.
func killGroup(p *os.Process) { _ = p.Kill() }
