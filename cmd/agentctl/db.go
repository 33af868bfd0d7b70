package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
)

func (a *app) dbCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Maintain the database: migrate, rebuild projections, manage encryption",
		Example: `  agentctl db migrate --db postgres://agentctl@db.internal/agentctl
  agentctl db rebuild-projections
  agentctl db encryption enable --key-id k1 --key-env AGENTCTL_KEY_K1`,
	}
	rebuild := &cobra.Command{
		Use:   "rebuild-projections [RUN_ID]",
		Short: "Recompute runs, tasks, protocol_sessions, protocol_calls and effects from the log alone",
		Long: `Deletes the projection rows of one run (or of every run) and folds the run's events again,
in one transaction per run. The event log is never changed. Rebuilt rows equal the rows that
were written incrementally while the run was recorded.`,
		Example: `  agentctl db rebuild-projections
  agentctl db rebuild-projections run-0190c3f2-... --output json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.withExistingDB(ctx, func(db *events.DB) (err error) {
				var ids []string
				if len(args) == 1 {
					id, err := projector.ResolveRun(ctx, db, args[0])
					if err != nil {
						return err
					}
					ids = []string{id}
				} else if ids, err = projector.RunIDs(ctx, db); err != nil {
					return err
				}
				for _, id := range ids {
					if err := projector.Rebuild(ctx, db, id); err != nil {
						return err
					}
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "RebuildProjections", true, map[string]any{"runs": ids})
				}
				fmt.Fprintf(a.stdout, "rebuilt projections of %d run(s)\n", len(ids))
				return nil
			})
		},
	}
	cmd.AddCommand(a.migrateCmd(), rebuild, a.encryptionCmd())
	return cmd
}

func (a *app) encryptionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "encryption",
		Short: "Encrypt protocol payloads at rest (AES-256-GCM envelopes); rotate the key",
		Long: `With encryption enabled, the payloads of protocol events (mcp.*, call.*, session.*) are stored
as AES-256-GCM envelopes under a random data key; the data key is stored only wrapped by your key.
Reading an encrypted database needs the key in AGENTCTL_KEY_<KEY_ID> (key id upper-cased, other
characters as _), base64 of 32 bytes; without it reads of protocol payloads fail with exit 5.
audit export and audit verify need no key: the hash chain covers the stored bytes.`,
		Example: `  export K1=$(head -c 32 /dev/urandom | base64)
  agentctl db encryption enable --key-id k1 --key-env K1
  AGENTCTL_KEY_K1=$K1 agentctl inspect run-0190c3f2-...
  AGENTCTL_KEY_K1=$K1 agentctl db encryption rotate --key-id k2 --key-env K2`,
	}
	var keyID, keyEnv string
	keyFlags := func(c *cobra.Command) {
		c.Flags().StringVar(&keyID, "key-id", "", "id of the key (names AGENTCTL_KEY_<ID> for later reads)")
		c.Flags().StringVar(&keyEnv, "key-env", "", "environment variable holding the base64 32-byte key")
		_ = c.MarkFlagRequired("key-id")
		_ = c.MarkFlagRequired("key-env")
	}
	readKey := func() ([]byte, error) {
		v := os.Getenv(keyEnv)
		if v == "" {
			return nil, usageErr("--key-env %s: variable is empty or unset", keyEnv)
		}
		k, err := events.ParseKey(v)
		if err != nil {
			return nil, usageErr("--key-env %s: %w", keyEnv, err)
		}
		return k, nil
	}
	enable := &cobra.Command{
		Use:     "enable",
		Short:   "Turn on payload encryption for every run recorded from now on",
		Example: `  agentctl db encryption enable --key-id k1 --key-env K1`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := readKey()
			if err != nil {
				return err
			}
			return a.withDB(cmd.Context(), func(db *events.DB) error {
				if err := db.EnableEncryption(cmd.Context(), keyID, key); err != nil {
					return encryptionErr(err)
				}
				return a.printEncryption(db.Encryption(), "enabled")
			})
		},
	}
	rotate := &cobra.Command{
		Use:     "rotate",
		Short:   "Re-wrap the data key under a new key; no event row changes",
		Example: `  AGENTCTL_KEY_K1=$K1 agentctl db encryption rotate --key-id k2 --key-env K2`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := readKey()
			if err != nil {
				return err
			}
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				if err := db.RotateKey(cmd.Context(), keyID, key); err != nil {
					return encryptionErr(err)
				}
				return a.printEncryption(db.Encryption(), "rotated")
			})
		},
	}
	keyFlags(enable)
	keyFlags(rotate)
	status := &cobra.Command{
		Use:     "status",
		Short:   "Show whether payloads are encrypted, under which key id, and whether the key is available",
		Example: `  agentctl db encryption status --output json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				return a.printEncryption(db.Encryption(), "")
			})
		},
	}
	cmd.AddCommand(enable, rotate, status)
	return cmd
}

// encryptionErr makes a refused change (already enabled, open runs, bad id)
// exit 2; key and storage problems stay exit 5.
func encryptionErr(err error) error {
	if errors.Is(err, events.ErrEncryption) {
		return &exitError{code: workflow.ExitInvalid, err: err}
	}
	return err
}

func (a *app) printEncryption(st events.EncryptionStatus, verb string) error {
	if a.output != "human" {
		return a.printJSON(a.stdout, "Encryption", true, st)
	}
	if !st.Enabled {
		fmt.Fprintln(a.stdout, "encryption: off")
		return nil
	}
	if verb != "" {
		fmt.Fprintf(a.stdout, "encryption %s\n", verb)
	}
	fmt.Fprintf(a.stdout, "key id    %s (reads take the key from %s; loaded: %t)\ndata key  %s\nplaintext runs recorded before encryption: %d\n", st.KeyID, st.KeyEnv, st.KeyOK, st.DataKey, st.PlaintextRuns)
	return nil
}

func (a *app) migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Bring the database to this agentctl's schema (required once per upgrade on PostgreSQL)",
		Long: `Applies the embedded migrations the database does not have yet, one transaction each.
On PostgreSQL every migration runs under pg_advisory_xact_lock, so workers starting together do
not race; run, submit, worker, inspect and the other commands refuse a PostgreSQL database whose
schema is older or newer than this agentctl's and never migrate it themselves. A SQLite file is
migrated whenever agentctl opens it; migrate creates or upgrades it the same way.`,
		Example: `  agentctl db migrate --db postgres://agentctl@127.0.0.1/agentctl
  PGPASSWORD=... AGENTCTL_DB=postgresql://agentctl@db/agentctl agentctl db migrate --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := a.databasePath()
			if dir := filepath.Dir(path); !events.IsPostgres(path) && dir != "" {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return &events.Error{Op: "create directory", Path: dir, Err: err}
				}
			}
			from, to, err := events.Migrate(cmd.Context(), path, a.dbOptions())
			if err != nil {
				return err
			}
			if a.output != "human" {
				return a.printJSON(a.stdout, "Migrate", true, map[string]any{"database": events.RedactDSN(path), "fromVersion": from, "toVersion": to})
			}
			if from == to {
				fmt.Fprintf(a.stdout, "%s: schema at version %d (up to date)\n", events.RedactDSN(path), to)
			} else {
				fmt.Fprintf(a.stdout, "%s: schema migrated from version %d to %d\n", events.RedactDSN(path), from, to)
			}
			return nil
		},
	}
}
