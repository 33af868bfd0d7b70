package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// ttyBuffer is a buffer that says it is a terminal.
type ttyBuffer struct{ bytes.Buffer }

type charDevice struct{ os.FileInfo }

func (charDevice) Mode() fs.FileMode { return os.ModeCharDevice }

func (*ttyBuffer) Stat() (os.FileInfo, error) { return charDevice{}, nil }

func TestBar(t *testing.T) {
	for _, tt := range []struct {
		n, total float64
		want     string
	}{
		{0, 5, "[..........]"}, {3, 5, "[######....]"}, {5, 5, "[##########]"}, {7, 5, "[##########]"}, {-1, 5, "[..........]"}, {1, 0, "[..........]"},
	} {
		if got := bar(tt.n, tt.total, 10); got != tt.want {
			t.Errorf("bar(%g, %g) = %s, want %s", tt.n, tt.total, got, tt.want)
		}
	}
}

func TestUseColor(t *testing.T) {
	for _, tt := range []struct {
		mode    string
		tty     bool
		noColor bool
		want    bool
	}{
		{"auto", true, false, true}, {"always", true, false, true}, {"never", true, false, false},
		{"auto", false, false, false}, {"always", false, false, true},
		{"auto", true, true, false}, {"always", true, true, true},
	} {
		if tt.noColor {
			t.Setenv("NO_COLOR", "1")
		} else {
			unsetNoColor(t)
		}
		if got := useColor(tt.mode, tt.tty); got != tt.want {
			t.Errorf("useColor(%q, tty=%v, NO_COLOR=%v) = %v, want %v", tt.mode, tt.tty, tt.noColor, got, tt.want)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) || !isTerminal(&ttyBuffer{}) {
		t.Fatal("isTerminal: a buffer is not a terminal, a char device is")
	}
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("a regular file is not a terminal")
	}
}

var ourEscapes = regexp.MustCompile(`\x1b\[(K|1A|0m|3[123]m)`)

// TestProgress_Terminal: on a terminal the live line is redrawn in place
// with a bar, lasting lines go above it, the summary closes it, and the
// only escapes are ours (remote text is cleaned).
func TestProgress_Terminal(t *testing.T) {
	srv := chattyServer(t, "\x1b[31mHALF\x1b]0;pwned\x07")
	db := t.TempDir() + "/a.db"
	var errb ttyBuffer
	var out bytes.Buffer
	unsetNoColor(t)
	code := execute(t.Context(), []string{"run", actWorkflow(t, srv.URL, "idempotent"), "--db", db}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := errb.String()
	for _, want := range []string{"\r\x1b[K", "[#####.....] 1/2", "[##########] 2/2 done", "\x1b[32msucceeded\x1b[0m", "TASK", "GEN/RECONNECTS", "local/act"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, s)
		}
	}
	if rest := ourEscapes.ReplaceAllString(s, ""); strings.Contains(rest, "\x1b") {
		t.Fatalf("an escape that is not ours reached the terminal:\n%q", rest)
	}
	if strings.Contains(out.String(), "\x1b") {
		t.Fatalf("stdout carries escapes: %q", out.String())
	}
}

// TestProgress_Plain: off a terminal, plain lines, no escapes, no colour
// (--color auto), and a summary table; --color always forces colour.
func TestProgress_Plain(t *testing.T) {
	srv := chattyServer(t, "half way")
	db := t.TempDir() + "/a.db"
	_, forced, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--color", "always")
	if code != 0 || !strings.Contains(forced, "\x1b[32msucceeded\x1b[0m") || strings.Contains(forced, "\r") {
		t.Fatalf("--color always: exit %d, want coloured plain lines: %q", code, forced)
	}
	_, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--color", "auto")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "\x1b") || strings.Contains(stderr, "\r") {
		t.Fatalf("escapes off a terminal: %q", stderr)
	}
	for _, want := range []string{"progress 1/2 half way\n", "progress 2/2 done\n", "  only succeeded\n", "TASK  TOOL       STATUS     DURATION", "only  local/act  succeeded  "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestProgress_SummaryCountsReconnects(t *testing.T) {
	srv := chattyServer(t, "x")
	srv.Inject(expired)
	db := t.TempDir() + "/a.db"
	_, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`only  local/act  succeeded  \S+ +2/1\n`).MatchString(stderr) {
		t.Fatalf("summary does not show generation 2 after 1 reconnect:\n%s", stderr)
	}
}

// unsetNoColor unsets NO_COLOR for the test (restored at cleanup).
func unsetNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	if err := os.Unsetenv("NO_COLOR"); err != nil {
		t.Fatal(err)
	}
}

// TestProgress_ConcurrentLiveLines: on a terminal, tasks in flight together
// each have their live line; off a terminal, every call line names its task.
func TestProgress_ConcurrentLiveLines(t *testing.T) {
	b := newBarrier(3)
	srv := mcptest.Start(t, mcptest.Options{}, b.tool("wait"))
	var tasks []graphTask
	for i := range 3 {
		tasks = append(tasks, graphTask{id: fmt.Sprintf("t%d", i), tool: "wait", needs: none()})
	}
	wf := graphWorkflow(t, srv.URL, 3, tasks)
	var errb ttyBuffer
	var out bytes.Buffer
	if code := execute(t.Context(), []string{"run", wf, "--db", t.TempDir() + "/a.db"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	three := regexp.MustCompile(`… t\d  local/wait  [^\n]*\n… t\d  local/wait  [^\n]*\n… t\d  local/wait  `)
	if !three.MatchString(errb.String()) {
		t.Fatalf("no moment with three live lines:\n%q", errb.String())
	}
	b2 := newBarrier(3)
	srv2 := mcptest.Start(t, mcptest.Options{}, b2.tool("wait"))
	_, stderr, code := cli(t, "run", graphWorkflow(t, srv2.URL, 3, tasks), "--db", t.TempDir()+"/b.db")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, id := range []string{"t0", "t1", "t2"} {
		if !regexp.MustCompile(`  call [0-9a-f]{12} \(` + id + `\) → succeeded\n`).MatchString(stderr) {
			t.Errorf("no plain call line for %s:\n%s", id, stderr)
		}
	}
}
