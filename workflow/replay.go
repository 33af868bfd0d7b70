package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport"
)

// The run loop's side of a replay (docs/ARCHITECTURE.md, "Replay"). The
// package workflow/replay indexes a finished run's log and answers a run's
// requests from it through a [Dialer] that is also a [ReplaySource]; its
// sessions implement [Recorded]. workflow does not import it (cmd/agentctl
// wires them): what the run loop must know of a replay is here, in
// replay_follow.go (continuing a task as its source's reconcile and resume
// did) and behind the Recorded checks of the call code.

// KindDivergence is the error kind of a replay whose workflow asked for a
// call other than the recorded one.
const KindDivergence transport.Kind = "replay_divergence"

// ErrRunNotFinished refuses to replay a run that has no run.finished event.
var ErrRunNotFinished = errors.New("run is not finished")

// DivergenceError is the first difference between what a replay asks for
// and what the source run recorded. The CLI maps it to exit code 4.
type DivergenceError struct {
	SourceRunID string
	TaskID      string
	Attempt     int
	Field       string // "call", "server", "tool", "argumentsDigest", "dispatch", "session", "task"
	Recorded    string
	Replayed    string
}

func (e *DivergenceError) Error() string {
	return fmt.Sprintf("replay diverged from %s at task %q (attempt %d): %s: recorded %s, replay asks %s",
		e.SourceRunID, e.TaskID, e.Attempt, e.Field, e.Recorded, e.Replayed)
}

// Unwrap makes a divergence a definitive failure for the state machine (a
// transport error that was never sent) and a failure decided by agentctl
// (exit 4), so the replay run ends failed, never uncertain.
func (e *DivergenceError) Unwrap() []error {
	return []error{&transport.Error{Op: "replay", Kind: KindDivergence, Message: e.Field},
		&callFailure{kind: KindDivergence, msg: e.Error()}}
}

// isDivergence reports whether err is a replay's divergence from its source.
func isDivergence(err error) bool {
	var de *DivergenceError
	return errors.As(err, &de)
}

// ReplaySource is implemented by a [Dialer] that answers from a recorded
// run (workflow/replay): a run whose Dialer is one reproduces its source's
// recoveries (replay_follow.go) and names the source's calls.
type ReplaySource interface {
	Dialer
	// SourceRunID is the recorded run.
	SourceRunID() string
	// SourceAttempt is what the source did with attempt n of taskID once
	// it ended.
	SourceAttempt(taskID string, n int) SourceAttempt
}

// SourceAttempt is what a source run did with one task attempt once it
// ended.
type SourceAttempt struct {
	// Verdict is the operator's reconcile of the attempt's call; nil when
	// there is none.
	Verdict *vocab.CallReconciled
	// Settled: a task.finished of the attempt followed the verdict (a
	// resume finished the attempt with the reconciled result).
	Settled bool
	// NextStarted: the source started a later attempt of the task.
	NextStarted bool
}

// ReplayedError is a recorded failure: it prints exactly as recorded and
// unwraps to a transport error classified like the original.
type ReplayedError struct {
	Msg string
	Err error
	// CtxEnded: the source saw this failure because its context ended;
	// CancelCause is then the cause its tasks/cancel recorded ("user" or
	// "timeout"), "" when none was.
	CtxEnded    bool
	CancelCause string
}

func (e *ReplayedError) Error() string { return e.Msg }

// Unwrap returns the transport error classified like the original.
func (e *ReplayedError) Unwrap() error { return e.Err }

// replayedCtxEnd reports whether err is a recorded failure that the
// source saw because its context ended (the user's cancel or a deadline),
// and whether that was the user's cancel: a replay's own context never
// ends. The cause its tasks/cancel recorded decides (a log written before
// deadlines had their own cause says "user" for both, and its call ended
// cancelled); without one, the failure's kind.
func replayedCtxEnd(err error) (ended, cancelled bool) {
	var re *ReplayedError
	if !errors.As(err, &re) || !re.CtxEnded {
		return false, false
	}
	if re.CancelCause != "" {
		return true, re.CancelCause == "user"
	}
	return true, transport.KindOf(err) == transport.KindCancelled
}

// ReplayedKind marks the transport.Frame by which a replay session hands
// the run loop a reference to recorded frames, as a [vocab.ReplayFrames]
// body (frameSink records it as replay.frames).
const ReplayedKind = "replayed"

// replayedKind is ReplayedKind, as the run loop spells it.
const replayedKind = ReplayedKind

// replayedRecord is the replay.frames record of a replay session's
// reference to recorded frames (body), placed like the frames it stands
// for (base): a poll holds it with its own frames until it knows whether
// the poll is recorded or folded.
func replayedRecord(stream string, base vocab.Frame, body []byte) (events.Record, error) {
	var r vocab.ReplayFrames
	if err := json.Unmarshal(body, &r); err != nil {
		return events.Record{}, fmt.Errorf("replay: reference to recorded frames: %w", err)
	}
	r.Remote, r.Generation, r.TaskID, r.Attempt, r.EffectID = base.Remote, base.Generation, base.TaskID, base.Attempt, base.EffectID
	return events.Record{Stream: stream, Type: vocab.TypeReplayFrames, Payload: r}, nil
}

// FoldedRaw marks a replay's stand-in for a task status change its source
// saw but did not record (beyond the call's bounds): counted as a change,
// never recorded (statusFits never records one). No server's task object
// is a NUL byte.
var FoldedRaw = json.RawMessage("\x00folded")

// isFolded reports whether t is a replay's folded stand-in.
func isFolded(t *transport.Task) bool { return bytes.Equal(t.Raw, FoldedRaw) }

// KindForExit inverts exitFor: a transport error kind that ends a run with
// code. It serves logs that did not record the kind of a session failure
// (task.finished without errorKind).
func KindForExit(code int) transport.Kind {
	switch code {
	case ExitUncertain:
		return transport.KindPolicyDenied
	case ExitCancelled:
		return transport.KindCancelled
	case ExitFailed:
		return transport.KindRemoteError
	}
	return transport.KindTransportLoss
}

// URLElicitationReason is the reason a call records for a -32042 answer
// (the sanitised hosts an operator must visit); a replay rebuilds the
// server's error from it.
func URLElicitationReason(err error) (string, bool) { return urlElicitation(err) }
