package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
)

// Chain versions. Each stored hash says which version computed it, so a
// database or export written before a version existed verifies exactly as
// it was written, and events appended now always use ChainLatest.
const (
	// ChainV1 (runs written before created_at was covered): the hash is
	// hex(sha256(prev_hash || [run_id, seq, stream, type, payload])), 64 hex
	// digits.
	ChainV1 = 1
	// ChainV2 also covers created_at: the hash is "v2:" +
	// hex(sha256(prev_hash || [run_id, seq, stream, type, payload, created_at])).
	ChainV2 = 2
	// ChainLatest is the version every new event is hashed with.
	ChainLatest = ChainV2
)

const chainV2Prefix = "v2:"

// ChainVersion is the version a stored hash was computed with: ChainV2 for
// "v2:" and 64 hex digits, ChainV1 for 64 hex digits alone, 0 for anything
// else (not a chain hash).
func ChainVersion(hash string) int {
	switch {
	case strings.HasPrefix(hash, chainV2Prefix) && isHex64(hash[len(chainV2Prefix):]):
		return ChainV2
	case isHex64(hash):
		return ChainV1
	}
	return 0
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ComputeHash returns the version-1 chain hash of an event: sha256(prev_hash
// || canonical(run_id, seq, stream, type, payload)) in hex. The payload is
// taken as stored, so the chain verifies without any decryption key.
func ComputeHash(prevHash, runID string, seq int64, stream, typ, payload string) string {
	h := sha256.New()
	h.Write([]byte(prevHash))
	h.Write(canonical(runID, seq, stream, typ, payload))
	return hex.EncodeToString(h.Sum(nil))
}

// chainBufs holds ChainHash's scratch buffers.
var chainBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// ChainHash returns e's hash under version (ChainV1 or ChainV2) from its
// stored fields (PrevHash, RunID, Seq, Stream, Type, Payload, CreatedAt);
// "" for an unknown version.
func ChainHash(version int, e Event) string {
	switch version {
	case ChainV1:
		return ComputeHash(e.PrevHash, e.RunID, e.Seq, e.Stream, e.Type, e.Payload)
	case ChainV2:
		// sha256(prev_hash || canonicalV2(...)), in one buffer reused
		// across calls: this runs for every event appended and verified.
		bp := chainBufs.Get().(*[]byte)
		b := append((*bp)[:0], e.PrevHash...)
		b = appendCanonicalV2(b, e.RunID, e.Seq, e.Stream, e.Type, e.Payload, e.CreatedAt)
		sum := sha256.Sum256(b)
		if cap(b) <= 1<<16 { // a large payload's buffer is not kept
			*bp = b
			chainBufs.Put(bp)
		}
		var out [len(chainV2Prefix) + 2*sha256.Size]byte
		copy(out[:], chainV2Prefix)
		hex.Encode(out[len(chainV2Prefix):], sum[:])
		return string(out[:])
	}
	return ""
}

// ChainError names the first event whose hash or sequence does not verify.
type ChainError struct {
	RunID  string
	Seq    int64
	Reason string
}

func (e *ChainError) Error() string {
	switch {
	case e.Seq == 0 && e.RunID == "": // an audit file whose header did not parse
		return fmt.Sprintf("events: audit file: %s", e.Reason)
	case e.Seq == 0: // an audit file's header (its members, its signature), not the chain
		return fmt.Sprintf("events: audit header of run %s: %s", e.RunID, e.Reason)
	}
	return fmt.Sprintf("events: chain broken in run %s at seq %d: %s", e.RunID, e.Seq, e.Reason)
}

// ChainSpan is a run of consecutive events hashed with one chain version.
type ChainSpan struct {
	Version int   `json:"version"`
	FromSeq int64 `json:"fromSeq"`
	ToSeq   int64 `json:"toSeq"`
}

// Verifier checks a run's events one by one, in order.
type Verifier struct {
	RunID string
	last  int64
	prev  string
	spans []ChainSpan
}

// Next checks one event; it returns a *ChainError at the first bad one.
// The chain version may only go up within a run (a run written before an
// upgrade and resumed after it), never down.
func (v *Verifier) Next(e Event) error {
	if v.RunID == "" {
		v.RunID = e.RunID
	}
	switch {
	case e.RunID != v.RunID:
		return &ChainError{RunID: v.RunID, Seq: e.Seq, Reason: fmt.Sprintf("event of run %q in run %q", e.RunID, v.RunID)}
	case e.Seq != v.last+1:
		return &ChainError{RunID: v.RunID, Seq: v.last + 1, Reason: fmt.Sprintf("expected seq %d, found %d", v.last+1, e.Seq)}
	case e.PrevHash != v.prev:
		return &ChainError{RunID: v.RunID, Seq: e.Seq, Reason: "prev_hash does not match the previous event's hash"}
	}
	ver := ChainVersion(e.Hash)
	if ver == 0 {
		return &ChainError{RunID: v.RunID, Seq: e.Seq, Reason: "hash is not a chain hash of any known version"}
	}
	if n := len(v.spans); n > 0 && ver < v.spans[n-1].Version {
		return &ChainError{RunID: v.RunID, Seq: e.Seq, Reason: fmt.Sprintf("chain version goes down from v%d to v%d", v.spans[n-1].Version, ver)}
	}
	if ChainHash(ver, e) != e.Hash {
		return &ChainError{RunID: v.RunID, Seq: e.Seq, Reason: fmt.Sprintf("hash does not match the event's content (chain v%d)", ver)}
	}
	if n := len(v.spans); n > 0 && v.spans[n-1].Version == ver {
		v.spans[n-1].ToSeq = e.Seq
	} else {
		v.spans = append(v.spans, ChainSpan{Version: ver, FromSeq: e.Seq, ToSeq: e.Seq})
	}
	v.last, v.prev = e.Seq, e.Hash
	return nil
}

// Count is how many events verified so far; Tip is the last hash.
func (v *Verifier) Count() int64 { return v.last }

// Tip returns the hash of the last verified event.
func (v *Verifier) Tip() string { return v.prev }

// Spans lists the chain versions verified so far, in seq order.
func (v *Verifier) Spans() []ChainSpan { return append([]ChainSpan(nil), v.spans...) }

// Chain names the versions verified so far the way exports and verify
// print them: "v2", or "v1 (seq 1-12), v2 (seq 13-20)" for a run resumed
// across an upgrade.
func (v *Verifier) Chain() string { return ChainSummary(v.spans) }

// ChainSummary formats spans as Verifier.Chain does.
func ChainSummary(spans []ChainSpan) string {
	if len(spans) == 1 {
		return fmt.Sprintf("v%d", spans[0].Version)
	}
	parts := make([]string, len(spans))
	for i, s := range spans {
		parts[i] = fmt.Sprintf("v%d (seq %d-%d)", s.Version, s.FromSeq, s.ToSeq)
	}
	return strings.Join(parts, ", ")
}

// Verify checks a whole run's events.
func Verify(evs []Event) error {
	var v Verifier
	for _, e := range evs {
		if err := v.Next(e); err != nil {
			return err
		}
	}
	return nil
}
