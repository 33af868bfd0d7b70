package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport"
)

// The crash matrix over stdio (issue #29 item 4): the same kill -9 after
// every commit of a call as TestCLI_CrashMatrix, with the demo server
// (go-sdk) as a stdio child process (this test binary in demotest's demo
// mode). The server counts its executions in a file, across every process
// of the run and of its resume, and writes "start PID STARTTIME" when it
// starts. After each kill and after each resume, no server process is
// left alive.

// stdioCrashScenario is one way a call over stdio can go.
type stdioCrashScenario struct {
	name       string
	tool, args string
	// die: the first server process runs this tool, then exits before
	// answering (demotest.DieEnv).
	die string
	// linger: the server outlives the end of its stdin (demotest.LingerEnv):
	// only a signal ends it, so a kill -9 of agentctl leaves it running
	// unless the parent-death signal reaches it.
	linger bool
	// from: points start after the first event with this Describe line; "" = all.
	from string
	// want, wantNR: a line each class's reference run must contain, for
	// pure/idempotent/keyed and for at_most_once/unknown.
	want, wantNR string
	// outputs: the run's outputs when it succeeds.
	outputs string
	// protocol pins the remote's protocolVersion (and the demo server's
	// only revision); "" = the default (crash_2026_test.go).
	protocol string
}

func stdioCrashScenarios() []stdioCrashScenario {
	const analyzed = `{"result":{"steps":2,"words":3}}`
	return []stdioCrashScenario{
		{name: "ok", tool: "analyze", args: `{text: "a b c", steps: 2}`, outputs: analyzed, linger: true,
			want: "call.transition dispatched->succeeded", wantNR: "call.transition dispatched->succeeded"},
		{name: "tool-error", tool: "fail", args: `{message: nope}`, from: "mcp.request out tools/call",
			want: "call.transition dispatched->failed", wantNR: "call.transition dispatched->failed"},
		{name: "server-died", tool: "analyze", args: `{text: "a b c", steps: 2}`, die: "analyze", from: "mcp.request out tools/call", outputs: analyzed,
			want: "call.transition reconnecting->redispatched", wantNR: "call.transition dispatched->uncertain"},
	}
}

// stdioPeerFiles are the files a scenario's server processes write.
type stdioPeerFiles struct{ starts, calls string }

// stdioCrashWorkflow writes sc's one-task workflow for class idem, its
// server this binary as a demo stdio peer writing into files.
func stdioCrashWorkflow(t *testing.T, sc stdioCrashScenario, idem string) (string, stdioPeerFiles) {
	t.Helper()
	dir := t.TempDir()
	files := stdioPeerFiles{starts: filepath.Join(dir, "starts"), calls: filepath.Join(dir, "calls")}
	env := fmt.Sprintf("env: {%s: demo, %s: %q, %s: %q", demotest.PeerEnv, demotest.StartsEnv, files.starts, demotest.CallsEnv, files.calls)
	if sc.die != "" {
		env += fmt.Sprintf(", %s: %s", demotest.DieEnv, sc.die)
	}
	if sc.linger {
		env += fmt.Sprintf(", %s: \"1\"", demotest.LingerEnv)
	}
	keys := []string{"shutdownGraceSeconds: 1"}
	if sc.protocol != "" {
		env += fmt.Sprintf(", %s: %q", demotest.ProtocolEnv, sc.protocol)
		keys = append(keys, fmt.Sprintf("protocolVersion: %q", sc.protocol))
	}
	wf := testkit.Workflow{Name: "act-once-stdio", Command: []string{os.Args[0]}, ServerKeys: append([]string{env + "}"}, keys...),
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: sc.tool, Arguments: sc.args}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}
	// A failing test leaves no server behind (pid and start time: never
	// another process).
	t.Cleanup(func() {
		for _, p := range stdioStarts(t, files.starts) {
			_, _ = transport.KillRecorded(int(p[0]), p[1])
		}
	})
	return wf.WriteFile(t), files
}

// stdioStarts lists the server processes started: pid and start time.
func stdioStarts(t *testing.T, file string) [][2]uint64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]uint64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "start" {
			t.Fatalf("starts file line %q", l)
		}
		pid, err1 := strconv.ParseUint(f[1], 10, 32)
		st, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("starts file line %q", l)
		}
		out = append(out, [2]uint64{pid, st})
	}
	return out
}

// serverAlive reports whether the process pid started at start still runs
// (a zombie or a pid reused by a later process does not).
func serverAlive(pid int, start uint64) bool {
	st, err := transport.ProcessStartTime(pid)
	if err != nil || st != start {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// assertNoServerAlive waits (bounded: the kernel delivers the parent-death
// signal asynchronously) until no server process of files is alive.
func assertNoServerAlive(t *testing.T, files stdioPeerFiles, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range stdioStarts(t, files.starts) {
		for serverAlive(int(p[0]), p[1]) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: server process %d is still alive", when, p[0])
			}
			time.Sleep(5 * time.Millisecond) // polling the kernel's state, bounded by deadline
		}
	}
}

// executions counts the runs of tool's handler across all server processes.
func executions(t *testing.T, files stdioPeerFiles, tool string) int {
	t.Helper()
	return countLines(t, files.calls, tool+" ")
}

// commitPoints lists the crash points of a reference log from the first
// event after from on, grouped by the commit that made them durable
// (events of one commit share created_at), as crashReference does.
func commitPoints(evs []events.Event, from string) [][]string {
	var points [][]string
	started := from == ""
	lines := describeAll(evs)
	for i, e := range evs {
		l := lines[i]
		p := pointName(lines, i)
		if started && l != "run.created" {
			if n := len(points); n > 0 && !everyEvent && e.CreatedAt == evs[i-1].CreatedAt {
				points[n-1] = append(points[n-1], p)
			} else {
				points = append(points, []string{p})
			}
		}
		if !started && from != "" && (p == from || lineNames(l, from)) {
			started = true
		}
	}
	return points
}

// TestCLI_CrashMatrixStdio kills agentctl (kill -9) after every commit of a
// call to a stdio server, for every class, and resumes. Whatever the
// point: no server process outlives agentctl or the resume; the server
// executed an at_most_once/unknown tool at most once and a
// pure/idempotent/keyed one at most twice; no event is lost or rewritten;
// an outcome on disk is kept; the resume finishes and replays from the log
// alone, starting no process. SQLite (the matrix over HTTP covers
// PostgreSQL; the transport is what differs here).
func TestCLI_CrashMatrixStdio(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	kills := 0
	t.Cleanup(func() { t.Logf("stdio crash matrix: %d kills", kills) })
	for _, sc := range append(stdioCrashScenarios(), stdioCrashScenarios2026()...) {
		for _, idem := range allClasses {
			t.Run(sc.name+"/"+idem, func(t *testing.T) {
				t.Parallel()
				ref := stdioCrashReference(t, sc, idem)
				for _, group := range ref.points {
					name := strings.NewReplacer(" ", "_", "#", "@").Replace(group[0])
					if len(group) > 1 {
						name += fmt.Sprintf("+%d", len(group)-1)
					}
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						stdioCrashAndResume(t, sc, idem, group[0], ref)
						mu.Lock()
						kills++
						mu.Unlock()
					})
				}
			})
		}
	}
}

// stdioCrashReference runs sc for idem without a crash and lists its points.
func stdioCrashReference(t *testing.T, sc stdioCrashScenario, idem string) crashRef {
	t.Helper()
	wf, files := stdioCrashWorkflow(t, sc, idem)
	db := filepath.Join(t.TempDir(), "ref.db")
	_, stderr, code := cli(t, "run", wf, "--db", db, "--output", "json")
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("reference run: %s", stderr)
	}
	evs := logOf(t, db, ids[0])
	ref := crashRef{code: code, lines: describeAll(evs), points: commitPoints(evs, sc.from)}
	want := sc.want
	if !isRedispatchable(idem) {
		want = sc.wantNR
	}
	if !logNames(ref.lines, want) || !slices.Contains(ref.lines, "mcp.process local") {
		t.Fatalf("%s/%s: reference run lacks %q or mcp.process:\n%s", sc.name, idem, want, strings.Join(ref.lines, "\n"))
	}
	if len(ref.points) == 0 {
		t.Fatalf("%s/%s: no point after %q", sc.name, idem, sc.from)
	}
	if sc.protocol != "" && (!slices.Contains(ref.lines, "mcp.request out server/discover") || slices.Contains(ref.lines, "mcp.request out initialize")) {
		t.Fatalf("%s/%s: the reference run did not speak %s:\n%s", sc.name, idem, sc.protocol, strings.Join(ref.lines, "\n"))
	}
	assertNoServerAlive(t, files, "after the reference run")
	return ref
}

func stdioCrashAndResume(t *testing.T, sc stdioCrashScenario, idem, point string, ref crashRef) {
	wf, files := stdioCrashWorkflow(t, sc, idem)
	db := filepath.Join(t.TempDir(), "a.db")
	killedAt(t, point, "run", wf, "--db", db, "--output", "json")
	assertNoServerAlive(t, files, "after kill -9 of agentctl")
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs in log: %v", ids)
	}
	runID := ids[0]
	before := logOf(t, db, runID)
	if got := describeAll(before); !slices.Equal(got, ref.lines[:min(len(got), len(ref.lines))]) {
		t.Fatalf("the killed run is not a prefix of the reference run:\n%s\n---\n%s", strings.Join(got, "\n"), strings.Join(ref.lines, "\n"))
	}
	code, data, stderr := resumeJSON(t, db, runID)
	assertNoServerAlive(t, files, "after the resume")
	after := assertSound(t, db, runID, before)
	lines := describeAll(after)
	limit := 1
	if isRedispatchable(idem) {
		limit = 2
	}
	if n := executions(t, files, sc.tool); n > limit {
		t.Fatalf("%s tool executed %d times in total, at most %d allowed\n%s", idem, n, limit, strings.Join(lines, "\n"))
	}
	if before[len(before)-1].Type == vocab.TypeRunFinished {
		if code != 2 || len(after) != len(before) {
			t.Fatalf("resume of a finished run: exit %d, %d events appended; want exit 2 and none\n%s", code, len(after)-len(before), stderr)
		}
		return
	}
	if outcomeLogged(before) && code != ref.code {
		t.Fatalf("resume exit %d, reference run exit %d, with the outcome on disk\n%s\n%s", code, ref.code, stderr, strings.Join(lines, "\n"))
	}
	if code != 0 && code != 3 && code != 4 {
		t.Fatalf("resume exit %d\n%s\n%s", code, stderr, strings.Join(lines, "\n"))
	}
	if !isRedispatchable(idem) && strings.Count(strings.Join(lines, "\n"), "mcp.request out tools/call") > 1 {
		t.Fatalf("an %s call was sent twice\n%s", idem, strings.Join(lines, "\n"))
	}
	if n := strings.Count(strings.Join(lines, "\n"), "run.resumed"); n != 1 || !strings.HasPrefix(lines[len(lines)-1], "run.finished") {
		t.Fatalf("%d run.resumed events, last event %q\n%s", n, lines[len(lines)-1], strings.Join(lines, "\n"))
	}
	// Every process the log records has its end recorded or is dead; the
	// resume recorded the end of the processes it started.
	if code == 0 {
		if r, _ := json.Marshal(data["outputs"]); string(r) != sc.outputs {
			t.Fatalf("outputs = %s, want %s", r, sc.outputs)
		}
	}
	started := len(stdioStarts(t, files.starts))
	if rcode, _, _ := replayCLI(t, db, runID); rcode != code {
		t.Fatalf("replay of the resumed run: exit %d, resume's %d", rcode, code)
	}
	if n := len(stdioStarts(t, files.starts)); n != started {
		t.Fatalf("the replay started %d server processes", n-started)
	}
}
