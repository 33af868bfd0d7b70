package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// installTestHooks gives the test binary (in process, and as agentctl in a
// subprocess) the switches the shipping binary does not have, read from
// the environment when a command needs them:
//
//   - AGENTCTL_TEST_CRASH_AFTER: the process kills itself with SIGKILL right
//     after committing the first event of this type, or whose
//     projector.Describe line is this ("call.transition
//     prepared->dispatched"); a "#N" suffix picks the Nth such event.
//   - AGENTCTL_TEST_MAX_PAGES: PRAGMA max_page_count, a full disk.
func installTestHooks() {
	testHooks.runner = func(r *workflow.Runner) {
		cp := parseCrashPoint(os.Getenv("AGENTCTL_TEST_CRASH_AFTER"))
		if cp.match == "" {
			return
		}
		observe := r.Observe
		r.Observe = func(e events.Event) {
			if observe != nil {
				observe(e)
			}
			if cp.hit(e) {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // never returns: the process is gone
			}
		}
	}
	testHooks.dbOptions = func(o *events.Options) {
		_, _ = fmt.Sscan(os.Getenv("AGENTCTL_TEST_MAX_PAGES"), &o.MaxPageCount)
	}
	testHooks.demoServerEnv = func(env map[string]spec.EnvValueSpec) {
		if v := os.Getenv("AGENTCTL_TEST_MAIN"); v != "" {
			env["AGENTCTL_TEST_MAIN"] = spec.EnvValueSpec{Value: v}
		}
	}
}

// crashPoint is a parsed AGENTCTL_TEST_CRASH_AFTER: an event type or a
// projector.Describe line, optionally "#N" for its Nth occurrence in this
// process (default 1). A line names a fact with or without the move it
// carries ("mcp.request out tools/call" is also "mcp.request out
// tools/call prepared->dispatched"), and "call.transition A->B" names the
// event that records that move, whichever fact carries it (A is not
// compared when this process did not see the call's earlier moves).
type crashPoint struct {
	match string
	nth   int
	seen  int
	d     projector.Describer
}

func parseCrashPoint(s string) crashPoint {
	if s == "" {
		return crashPoint{}
	}
	cp := crashPoint{match: s, nth: 1}
	if i := strings.LastIndexByte(s, '#'); i > 0 {
		if n, err := strconv.Atoi(s[i+1:]); err == nil && n > 0 {
			cp.match, cp.nth = s[:i], n
		}
	}
	return cp
}

// hit reports whether e is the event after which the process must die.
func (cp *crashPoint) hit(e events.Event) bool {
	if cp.match == "" || !cp.matches(e) {
		return false
	}
	cp.seen++
	return cp.seen == cp.nth
}

// matches reports whether e is the event cp names.
func (cp *crashPoint) matches(e events.Event) bool {
	return e.Type == cp.match || lineNames(cp.d.Describe(e), cp.match)
}

// lineNames reports whether the Describer line d is the event name names:
// the line itself, the fact with its move aside, or "call.transition A->B"
// for the fact that carries that move (A unknown in d matches any).
func lineNames(d, name string) bool {
	if d == name {
		return true
	}
	i := strings.LastIndexByte(d, ' ')
	if i < 0 || !strings.Contains(d[i:], "->") {
		return false
	}
	if d[:i] == name { // the fact, its move aside
		return true
	}
	want, ok := strings.CutPrefix(name, vocab.TypeCallTransition+" ")
	from, to, _ := strings.Cut(want, "->")
	gotFrom, gotTo, _ := strings.Cut(d[i+1:], "->")
	return ok && gotTo == to && (gotFrom == "" || gotFrom == from)
}

// logNames reports whether some line of a described log is name.
func logNames(lines []string, name string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return lineNames(l, name) })
}

// pointName names lines[i] as a crash point: the line and its occurrence
// counted as crashPoint.hit counts it (lines it names, up to i).
func pointName(lines []string, i int) string {
	n := 0
	for _, l := range lines[:i+1] {
		if lineNames(l, lines[i]) {
			n++
		}
	}
	return fmt.Sprintf("%s#%d", lines[i], n)
}
