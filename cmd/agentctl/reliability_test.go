package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/transport/oauth/oauthtest"
)

// TestMain lets the test binary act as agentctl for subprocess tests (and
// as the browser of the OAuth tests, oauth_test.go), and
// installs the test hooks (hooks_test.go) that the shipping binary lacks.
func TestMain(m *testing.M) {
	installTestHooks()
	if os.Getenv("AGENTCTL_TEST_BROWSER") == "1" { // $BROWSER in the OAuth tests
		if err := oauthtest.Browser(context.Background(), os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("AGENTCTL_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// subprocess returns a command running this test binary as agentctl.
func subprocess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "AGENTCTL_TEST_MAIN=1")
	return cmd
}

// seededDB returns a database holding one finished run, and its bytes.
func seededDB(t *testing.T) (string, []byte) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "a.db")
	_, url := demotest.StartTest(t, demoserver.Options{})
	if _, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db); code != 0 {
		t.Fatalf("seed run: %s", stderr)
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	return db, b
}

func runCount(t *testing.T, db string) int {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM events WHERE seq = 1`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCLI_BadInputCatalogue: every bad workflow of the language catalogue
// and every bad flag or argument is refused with its exit code and a
// message naming what is wrong, and the database is left exactly as it
// was. On SQLite and PostgreSQL.
func TestCLI_BadInputCatalogue(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testBadInputCatalogue(t, b.DSN(t)) })
}

func testBadInputCatalogue(t *testing.T, db string) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	if _, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db); code != 0 {
		t.Fatalf("seed run: %s", stderr)
	}
	before := dbSnapshot(t, db)
	files, err := filepath.Glob("../../workflow/spec/testdata/lang/bad/*.yaml")
	if err != nil || len(files) < 30 {
		t.Fatalf("catalogue has %d files (%v), want ≥ 30", len(files), err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	src, _ := os.ReadFile("../../examples/lookup.yaml")
	if err := os.WriteFile(good, src, 0o600); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "inputs.txt")
	if err := os.WriteFile(notJSON, []byte("{: : :"), 0o600); err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name string
		args []string
		want string // a fragment the message must contain
		code int    // 0 means 2 (invalid input)
	}
	var cases []tc
	for _, f := range files {
		c := tc{name: filepath.Base(f), args: []string{"run", f}, want: f + ":"}
		switch c.name {
		case "policy_allowlist.yaml", "policy_private.yaml", "policy_private_ranges.yaml", "policy_scheme.yaml", "stdio_no_allowlist.yaml", "stdio_not_allowlisted.yaml":
			c.code = 3 // every problem in these files is a policy refusal
		}
		cases = append(cases, c)
	}
	cases = append(cases,
		tc{name: "input-without-equals", args: []string{"run", good, "--input", "query"}, want: "--input"},
		tc{name: "input-empty-name", args: []string{"run", good, "--input", "=x"}, want: "--input"},
		tc{name: "input-undeclared", args: []string{"run", good, "--input", "nope=1"}, want: "nope"},
		tc{name: "unknown-command", args: []string{"runn", good}, want: "runn"},
		tc{name: "inspect-two-args", args: []string{"inspect", "a", "b"}, want: "inspect"},
		tc{name: "inputs-file-missing", args: []string{"run", good, "--inputs-file", filepath.Join(dir, "missing.json")}, want: "missing.json"},
		tc{name: "inputs-file-garbage", args: []string{"run", good, "--inputs-file", notJSON}, want: "inputs.txt"},
		tc{name: "output-format", args: []string{"run", good, "--output", "xml"}, want: "--output"},
		tc{name: "durability", args: []string{"run", good, "--durability", "sometimes"}, want: "--durability"},
		tc{name: "unknown-flag", args: []string{"run", good, "--frobnicate"}, want: "frobnicate"},
		tc{name: "no-file", args: []string{"run"}, want: "arg"},
		tc{name: "missing-file", args: []string{"run", filepath.Join(dir, "absent.yaml")}, want: "absent.yaml"},
		tc{name: "args-not-json", args: []string{"mcp", "call", "http://127.0.0.1:9/mcp", "echo", "--args", "{nope", "--allow-private"}, want: "--args"},
		tc{name: "args-not-object", args: []string{"mcp", "call", "http://127.0.0.1:9/mcp", "echo", "--args", "[1]", "--allow-private"}, want: "--args"},
		tc{name: "idempotency-class", args: []string{"mcp", "call", "http://127.0.0.1:9/mcp", "echo", "--idempotency", "twice", "--allow-private"}, want: "twice"},
		tc{name: "header-literal", args: []string{"mcp", "call", "http://127.0.0.1:9/mcp", "echo", "--header", "authorization=Bearer x", "--allow-private"}, want: "--header"},
		tc{name: "url-relative", args: []string{"mcp", "tools", "/mcp", "--allow-private"}, want: "/mcp"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := cli(t, append(c.args, "--db", db)...)
			want := c.code
			if want == 0 {
				want = 2
			}
			if code != want {
				t.Fatalf("exit %d, want %d; stderr: %s", code, want, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Fatalf("message does not name %q: %s", c.want, stderr)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
				t.Fatalf("panic output: %s", stderr)
			}
			if dbSnapshot(t, db) != before {
				t.Fatal("database changed")
			}
		})
	}
	if ids := runIDs(t, db); len(ids) != 1 {
		t.Fatalf("runs = %v, want only the seed run", ids)
	}
}

func TestCLI_LockedDatabaseIsExit5(t *testing.T) {
	db, _ := seededDB(t)
	lock, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	conn, err := lock.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, url := demotest.StartTest(t, demoserver.Options{})
	_, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db, "--busy-timeout", "200ms")
	if code != 5 || !strings.Contains(stderr, "locked") {
		t.Fatalf("exit %d, want 5 naming the lock; stderr %s", code, stderr)
	}
	// The run did not fail, the database did (issue 13 item 10): never "run … failed".
	if regexp.MustCompile(`run \S+ failed`).MatchString(stderr) {
		t.Fatalf("a lock failure reported as a failed run: %s", stderr)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if n := runCount(t, db); n != 1 {
		t.Fatalf("runs = %d, want 1 (nothing half-written)", n)
	}
}

// TestCLI_LockedMidRunSaysTheDatabaseFailed (issue 13 item 10): a lock
// taken by another writer while the call runs makes the run's next commit
// fail after --busy-timeout. The exit is 5 and the last line says the
// database failed, never "run … failed": the run itself did not fail.
func TestCLI_LockedMidRunSaysTheDatabaseFailed(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	var conn *sql.Conn
	tool := actTool()
	tool.Handler = func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
		lock, err := sql.Open("sqlite3", db)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { lock.Close() })
		if conn, err = lock.Conn(ctx); err != nil {
			return nil, err
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return nil, err
		}
		return &mcptest.Result{Content: mcptest.Text("done")}, nil
	}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	_, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--busy-timeout", "200ms")
	if conn == nil {
		t.Fatalf("the tool was not called: exit %d %s", code, stderr)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if code != 5 || !strings.Contains(stderr, "locked") || !strings.Contains(stderr, "stopped: the database failed") {
		t.Fatalf("exit %d, want 5 naming the lock and saying the database failed: %s", code, stderr)
	}
	if regexp.MustCompile(`run \S+ failed`).MatchString(stderr) {
		t.Fatalf("a lock failure reported as a failed run: %s", stderr)
	}
}

func TestCLI_CorruptAndUnwritableDatabase(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	wf := writeWorkflow(t, url)
	corrupt := filepath.Join(t.TempDir(), "corrupt.db")
	if err := os.WriteFile(corrupt, bytes.Repeat([]byte("garbage!"), 1024), 0o600); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "trunc.db")
	db, whole := seededDB(t)
	_ = db
	if err := os.WriteFile(truncated, whole[:len(whole)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"corrupt":   corrupt,
		"truncated": truncated,
		"procfs":    "/proc/agentctl-test/agentctl.db", // a read-only filesystem, even for root
	} {
		t.Run(name, func(t *testing.T) {
			before, _ := os.ReadFile(path)
			_, stderr, code := cli(t, "run", wf, "--db", path)
			if code != 5 {
				t.Fatalf("exit %d, want 5; stderr %s", code, stderr)
			}
			if strings.Contains(stderr, "panic") {
				t.Fatal(stderr)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Fatal("file changed")
			}
		})
	}
}

func TestCLI_ConcurrentProcessesOneDatabase(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	wf := writeWorkflow(t, url)
	// The processes also race to create and migrate the database.
	const procs = 8
	var wg sync.WaitGroup
	errs := make([]string, procs)
	for i := 0; i < procs; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := subprocess(t, "run", wf, "--db", db, "--input", fmt.Sprintf("query=q%d", i), "--output", "json")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Sprintf("process %d: %v: %s", i, err, stderr.String())
			} else if strings.Contains(stderr.String(), "locked") {
				errs[i] = fmt.Sprintf("process %d mentions a lock: %s", i, stderr.String())
			}
		}(i)
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
	if got := srv.Calls("search"); got != procs {
		t.Fatalf("server ran search %d times, want %d", got, procs)
	}
	edb, err := events.Open(context.Background(), db, events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer edb.Close()
	var ids []string
	if err := edb.SQL().Select(&ids, `SELECT run_id FROM events WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	if len(ids) != procs {
		t.Fatalf("runs = %d, want %d", len(ids), procs)
	}
	for _, id := range ids {
		if _, err := edb.VerifyRun(context.Background(), id); err != nil {
			t.Errorf("run %s: %v", id, err)
		}
	}
}
