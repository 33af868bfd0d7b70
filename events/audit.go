package events

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// AuditFormat names the audit export format; it is the "format" member of
// the header line.
const AuditFormat = "agentctl.audit/v1"

// maxAuditLine bounds one line of an audit file when verifying (an event
// payload is bounded by the transport's response limits; 64 MiB is ample).
const maxAuditLine = 64 << 20

// AuditHeader is the first line of an audit export.
type AuditHeader struct {
	Format         string `json:"format"`
	RunID          string `json:"runId"`
	WorkflowDigest string `json:"workflowDigest"`
	EventCount     int64  `json:"eventCount"`
	FinalHash      string `json:"finalHash"`
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

// Export writes runID as JSON Lines to w: an [AuditHeader], then one line
// per event in seq order. The run's chain is verified first; a broken chain
// is returned as a *ChainError and nothing is written.
func (db *DB) Export(ctx context.Context, w io.Writer, runID string) (*AuditHeader, error) {
	n, err := db.VerifyRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", runID, err)
	}
	h := &AuditHeader{Format: AuditFormat, RunID: runID}
	var first bool
	err = db.Scan(ctx, runID, 0, func(e Event) error {
		if !first {
			first = true
			var p struct {
				Digest string `json:"digest"`
			}
			if json.Unmarshal([]byte(e.Payload), &p) == nil {
				h.WorkflowDigest = p.Digest
			}
		}
		h.EventCount, h.FinalHash = e.Seq, e.Hash
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", runID, err)
	}
	if h.EventCount != n {
		return nil, fmt.Errorf("export %s: run grew while exporting (%d then %d events)", runID, n, h.EventCount)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil {
		return nil, fmt.Errorf("export %s: write header: %w", runID, err)
	}
	err = db.Scan(ctx, runID, 0, func(e Event) error {
		if e.Seq > h.EventCount {
			return nil // appended after the header was fixed
		}
		return enc.Encode(auditLine{RunID: e.RunID, Seq: e.Seq, Stream: e.Stream, Type: e.Type, CreatedAt: e.CreatedAt, Payload: e.Payload, PrevHash: e.PrevHash, Hash: e.Hash})
	})
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", runID, err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("export %s: write: %w", runID, err)
	}
	return h, nil
}

// VerifyStream reads an audit export from r and recomputes its chain
// offline, without the database or any key. It returns the number of events
// verified; on failure the error is a *ChainError naming the first bad seq
// (0 for a bad header).
func VerifyStream(r io.Reader) (int64, *AuditHeader, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxAuditLine)
	if !sc.Scan() {
		err := sc.Err()
		if err == nil {
			err = errors.New("empty file")
		}
		return 0, nil, &ChainError{Seq: 0, Reason: fmt.Sprintf("no header line: %v", err)}
	}
	var h AuditHeader
	if err := strictUnmarshal(sc.Bytes(), &h); err != nil {
		return 0, nil, &ChainError{Seq: 0, Reason: fmt.Sprintf("header: %v", err)}
	}
	if h.Format != AuditFormat {
		return 0, &h, &ChainError{RunID: h.RunID, Seq: 0, Reason: fmt.Sprintf("header format %q, want %q", h.Format, AuditFormat)}
	}
	v := Verifier{RunID: h.RunID}
	for sc.Scan() {
		next := v.Count() + 1
		if next > h.EventCount {
			return v.Count(), &h, &ChainError{RunID: h.RunID, Seq: next, Reason: fmt.Sprintf("more events than the header's %d", h.EventCount)}
		}
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			return v.Count(), &h, &ChainError{RunID: h.RunID, Seq: next, Reason: "blank line"}
		}
		var l auditLine
		if err := strictUnmarshal(sc.Bytes(), &l); err != nil {
			return v.Count(), &h, &ChainError{RunID: h.RunID, Seq: next, Reason: fmt.Sprintf("line %d: %v", next+1, err)}
		}
		e := Event{RunID: l.RunID, Seq: l.Seq, Stream: l.Stream, Type: l.Type, Payload: l.Payload, CreatedAt: l.CreatedAt, PrevHash: l.PrevHash, Hash: l.Hash}
		if err := v.Next(e); err != nil {
			return v.Count(), &h, err
		}
	}
	if err := sc.Err(); err != nil {
		return v.Count(), &h, &ChainError{RunID: h.RunID, Seq: v.Count() + 1, Reason: fmt.Sprintf("read: %v", err)}
	}
	switch {
	case v.Count() != h.EventCount:
		return v.Count(), &h, &ChainError{RunID: h.RunID, Seq: v.Count() + 1, Reason: fmt.Sprintf("header says %d events, file has %d", h.EventCount, v.Count())}
	case v.Tip() != h.FinalHash:
		return v.Count(), &h, &ChainError{RunID: h.RunID, Seq: v.Count(), Reason: "final hash does not match the header"}
	}
	return v.Count(), &h, nil
}

// strictUnmarshal decodes one JSON object, refusing unknown members and
// trailing data.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}
