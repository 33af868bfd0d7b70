package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// APIVersion is the version of the CLI's JSON envelope.
const APIVersion = "agentctl.dev/cli/v1"

// defaultDB is where the database lives unless --db or AGENTCTL_DB say otherwise.
const defaultDB = ".agentctl/agentctl.db"

// app holds the global flags and the streams of one invocation.
type app struct {
	stdout, stderr io.Writer
	dbPath         string
	output         string
	durability     string
	color          string
	busyTimeout    time.Duration
	leaseTTL       time.Duration // worker --lease (PostgreSQL); 0: the events default
	// prog shows a run's progress in --output human; nil until a run starts.
	prog *progress
	// stop cancels the command (its context), with the cause: a closed
	// stdout ends the run as Ctrl-C does, recorded and resumable.
	stop context.CancelCauseFunc
	// dialer, when set, opens the remotes of runs (ad hoc OAuth flags).
	dialer workflow.Dialer
	// tel is the command's OpenTelemetry export; nil until a runner asks.
	tel *telemetryState
	// allowPlaintextCreds lets OAuth credentials be stored in clear in a
	// database without encryption (--allow-plaintext-credentials).
	allowPlaintextCreds bool
}

// exitError carries an exit code (README.md, "Commands") and the run it concerns.
type exitError struct {
	code  int
	runID string
	// class, when set, names the failure where the code alone would not
	// (a policy refusal shares exit 3 with uncertain).
	class workflow.Class
	err   error
	// next are the commands that apply to the run now (human output
	// prints them last, one a line).
	next []string
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// invalid wraps the load error of a workflow, from a file or generated
// from flags: exit 3 when every problem is a policy refusal (the file or
// the flags are fine, the policy forbids them), else 2. One rule for run,
// check, submit and mcp.
func invalid(err error) error {
	var ds spec.Diagnostics
	if errors.As(err, &ds) && ds.PolicyOnly() {
		return &exitError{code: workflow.ClassPolicyDenied.Code(), class: workflow.ClassPolicyDenied, err: err}
	}
	return &exitError{code: workflow.ExitInvalid, err: err}
}

func usageErr(format string, args ...any) error {
	return &exitError{code: workflow.ExitInvalid, err: fmt.Errorf(format, args...)}
}

func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	a := &app{stdout: stdout, stderr: stderr, stop: stop}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	wrapArgs(root)
	err := root.ExecuteContext(ctx)
	if a.prog != nil { // stop the live lines if the run ended without a result
		a.prog.summary()
	}
	if err == nil {
		return 0
	}
	code, class, runID := classify(ctx, err)
	a.printError(err, code, class, runID)
	var ee *exitError
	if a.output == "human" && errors.As(err, &ee) {
		for _, c := range ee.next {
			fmt.Fprintf(stderr, "next: %s\n", c)
		}
	}
	return code
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentctl",
		Short: "Run workflows that call tools on remote MCP servers, with every protocol step recorded",
		Long: `agentctl runs workflows whose tasks call tools on remote MCP servers (protocols 2025-11-25 and 2026-07-28,
Streamable HTTP) and appends every protocol step to a SQLite event log. The log is the only
source of truth: inspect, replay and audit read it and never touch the network.

Wherever a run id is taken, its short form will do (the last 8 or more digits that human
output prints: runs list, run's first line), as will any unique prefix of it (with or without
"run-"); "last" names the most recent workflow run (not a check, an ad hoc call or a replay),
and last-check, last-adhoc, last-replay the most recent run of that mode. An ambiguous id is
refused, listing the runs it matches. A call (effect) id takes any unique prefix too.`,
		Example: `  agentctl demo
  agentctl run examples/lookup.yaml --input query=mcp
  agentctl inspect run-0190... --output json`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("unknown command %q; see agentctl --help", args[0])
			}
			return cmd.Help()
		},
	}
	root.PersistentFlags().StringVar(&a.dbPath, "db", "", "database: a SQLite file, or a postgres:// URL (password from the URL, PGPASSWORD or ~/.pgpass) (default $AGENTCTL_DB or "+defaultDB+")")
	root.PersistentFlags().StringVar(&a.output, "output", "human", "output format: human, json or jsonl")
	root.PersistentFlags().StringVar(&a.durability, "durability", "full", "commit durability: full (fsync every step) or normal")
	durationVar(root, true, &a.busyTimeout, "busy-timeout", events.DefaultBusyTimeout, "how long to wait for another process's write lock")
	root.PersistentFlags().BoolVar(&a.allowPlaintextCreds, "allow-plaintext-credentials", false, "store OAuth tokens in clear when the database is not encrypted (anyone who can read the database file can then use them)")
	root.PersistentFlags().StringVar(&a.color, "color", "auto", "colour on terminals: auto, always or never (NO_COLOR is respected)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: workflow.ExitInvalid, err: err}
	})
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch a.output {
		case "human", "json", "jsonl":
		default:
			return usageErr("--output %q: want human, json or jsonl", a.output)
		}
		switch a.color {
		case "auto", "always", "never":
		default:
			return usageErr("--color %q: want auto, always or never", a.color)
		}
		switch a.durability {
		case "full", "normal":
		default:
			return usageErr("--durability %q: want full or normal", a.durability)
		}
		return nil
	}
	root.AddCommand(a.runCmd(), a.inspectCmd(), a.demoCmd(), a.versionCmd())
	root.AddCommand(a.checkCmd(), a.mcpCmd(), a.schemaCmd())
	root.AddCommand(a.runsCmd(), a.auditCmd(), a.dbCmd(), a.replayCmd())
	root.AddCommand(a.resumeCmd(), a.effectsCmd(), a.submitCmd(), a.workerCmd())
	root.AddCommand(exitCodesTopic())
	root.AddCommand(a.traceCmd())
	root.AddCommand(a.authCmd())
	return root
}

// wrapArgs makes every positional-argument error a usage error (exit 2),
// and an unknown subcommand too: a command group (runs, effects, audit, db,
// mcp…) runs, so cobra validates its arguments instead of printing its help
// and exiting 0; with no argument it prints its help.
func wrapArgs(c *cobra.Command) {
	if c.Args == nil && c.HasSubCommands() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("unknown command %q for %q; see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		}
		if c.Run == nil && c.RunE == nil {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	} else if inner := c.Args; inner != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := inner(cmd, args); err != nil {
				return usageErr("%s: %w (usage: %s)", cmd.CommandPath(), err, cmd.UseLine())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// databasePath resolves --db, then AGENTCTL_DB, then the default.
func (a *app) databasePath() string {
	switch {
	case a.dbPath != "":
		return a.dbPath
	case os.Getenv("AGENTCTL_DB") != "":
		return os.Getenv("AGENTCTL_DB")
	}
	return defaultDB
}

// openDB opens (creating) the database for commands that write.
func (a *app) openDB(ctx context.Context) (*events.DB, error) {
	path := a.databasePath()
	if events.IsPostgres(path) {
		return events.Open(ctx, path, a.dbOptions())
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, &events.Error{Op: "create directory", Path: dir, Err: err}
		}
	}
	return events.Open(ctx, path, a.dbOptions())
}

// dbOptions are the storage options the global flags select.
func (a *app) dbOptions() events.Options {
	o := events.Options{Durability: events.Durability(a.durability), BusyTimeout: a.busyTimeout, LeaseTTL: a.leaseTTL}
	if testHooks.dbOptions != nil {
		testHooks.dbOptions(&o)
	}
	return o
}

// openExisting opens the database for commands that only read; a missing
// file is an error, not a new empty database.
func (a *app) openExisting(ctx context.Context) (*events.DB, error) {
	path := a.databasePath()
	if events.IsPostgres(path) {
		return events.Open(ctx, path, a.dbOptions())
	}
	if _, err := os.Stat(path); err != nil {
		return nil, &events.Error{Op: "open", Path: path, Err: fmt.Errorf("no database (run a workflow first, or pass --db): %w", err)}
	}
	return events.Open(ctx, path, a.dbOptions())
}

// withDB opens (creating) the database for a command that writes, hands
// it to fn and closes it when fn returns.
func (a *app) withDB(ctx context.Context, fn func(*events.DB) error) error {
	db, err := a.openDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	defer a.closeTelemetry() // before the database closes: it records how far it exported
	return fn(db)
}

// withExistingDB is withDB for a command that only reads: a missing
// database is an error, not a new empty one.
func (a *app) withExistingDB(ctx context.Context, fn func(*events.DB) error) error {
	db, err := a.openExisting(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	defer a.closeTelemetry() // before the database closes: it records how far it exported
	return fn(db)
}

// envelope is the JSON shape of every --output json answer.
type envelope struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	OK         bool   `json:"ok"`
	Data       any    `json:"data,omitempty"`
	Error      any    `json:"error,omitempty"`
}

func (a *app) printJSON(w io.Writer, kind string, ok bool, data any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if a.output == "json" {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(envelope{APIVersion: APIVersion, Kind: kind, OK: ok, Data: data})
}

func (a *app) printError(err error, code int, class workflow.Class, runID string) {
	if a.output == "json" || a.output == "jsonl" {
		var rid any
		if runID != "" {
			rid = runID
		}
		enc := json.NewEncoder(a.stderr)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(envelope{APIVersion: APIVersion, Kind: "Error", OK: false,
			Error: map[string]any{"message": err.Error(), "class": class, "exitCode": code, "runId": rid}})
		return
	}
	// Error text may quote a server (an error message, a tool's content):
	// every line passes the one sanitizer before it reaches the terminal.
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = clean(l)
	}
	fmt.Fprintf(a.stderr, "agentctl: %s\n", strings.Join(lines, "\n  "))
	if runID != "" {
		fmt.Fprintf(a.stderr, "run: %s (agentctl inspect %s)\n", runID, runID)
	}
}
