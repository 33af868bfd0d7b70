package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/workflow/spec"
)

// The login pre-check on every path (issue 31 follow-up): `run` and
// `check --remote` call MissingLogins on the workflow file; a resume on the
// workflow its run recorded (RunMissingLogins); a queued run, once a
// worker has claimed it, ends failed with the same LoginRequiredError
// before any request (requireQueuedLogins), and the worker goes on.

// errFirstEvent stops a scan after the run's first event.
var errFirstEvent = errors.New("first event read")

// RunMissingLogins is MissingLogins for the workflow recorded in runID's
// run.created (what a resume runs, whatever the file says now); the
// LoginRequiredError names that recorded file. nil when nothing is missing.
func RunMissingLogins(ctx context.Context, db *events.DB, runID string) (*LoginRequiredError, error) {
	var created vocab.RunCreated
	found := false
	err := db.Scan(ctx, runID, 0, func(e events.Event) error {
		if e.Type == vocab.TypeRunCreated {
			var err error
			if created, err = vocab.Decode[vocab.RunCreated](e); err != nil {
				return err
			}
			found = true
		}
		return errFirstEvent
	})
	if err != nil && !errors.Is(err, errFirstEvent) {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	if !found || created.Mode == "replay" {
		return nil, nil // no run (the resume reports it), or a replay (no server)
	}
	wf, err := spec.Parse(created.File, []byte(created.Source))
	if err != nil {
		return nil, nil // the resume reports the recorded workflow's error
	}
	missing, err := MissingLogins(ctx, db, wf)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	return &LoginRequiredError{File: wf.File, Missing: missing}, nil
}

// requireQueuedLogins ends a claimed queued run failed (exit 6) when a
// remote it uses needs a login the database does not hold: nothing is
// sent. nil when every login is there.
func (rn *run) requireQueuedLogins(ctx context.Context) *Result {
	missing, err := MissingLogins(ctx, rn.r.DB, rn.wf)
	if err != nil {
		return rn.finish(nil, &Error{RunID: rn.id, Code: ExitStorage, Err: fmt.Errorf("read the stored logins: %w", err)})
	}
	if len(missing) == 0 {
		return nil
	}
	return rn.finish(nil, &Error{RunID: rn.id, Code: ExitRemote, Err: &LoginRequiredError{File: rn.wf.File, Missing: missing}})
}
