package workflow

import (
	"errors"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/transport"
)

// Exit codes of README.md, "Commands"; a run records the one it ended with.
// Two classes may share a code (policy refusal and uncertain are both 3):
// the class, not the code, says which (see [Classes]).
const (
	ExitOK        = 0
	ExitInternal  = 1 // a failure no class names: a bug
	ExitInvalid   = 2
	ExitPolicy    = 3 // the policy refused a file, flags or a request
	ExitUncertain = 3 // a call may have executed and an operator decides
	ExitFailed    = 4
	ExitStorage   = 5
	ExitRemote    = 6
	ExitCancelled = 130
)

// Class names a kind of failure for scripts: the `class` of the CLI's JSON
// error envelope and a run result's errorClass. A transport failure's
// class is its [transport.Kind].
type Class string

// The classes of local failures. The classes of transport failures are
// the transport kinds (Class(transport.KindTimeout), …).
const (
	ClassInternal         Class = "internal"
	ClassInvalidInput     Class = "invalid_input"
	ClassInvalidWorkflow  Class = "invalid_workflow"
	ClassAmbiguousID      Class = "ambiguous_id"
	ClassUnknownRun       Class = "unknown_run"
	ClassUnknownCall      Class = "unknown_call"
	ClassPolicyDenied     Class = Class(transport.KindPolicyDenied)
	ClassUncertain        Class = "uncertain"
	ClassFailed           Class = "failed"
	ClassReplayDivergence Class = "replay_divergence"
	ClassStorage          Class = "storage"
	ClassBusy             Class = "busy"
	ClassNewerSchema      Class = "newer_schema"
	ClassRemote           Class = "remote"
	ClassCancelled        Class = Class(transport.KindCancelled)
)

// ClassInfo is one row of the error table: a class, the exit code it
// ends a command with, and what to do about it.
type ClassInfo struct {
	Class Class
	Code  int
	Hint  string
}

// classes is the one table of error classes: every exit code and class
// name the CLI reports comes from it. Where two rows share a code, the
// first is the class that a bare code stands for ([ClassOfCode]).
var classes = []ClassInfo{
	{ClassInternal, ExitInternal, "a failure no class names (a bug: please report it)"},
	{ClassInvalidInput, ExitInvalid, "a flag, an argument, a file or a local setting is wrong: fix what the message names"},
	{ClassInvalidWorkflow, ExitInvalid, "the workflow file does not parse or check: fix it at the file:line:col given"},
	{ClassAmbiguousID, ExitInvalid, "the id matches several runs or calls: give more of it"},
	{ClassUnknownRun, ExitInvalid, "no run has that id: agentctl runs list"},
	{ClassUnknownCall, ExitInvalid, "no call has that id: agentctl effects list RUN"},
	{ClassUncertain, ExitUncertain, "a call may have executed: agentctl effects list RUN, then effects reconcile and resume"},
	{ClassPolicyDenied, ExitPolicy, "the policy forbids it (network, secrets or tools): change the policy, not the workflow"},
	{ClassFailed, ExitFailed, "the run failed: a tool reported an error or a result broke the contract"},
	{ClassReplayDivergence, ExitFailed, "the replay asked for a step its source did not record"},
	{Class(transport.KindRemoteError), ExitFailed, "the server answered with a JSON-RPC error"},
	{Class(transport.KindToolError), ExitFailed, "the tool reported an error (isError)"},
	{Class(transport.KindInvalidArguments), ExitFailed, "the arguments break the tool's inputSchema"},
	{Class(transport.KindInvalidOutput), ExitFailed, "the result breaks the tool's outputSchema"},
	{Class(transport.KindSchemaTooComplex), ExitFailed, "a tool schema exceeds the validation budget"},
	{ClassStorage, ExitStorage, "the database failed, or its chain does not verify"},
	{ClassBusy, ExitStorage, "another process holds the database or the run: retry later"},
	{ClassNewerSchema, ExitStorage, "the database was written by a newer agentctl: upgrade"},
	{ClassRemote, ExitRemote, "a server failed or broke the protocol"},
	{Class(transport.KindSessionExpired), ExitRemote, "the server forgot the session"},
	{Class(transport.KindTimeout), ExitRemote, "the server did not answer in time"},
	{Class(transport.KindTransportLoss), ExitRemote, "the connection or the stream was lost"},
	{Class(transport.KindMalformed), ExitRemote, "the server sent something that is not valid MCP"},
	{Class(transport.KindUnauthorized), ExitRemote, "the server refused the credential: check the remote's headers and secret references"},
	{Class(transport.KindHTTPStatus), ExitRemote, "the server answered with an HTTP error status"},
	{Class(transport.KindVersionMismatch), ExitRemote, "the server negotiated another protocol version"},
	{Class(transport.KindUnsupported), ExitRemote, "the server lacks something agentctl requires"},
	{ClassCancelled, ExitCancelled, "stopped (Ctrl-C, SIGTERM, a closed stdout): agentctl resume RUN"},
}

// Classes returns the error table, one row per class, in the order
// `agentctl help exit-codes` lists them.
func Classes() []ClassInfo { return append([]ClassInfo(nil), classes...) }

func (c Class) info() (ClassInfo, bool) {
	for _, r := range classes {
		if r.Class == c {
			return r, true
		}
	}
	return ClassInfo{}, false
}

// Code is the exit code of class c; a class the table does not hold
// (a transport kind added later) is a remote failure.
func (c Class) Code() int {
	if r, ok := c.info(); ok {
		return r.Code
	}
	return ExitRemote
}

// Hint says what class c means and what to do about it ("" for a class
// the table does not hold).
func (c Class) Hint() string {
	r, _ := c.info()
	return r.Hint
}

// ClassOfCode is the class a bare exit code stands for when nothing more
// is known of the failure: the first row with that code (3 is uncertain;
// a policy refusal says so itself), else internal.
func ClassOfCode(code int) Class {
	for _, r := range classes {
		if r.Code == code {
			return r.Class
		}
	}
	return ClassInternal
}

// exitFor maps a failure that ended a task to the run's exit code.
func exitFor(err error) int {
	var se *events.Error
	if errors.As(err, &se) {
		return ExitStorage
	}
	if errors.Is(err, transport.ErrSecretTooShort) { // bad input: refused before anything was sent
		return ExitInvalid
	}
	k := transport.KindOf(err)
	if k == "" { // a local failure of the task: a template, a contract, a refused secret
		return ExitFailed
	}
	return Class(k).Code()
}

// stateFor is the state a task or a run ends in with exit code code and
// failure err. A policy refusal shares exit 3 with an uncertain call, but
// the refused request was never sent: it failed (and `effects list` would
// find nothing to reconcile). A call the machine left uncertain carries an
// *UncertainError whatever failure put it there.
func stateFor(code int, err error) string {
	var ue *UncertainError
	if code == ExitPolicy && transport.KindOf(err) == transport.KindPolicyDenied && !errors.As(err, &ue) {
		return StateFailed
	}
	return stateForExit(code)
}

// WorstExit is the exit code of a batch of runs (`agentctl run --inputs`):
// the worst of codes by the rule a run's worst task follows (uncertain
// beats cancelled beats any other failure beats success), the earliest of
// codes on a tie; 0 for none.
func WorstExit(codes ...int) int {
	worst := ExitOK
	for _, c := range codes {
		if severity(c) > severity(worst) {
			worst = c
		}
	}
	return worst
}
