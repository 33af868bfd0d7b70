package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
)

func (a *app) auditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Export a run's hash-chained log, and verify an export offline",
		Long: `export writes a run's events as stored, with a header; verify recomputes the chain offline.

What a verified export proves:
` + events.AuditUnsignedScope,
		Example: `  agentctl audit export run-0190c3f2-... -o run.audit.jsonl --sign-key file:audit.key
  agentctl audit verify run.audit.jsonl --public-key audit.pub`,
	}
	cmd.AddCommand(a.auditExportCmd(), a.auditVerifyCmd())
	return cmd
}

// auditExportCmd is `audit export RUN_ID`.
func (a *app) auditExportCmd() *cobra.Command {
	var file, signKey string
	export := &cobra.Command{
		Use:   "export RUN_ID",
		Short: "Write a run's events as JSON Lines: a header, then one line per event as stored",
		Long: `Writes a header line {format: "agentctl.audit/v2", runId, workflowDigest, eventCount (the final
seq), finalHash (the head hash), chain (the chain versions, e.g. "v2", or "v1 (seq 1-12), v2 (seq
13-20)" for a run resumed across an upgrade), signature (with --sign-key)} and then one line per
event {run_id, seq, stream, type, created_at, payload, prev_hash, hash}, the payload exactly as
stored (an encrypted envelope stays encrypted). No key is needed. The stored chain is recomputed
first: a run whose chain does not verify is refused before anything is written (exit 5, storage,
naming the first bad seq).
--sign-key file:PATH or env:VAR names an Ed25519 private key in PEM (PKCS #8, as written by
` + "`openssl genpkey -algorithm ed25519 -out audit.key`" + `); the header, and so the final seq and head
hash, is signed, and ` + "`audit verify --public-key`" + ` detects a cut or edited file.
A replay's export holds the replay's own chain; the recorded frames it answered from stay in the
run that recorded them, named by its replay.frames events (run, seq spans, hash of the last frame):
export that run too to verify them.

What a verified export proves:
` + events.AuditUnsignedScope,
		Example: `  agentctl audit export run-0190c3f2-... -o run.audit.jsonl
  agentctl audit export run-0190c3f2-... --sign-key file:audit.key > run.audit.jsonl
  agentctl audit export run-0190c3f2-... --sign-key env:AUDIT_SIGNING_KEY -o run.audit.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.auditExport(cmd.Context(), args[0], file, signKey)
		},
	}
	export.Flags().StringVarP(&file, "out", "o", "", "write to this file instead of stdout")
	export.Flags().StringVar(&signKey, "sign-key", "", "sign the header with this Ed25519 private key (PEM, PKCS #8): file:PATH or env:VAR")
	return export
}

// auditVerifyCmd is `audit verify FILE`.
func (a *app) auditVerifyCmd() *cobra.Command {
	var pubKey string
	verify := &cobra.Command{
		Use:   "verify FILE",
		Short: "Recompute an audit export's hash chain offline; exit 0 with the count, or name the first bad seq",
		Long: `Parses every line strictly (member names exact, duplicate and unknown members refused), recomputes
the hash chain (each hash says its chain version: v1 for runs written before created_at was
covered, v2 after), and checks every header member against the lines. With --public-key PATH
(Ed25519, PEM "PUBLIC KEY" as written by ` + "`openssl pkey -in audit.key -pubout -out audit.pub`" + `) the header
must carry a signature by that key. Exit 0 when it verifies; 4 naming the first bad seq, or what
is wrong with the header ("signature: missing", "signature: wrong", a member that disagrees
with the lines).

What a verified export proves:
` + events.AuditUnsignedScope,
		Example: `  agentctl audit verify run.audit.jsonl
  agentctl audit verify run.audit.jsonl --public-key audit.pub
  agentctl audit verify - < run.audit.jsonl --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return a.auditVerify(args[0], pubKey) },
	}
	verify.Flags().StringVar(&pubKey, "public-key", "", "require a header signature by this Ed25519 public key (PEM file)")
	return verify
}

// auditExport writes the events of run ref to file (stdout when "" or
// "-"), signed with the key signKey names when set.
func (a *app) auditExport(ctx context.Context, ref, file, signKey string) error {
	var opts events.ExportOptions
	if signKey != "" {
		k, err := loadSigningKey(signKey)
		if err != nil {
			return err
		}
		opts.SignKey = k
	}
	return a.withExistingDB(ctx, func(db *events.DB) error {
		id, err := projector.ResolveRun(ctx, db, ref)
		if err != nil {
			return err
		}
		w, done := io.Writer(a.stdout), func() error { return nil }
		if file != "" && file != "-" {
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("--out %q: %w", file, err)}
			}
			bw := bufio.NewWriter(f)
			w, done = bw, func() error {
				if err := bw.Flush(); err != nil {
					_ = f.Close()
					return err
				}
				return f.Close()
			}
		}
		h, err := db.ExportWith(ctx, w, id, opts)
		if err != nil {
			// A broken chain is found before anything is written:
			// no empty or partial file is left behind.
			if derr := done(); derr == nil && file != "" && file != "-" {
				_ = os.Remove(file)
			}
			return err
		}
		if err := done(); err != nil {
			return &events.Error{Op: "write audit file", Path: file, Err: err}
		}
		if file != "" && file != "-" {
			signed := "unsigned"
			if h.Signature != nil {
				signed = "signed by " + h.Signature.KeyID
			}
			fmt.Fprintf(a.stderr, "exported %d events of %s to %s (final hash %s, chain %s, %s)\n", h.EventCount, h.RunID, file, h.FinalHash, h.Chain, signed)
		}
		return nil
	})
}

// auditVerify verifies the export in file ("-": stdin), with the public
// key in pubKey when set.
func (a *app) auditVerify(file, pubKey string) error {
	var opts events.VerifyOptions
	if pubKey != "" {
		b, err := os.ReadFile(pubKey)
		if err != nil {
			return usageErr("--public-key %q: %w", pubKey, err)
		}
		if opts.PublicKey, err = events.ParsePublicKey(b); err != nil {
			return usageErr("--public-key %q: %w", pubKey, err)
		}
	}
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return usageErr("audit file %q: %w", file, err)
		}
		defer f.Close()
		r = f
	}
	rep, err := events.VerifyExport(r, opts)
	if err != nil {
		return &exitError{code: workflow.ExitFailed, err: fmt.Errorf("audit verify %s: %w", file, err)}
	}
	h := rep.Header
	signature := "none"
	switch {
	case rep.SignatureVerified:
		signature = "verified"
	case rep.Signed:
		signature = "present, not checked (no --public-key)"
	}
	data := map[string]any{"file": file, "format": h.Format, "runId": h.RunID, "events": rep.Events, "finalSeq": h.EventCount,
		"finalHash": h.FinalHash, "workflowDigest": h.WorkflowDigest, "chain": rep.Chain, "chainSpans": rep.Spans, "signature": signature}
	if h.Signature != nil {
		data["signedBy"] = h.Signature.KeyID
	}
	if a.output != "human" {
		return a.printJSON(a.stdout, "AuditVerify", true, data)
	}
	fmt.Fprintf(a.stdout, "ok: %d events of %s verified (chain %s, final hash %s)\n", rep.Events, clean(h.RunID), rep.Chain, h.FinalHash)
	switch {
	case rep.SignatureVerified:
		fmt.Fprintf(a.stdout, "signature: verified, key %s: the header (final seq %d, head hash) is as the key holder exported it\n", h.Signature.KeyID, h.EventCount)
	case rep.Signed:
		fmt.Fprintf(a.stdout, "signature: by %s, NOT checked: pass --public-key to detect a cut or edited file\n", clean(h.Signature.KeyID))
	default:
		fmt.Fprintln(a.stdout, "signature: none: the file is consistent, which does not prove it is whole or unedited (see --help)")
	}
	return nil
}

// loadSigningKey reads the --sign-key reference (file:PATH or env:VAR);
// errors name the reference, never the key.
func loadSigningKey(ref string) (ed25519.PrivateKey, error) {
	kind, val, ok := strings.Cut(ref, ":")
	var b []byte
	switch {
	case ok && kind == "file" && val != "":
		var err error
		if b, err = os.ReadFile(val); err != nil {
			return nil, usageErr("--sign-key %s: %w", ref, err)
		}
	case ok && kind == "env" && val != "":
		s := os.Getenv(val)
		if s == "" {
			return nil, usageErr("--sign-key %s: %s is not set", ref, val)
		}
		b = []byte(s)
	default:
		return nil, usageErr("--sign-key %q: want file:PATH or env:VAR", ref)
	}
	k, err := events.ParseSigningKey(b)
	if err != nil {
		return nil, usageErr("--sign-key %s: %w", ref, err)
	}
	return k, nil
}
