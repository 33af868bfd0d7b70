package events

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	encjson "encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json"
)

// Audit export formats; the "format" member of the header line. Export
// writes AuditFormat; verify also reads AuditFormatV1 files (no chain member,
// no signature), which carry the same event lines.
const (
	AuditFormat   = "agentctl.audit/v2"
	AuditFormatV1 = "agentctl.audit/v1"
)

// AuditUnsignedScope says what verifying an export proves; `audit --help`
// and the verify output print it.
const AuditUnsignedScope = `An unsigned export proves only that the file is internally consistent: every
line parses strictly (exact member names, no duplicates, no unknown members),
the hash chain recomputes from seq 1 to the last line (chain v2 also covers
created_at), and every header member (runId, workflowDigest, eventCount = the
final seq, finalHash = the head hash, chain) equals what the lines give. It does
NOT prove who wrote the file, nor that it is the whole run: anyone can rewrite
events and recompute every hash, or drop the last events and fix the header,
and the result verifies. Compare finalHash with one you obtained elsewhere, or
sign: a signed export (--sign-key) checked with --public-key also proves the
header, and so the final seq and head hash, as the key holder exported it, so
a truncated or edited file fails. Neither form proves the run's database was
not altered before the export was made.`

// maxAuditLine bounds one line of an audit file when verifying (an event
// payload is bounded by the transport's response limits; 64 MiB is ample).
const maxAuditLine = 64 << 20

// AuditHeader is the first line of an audit export. Every member but the
// signature is derived from the event lines, and verify checks each one.
type AuditHeader struct {
	Format         string `json:"format"`
	RunID          string `json:"runId"`
	WorkflowDigest string `json:"workflowDigest"`
	// EventCount is also the run's final seq (seqs are dense from 1).
	EventCount int64  `json:"eventCount"`
	FinalHash  string `json:"finalHash"`
	// Chain names the chain versions of the lines (ChainSummary); v2 only.
	Chain     string          `json:"chain,omitempty"`
	Signature *AuditSignature `json:"signature,omitempty"`
}

// AuditSignature is an Ed25519 signature over the header without its
// signature member (AuditSigningBytes).
type AuditSignature struct {
	Alg   string `json:"alg"`
	KeyID string `json:"keyId"`
	Value []byte `json:"value"` // base64 in JSON
}

// auditLine is one event line of an audit export: the row exactly as stored
// (payload is the stored text, ciphertext envelope included), so the chain
// verifies without any key.
type auditLine struct {
	RunID     string `json:"run_id"`
	Seq       int64  `json:"seq"`
	Stream    string `json:"stream"`
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Payload   string `json:"payload"`
	PrevHash  string `json:"prev_hash"`
	Hash      string `json:"hash"`
}

// ExportOptions tune ExportWith.
type ExportOptions struct {
	// SignKey, when set, signs the header (AuditSignature).
	SignKey ed25519.PrivateKey
}

// Export writes runID as JSON Lines to w: an [AuditHeader], then one line
// per event in seq order. The run's chain is verified first; a broken chain
// is returned as a *ChainError and nothing is written.
func (db *DB) Export(ctx context.Context, w io.Writer, runID string) (*AuditHeader, error) {
	return db.ExportWith(ctx, w, runID, ExportOptions{})
}

// ExportWith is Export, signing the header when opts.SignKey is set.
func (db *DB) ExportWith(ctx context.Context, w io.Writer, runID string, opts ExportOptions) (*AuditHeader, error) {
	h := &AuditHeader{Format: AuditFormat, RunID: runID}
	v := Verifier{RunID: runID}
	err := db.Scan(ctx, runID, 0, func(e Event) error {
		if e.Seq == 1 {
			h.WorkflowDigest = workflowDigestOf(e.Payload)
		}
		return v.Next(e)
	})
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", runID, err)
	}
	if v.Count() == 0 {
		return nil, fmt.Errorf("export %s: %w: %s", runID, ErrNoRun, runID)
	}
	h.EventCount, h.FinalHash, h.Chain = v.Count(), v.Tip(), v.Chain()
	if opts.SignKey != nil {
		h.Signature = SignAuditHeader(h, opts.SignKey)
	}
	bw := bufio.NewWriter(w)
	line, err := marshalLine(h)
	if err != nil {
		return nil, fmt.Errorf("export %s: header: %w", runID, err)
	}
	if _, err := bw.Write(line); err != nil {
		return nil, fmt.Errorf("export %s: write header: %w", runID, err)
	}
	// The events of the header, and not one appended since.
	err = db.ScanRange(ctx, runID, 1, h.EventCount, func(e Event) error {
		b, err := marshalLine(auditLine{RunID: e.RunID, Seq: e.Seq, Stream: e.Stream, Type: e.Type, CreatedAt: e.CreatedAt, Payload: e.Payload, PrevHash: e.PrevHash, Hash: e.Hash})
		if err != nil {
			return err
		}
		_, err = bw.Write(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", runID, err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("export %s: write: %w", runID, err)
	}
	return h, nil
}

// marshalLine is v as one JSON line, HTML characters unescaped (the form
// the v1 exporter wrote).
func marshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := encjson.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// workflowDigestOf is the "digest" member of the run's first event (its
// run.created), "" when there is none; the header's workflowDigest.
func workflowDigestOf(payload string) string {
	var p struct {
		Digest string `json:"digest"`
	}
	if json.Unmarshal([]byte(payload), &p) != nil {
		return ""
	}
	return p.Digest
}

// VerifyOptions tune VerifyExport.
type VerifyOptions struct {
	// PublicKey, when set, requires a header signature made by its private
	// key.
	PublicKey ed25519.PublicKey
}

// AuditReport is what VerifyExport checked.
type AuditReport struct {
	Header AuditHeader
	// Events is the number of event lines verified.
	Events int64
	// Chain names the chain versions checked (ChainSummary).
	Chain string
	Spans []ChainSpan
	// Signed: the header carries a signature; SignatureVerified: it was
	// checked against VerifyOptions.PublicKey.
	Signed, SignatureVerified bool
}

// VerifyStream reads an audit export from r and recomputes its chain
// offline, without the database or any key. It returns the number of events
// verified; on failure the error is a *ChainError naming the first bad seq
// (0 for a bad header).
func VerifyStream(r io.Reader) (int64, *AuditHeader, error) {
	rep, err := VerifyExport(r, VerifyOptions{})
	if rep == nil {
		return 0, nil, err
	}
	return rep.Events, &rep.Header, err
}

// VerifyExport reads an audit export from r, parses every line strictly
// (member names exact, duplicates and unknown members refused), recomputes
// the chain, checks every header member against the lines and, with
// opts.PublicKey, the header's signature. On failure the error is a
// *ChainError naming the first bad seq (0 for the header); the report
// holds what was read so far (nil without a header).
func VerifyExport(r io.Reader, opts VerifyOptions) (*AuditReport, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxAuditLine)
	if !sc.Scan() {
		err := sc.Err()
		if err == nil {
			err = errors.New("empty file")
		}
		return nil, &ChainError{Seq: 0, Reason: fmt.Sprintf("no header line: %v", err)}
	}
	rep := &AuditReport{}
	h := &rep.Header
	if err := strictUnmarshal(sc.Bytes(), h); err != nil {
		return nil, &ChainError{Seq: 0, Reason: fmt.Sprintf("header: %v", err)}
	}
	headerErr := func(format string, a ...any) error {
		return &ChainError{RunID: h.RunID, Seq: 0, Reason: fmt.Sprintf(format, a...)}
	}
	if h.EventCount < 1 {
		return rep, headerErr("header eventCount %d: an exported run has at least one event", h.EventCount)
	}
	switch h.Format {
	case AuditFormat:
		if h.Chain == "" {
			return rep, headerErr("header has no chain member")
		}
	case AuditFormatV1:
		if h.Chain != "" || h.Signature != nil {
			return rep, headerErr("a %s header has no chain or signature member", AuditFormatV1)
		}
	default:
		return rep, headerErr("header format %q, want %q", h.Format, AuditFormat)
	}
	rep.Signed = h.Signature != nil
	if opts.PublicKey != nil {
		if err := CheckAuditSignature(h, opts.PublicKey); err != nil {
			return rep, headerErr("signature: %v", err)
		}
		rep.SignatureVerified = true
	}
	v := Verifier{RunID: h.RunID}
	var digest string
	for sc.Scan() {
		next := v.Count() + 1
		if next > h.EventCount {
			return rep, &ChainError{RunID: h.RunID, Seq: next, Reason: fmt.Sprintf("more events than the header's %d", h.EventCount)}
		}
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			return rep, &ChainError{RunID: h.RunID, Seq: next, Reason: "blank line"}
		}
		var l auditLine
		if err := strictUnmarshal(sc.Bytes(), &l); err != nil {
			return rep, &ChainError{RunID: h.RunID, Seq: next, Reason: fmt.Sprintf("line %d: %v", next+1, err)}
		}
		e := Event{RunID: l.RunID, Seq: l.Seq, Stream: l.Stream, Type: l.Type, Payload: l.Payload, CreatedAt: l.CreatedAt, PrevHash: l.PrevHash, Hash: l.Hash}
		if err := v.Next(e); err != nil {
			rep.Events, rep.Spans, rep.Chain = v.Count(), v.Spans(), v.Chain()
			return rep, err
		}
		if e.Seq == 1 {
			digest = workflowDigestOf(e.Payload)
		}
	}
	rep.Events, rep.Spans, rep.Chain = v.Count(), v.Spans(), v.Chain()
	if err := sc.Err(); err != nil {
		return rep, &ChainError{RunID: h.RunID, Seq: v.Count() + 1, Reason: fmt.Sprintf("read: %v", err)}
	}
	switch {
	case v.Count() != h.EventCount:
		return rep, &ChainError{RunID: h.RunID, Seq: v.Count() + 1, Reason: fmt.Sprintf("header says %d events, file has %d", h.EventCount, v.Count())}
	case v.Tip() != h.FinalHash:
		return rep, &ChainError{RunID: h.RunID, Seq: v.Count(), Reason: "final hash does not match the header"}
	case digest != h.WorkflowDigest:
		return rep, headerErr("header workflowDigest %q, the run's first event says %q", h.WorkflowDigest, digest)
	case h.Format == AuditFormat && h.Chain != v.Chain():
		return rep, headerErr("header chain %q, the lines are %q", h.Chain, v.Chain())
	}
	return rep, nil
}

// strictUnmarshal decodes one JSON object: member names match exactly
// (encoding/json would take "PAYLOAD" for "payload"), a duplicate member,
// an unknown member, invalid UTF-8 or trailing data is an error. jq,
// Python and this verifier therefore read the same values.
func strictUnmarshal(b []byte, v any) error {
	return json.Unmarshal(b, v, json.RejectUnknownMembers(true))
}
