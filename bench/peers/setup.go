package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The schemas of the benchmark's own database.
const (
	schemaAgentctl = "peers_agentctl" // agentctl's log, measured
	schemaSubmit   = "peers_submit"   // `agentctl submit` samples (queued, never drained)
	schemaDBOS     = "peers_dbos"     // DBOS's system database
)

// env is everything the rounds share: the echo server, the databases,
// the DBOS context and the shared sessions.
type env struct {
	cfg        config
	dir        string // workflow files
	server     *exec.Cmd
	serverURL  string
	admin      *pgx.Conn // to the benchmark's database, for row counts
	agentDSN   string    // search_path = peers_agentctl
	submitDSN  string    // search_path = peers_submit
	liteDB     string    // agentctl's SQLite database file (-sqlite)
	pgVersion  string
	syncCommit string
	dbos       dbos.Context
	httpClient *http.Client
	mcpClient  *mcp.Client
	bare       *mcp.ClientSession // the bare go-sdk client's shared session
	dbosShared *mcp.ClientSession // the session DBOS's shared-session workflows use
}

// setup creates the benchmark's database and schemas, migrates agentctl's,
// starts the echo server and launches DBOS.
func setup(ctx context.Context, cfg config) (*env, error) {
	e := &env{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	base, err := url.Parse(cfg.dsn)
	if err != nil || (base.Scheme != "postgres" && base.Scheme != "postgresql") {
		return nil, errors.New("-dsn: not a postgres:// URL")
	}
	if err := loopbackOnly(base.Hostname()); err != nil {
		return nil, err
	}
	if e.dir, err = os.MkdirTemp("", "agentctl-peers-"); err != nil {
		return nil, err
	}
	peersDSN, err := createDatabase(ctx, base, cfg.database)
	if err != nil {
		return nil, err
	}
	if e.admin, err = pgx.Connect(ctx, peersDSN); err != nil {
		return nil, fmt.Errorf("connect to database %s: %w", cfg.database, err)
	}
	for _, s := range []string{schemaAgentctl, schemaSubmit, schemaDBOS} {
		if _, err := e.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+s+" CASCADE"); err != nil {
			return nil, fmt.Errorf("drop schema %s: %w", s, err)
		}
	}
	for _, s := range []string{schemaAgentctl, schemaSubmit} {
		if _, err := e.admin.Exec(ctx, "CREATE SCHEMA "+s); err != nil {
			return nil, fmt.Errorf("create schema %s: %w", s, err)
		}
	}
	if err := e.admin.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('synchronous_commit')").Scan(&e.pgVersion, &e.syncCommit); err != nil {
		return nil, fmt.Errorf("read server settings: %w", err)
	}
	e.agentDSN, e.submitDSN = withSearchPath(peersDSN, schemaAgentctl), withSearchPath(peersDSN, schemaSubmit)
	e.liteDB = filepath.Join(e.dir, "agentctl.db")
	for _, dsn := range []string{e.agentDSN, e.submitDSN, e.liteDB} {
		if out, err := exec.CommandContext(ctx, cfg.agentctl, "db", "migrate", "--db", dsn).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("agentctl db migrate: %w\n%s", err, out)
		}
	}
	if err := e.startServer(ctx); err != nil {
		return nil, err
	}
	// The peers' HTTP client keeps enough idle connections for every
	// session in flight (Go's default keeps 2 per host), so that the
	// go-sdk clients do not pay for reconnecting: a tuning in their favour.
	e.httpClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	e.mcpClient = mcp.NewClient(&mcp.Implementation{Name: "agentctl-peers", Version: "1"}, nil)
	if e.bare, err = e.connect(ctx); err != nil {
		return nil, err
	}
	if e.dbosShared, err = e.connect(ctx); err != nil {
		return nil, err
	}
	if err := e.launchDBOS(ctx, peersDSN); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// loopbackOnly refuses a host that is not a loopback address (or a Unix
// socket directory): the benchmark talks to this machine only.
func loopbackOnly(host string) error {
	if host == "" || strings.HasPrefix(host, "/") || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-dsn: host %q is not a loopback address; the benchmark runs against this machine only", host)
}

// createDatabase creates the database name on base's cluster unless it
// exists, and returns base's URL pointing at it (any search_path dropped).
func createDatabase(ctx context.Context, base *url.URL, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `"/?#`) {
		return "", fmt.Errorf("-database %q: not a plain database name", name)
	}
	conn, err := pgx.Connect(ctx, base.String())
	if err != nil {
		return "", fmt.Errorf("connect to the cluster (%s): %w", redact(base), err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look for database %s: %w", name, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	u := *base
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// withSearchPath returns dsn with search_path set to schema.
func withSearchPath(dsn, schema string) string {
	u, _ := url.Parse(dsn) // dsn came from url.URL.String
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// redact returns u without its password.
func redact(u *url.URL) string {
	c := *u
	if _, ok := c.User.Password(); ok {
		c.User = url.UserPassword(c.User.Username(), "xxxxx")
	}
	return c.String()
}

// startServer starts `agentctl demo serve` on a free loopback port and
// reads its URL from the line it prints.
func (e *env) startServer(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, e.cfg.agentctl, "demo", "serve", "--addr", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("agentctl demo serve: %w", err)
	}
	e.server = cmd
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("agentctl demo serve: no address printed: %w", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	const prefix = "serving agentctl-demo MCP server at "
	i := strings.Index(line, prefix)
	if i < 0 {
		return fmt.Errorf("agentctl demo serve printed %q, not its address", line)
	}
	e.serverURL = strings.Fields(line[i+len(prefix):])[0]
	return nil
}

// connect opens a go-sdk client session with the echo server.
func (e *env) connect(ctx context.Context) (*mcp.ClientSession, error) {
	cs, err := e.mcpClient.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.serverURL, HTTPClient: e.httpClient}, nil)
	if err != nil {
		return nil, fmt.Errorf("go-sdk connect %s: %w", e.serverURL, err)
	}
	return cs, nil
}

// launchDBOS creates the DBOS context on the benchmark's database, in
// its own schema, registers the workflows and launches it.
func (e *env) launchDBOS(ctx context.Context, dsn string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dc, err := dbos.NewContext(ctx, dbos.Config{AppName: "agentctl-peers", DatabaseURL: dsn, DatabaseSchema: schemaDBOS, Logger: logger})
	if err != nil {
		return fmt.Errorf("dbos: new context: %w", err)
	}
	e.dbos = dc
	peerEnv = e
	dbos.RegisterWorkflow(dc, seqWorkflow)
	dbos.RegisterWorkflow(dc, concWorkflow)
	dbos.RegisterWorkflow(dc, oneCallWorkflow)
	if err := dbos.Launch(dc); err != nil {
		return fmt.Errorf("dbos: launch: %w", err)
	}
	return nil
}

// describe names the machine, the server and the versions measured.
func (e *env) describe() string {
	return fmt.Sprintf("%s; PostgreSQL %s, synchronous_commit %s; echo server %s (agentctl demo serve)", machine(), e.pgVersion, e.syncCommit, e.serverURL)
}

// close stops everything setup started.
func (e *env) close() {
	if e.dbos != nil {
		_ = dbos.Shutdown(e.dbos, 5*time.Second)
	}
	for _, cs := range []*mcp.ClientSession{e.bare, e.dbosShared} {
		if cs != nil {
			_ = cs.Close()
		}
	}
	if e.server != nil && e.server.Process != nil {
		_ = e.server.Process.Signal(syscall.SIGTERM)
		_ = e.server.Wait()
	}
	if e.admin != nil {
		_ = e.admin.Close(context.Background())
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// writeWorkflows writes agentctl's three workflow files for cfg's sizes.
func (e *env) writeWorkflows(cfg config) error {
	files := map[string]string{
		"seq.yaml":  workflowYAML(e.serverURL, cfg.seqCalls, 0),
		"conc.yaml": workflowYAML(e.serverURL, cfg.concCalls, cfg.inFlight),
		"one.yaml":  workflowYAML(e.serverURL, 1, 0),
	}
	for _, n := range []int{cfg.runs, cfg.concRuns} {
		if err := os.WriteFile(e.inputsFile(n), []byte(strings.Repeat("{}\n", n)), 0o600); err != nil {
			return err
		}
	}
	for name, src := range files {
		path := filepath.Join(e.dir, name)
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			return err
		}
		// agentctl's own check, so that a mistake here fails before any round.
		if out, err := exec.Command(e.cfg.agentctl, "check", path).CombinedOutput(); err != nil {
			return fmt.Errorf("agentctl check %s: %w\n%s", name, err, out)
		}
	}
	return nil
}

// inputsFile is the JSON-lines file of n runs of one.yaml (`agentctl run
// --inputs`): n empty input objects.
func (e *env) inputsFile(n int) string {
	return filepath.Join(e.dir, fmt.Sprintf("inputs-%d.jsonl", n))
}

// workflowYAML is a workflow of n echo calls on the server at url: in
// file order (each task waits for the previous one) when concurrency is
// 0, else all independent (needs: []) with that many in flight.
func workflowYAML(url string, n, concurrency int) string {
	var b strings.Builder
	b.WriteString("apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: peers}\nspec:\n")
	if concurrency > 0 {
		fmt.Fprintf(&b, "  concurrency: %d\n", concurrency)
	}
	fmt.Fprintf(&b, `  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    demo: {url: %q, timeoutSeconds: 30}
  actions:
    echo: {kind: mcp.call, idempotency: at_most_once}
  tasks:
`, url)
	needs := ""
	if concurrency > 0 {
		needs = ", needs: []"
	}
	for i := range n {
		fmt.Fprintf(&b, "    - {id: t%d, uses: action:echo%s, with: {server: demo, tool: echo, arguments: {message: %q}}}\n", i+1, needs, echoMessage)
	}
	return b.String()
}

// echoMessage is the argument of every echo call, for every system.
const echoMessage = "peer benchmark"
