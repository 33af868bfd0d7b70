package main

import (
	"os"
	"runtime"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow/spec"
)

// fitProcs, set by main only (tests run commands in their own process and
// keep its GOMAXPROCS), lowers GOMAXPROCS to the lanes a run (or a
// worker: its --concurrency) on PostgreSQL can keep busy at once, unless
// the user set GOMAXPROCS. A
// run's own work is short bursts between waits on its database and its MCP
// servers: with more Ps than lanes, every hand-off between goroutines (the
// HTTP transport's read and write loops, the database driver, the group
// commit) wakes an idle P on another thread, which costs more CPU than the
// parallelism gives back. Not on SQLite: its commit is a cgo call that
// holds its P through the fsync, and a second P lets the goroutines
// reading the next frames run meanwhile (with one, a call streaming
// progress was 10% slower). BENCHMARKS.md, session 18, has the figures.
var fitProcs func(lanes int)

// fitProcsToLanes is fitProcs for the real process.
func fitProcsToLanes(lanes int) {
	if os.Getenv("GOMAXPROCS") != "" || lanes < 1 {
		return
	}
	if lanes < runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(lanes)
	}
}

// workflowLanes is how many tasks of one run of wf can be in flight at
// once: its concurrency (override, when set, as --concurrency), 1 for a
// workflow whose tasks form one chain (each needs the one before), and
// otherwise at most its widest level of tasks that may run together.
func workflowLanes(wf *spec.Workflow, override int) int {
	c := wf.TaskConcurrency()
	if override > 0 {
		c = override
	}
	width := 0
	for _, level := range wf.Order() {
		width = max(width, len(level))
	}
	return max(min(c, width), 1)
}

// fitLanes applies fitProcs, when main set it, for lanes of a run on
// PostgreSQL.
func (a *app) fitLanes(lanes int) {
	if fitProcs != nil && events.IsPostgres(a.databasePath()) {
		fitProcs(lanes)
	}
}
