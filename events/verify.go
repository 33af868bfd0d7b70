package events

import (
	"context"
	"errors"
	"fmt"
)

// RunChain is what VerifyRunChain checked of a stored run.
type RunChain struct {
	// Events is the run's final seq; Head its hash.
	Events int64
	Head   string
	// Chain names the chain versions (ChainSummary): "v2", or "v1 (seq
	// 1-12), v2 (seq 13-20)" for a run resumed across the upgrade.
	Chain string
	Spans []ChainSpan
}

// VerifyRunChain recomputes a stored run's chain from seq 1. A broken
// chain is a *ChainError naming the first bad seq; a run with no events is
// ErrNoRun. The RunChain holds what verified before the first bad event.
func (db *DB) VerifyRunChain(ctx context.Context, runID string) (RunChain, error) {
	v := Verifier{RunID: runID}
	err := db.Scan(ctx, runID, 0, v.Next)
	rc := RunChain{Events: v.Count(), Head: v.Tip(), Chain: v.Chain(), Spans: v.Spans()}
	if err != nil {
		return rc, err
	}
	if v.Count() == 0 {
		return rc, fmt.Errorf("%w: %s", ErrNoRun, runID)
	}
	return rc, nil
}

// VerifyRun recomputes a stored run's chain and returns its event count.
func (db *DB) VerifyRun(ctx context.Context, runID string) (int64, error) {
	rc, err := db.VerifyRunChain(ctx, runID)
	return rc.Events, err
}

// RequireIntact is the check a command makes before it acts on a run
// (resume, replay, the worker): the run's chain recomputes from seq 1, or
// the error is an *Error (storage, exit 5) wrapping the *ChainError that
// names the first bad seq. ErrNoRun passes through unwrapped.
func (db *DB) RequireIntact(ctx context.Context, runID string) error {
	_, err := db.VerifyRunChain(ctx, runID)
	if err == nil || !isChainError(err) {
		return err
	}
	return &Error{Op: "verify run " + runID + " before acting on it", Path: db.path, Err: err}
}

func isChainError(err error) bool {
	var ce *ChainError
	return errors.As(err, &ce)
}
