package workflow

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/transport"
)

// transportKinds is every transport.Kind; a kind added there must get a
// row in the error table (and here).
var transportKinds = []transport.Kind{
	transport.KindSessionExpired, transport.KindTimeout, transport.KindTransportLoss, transport.KindMalformed,
	transport.KindCancelled, transport.KindUnauthorized, transport.KindHTTPStatus, transport.KindRemoteError,
	transport.KindVersionMismatch, transport.KindPolicyDenied, transport.KindToolError, transport.KindInvalidArguments,
	transport.KindInvalidOutput, transport.KindUnsupported, transport.KindSchemaTooComplex,
}

// TestClasses_Table: the one error table holds each class once, with a
// hint, and only the exit codes README.md documents; policy refusal and
// uncertain share code 3 under distinct names, and a bare code stands for
// the first class of its code.
func TestClasses_Table(t *testing.T) {
	documented := map[int]bool{ExitInternal: true, ExitInvalid: true, ExitUncertain: true, ExitFailed: true, ExitStorage: true, ExitRemote: true, ExitCancelled: true}
	seen := map[Class]bool{}
	for _, r := range Classes() {
		if seen[r.Class] || r.Class == "" || r.Hint == "" || !documented[r.Code] {
			t.Errorf("row %+v: duplicate, unnamed, without a hint or with an undocumented code", r)
		}
		seen[r.Class] = true
		if r.Class.Code() != r.Code || r.Class.Hint() != r.Hint {
			t.Errorf("%s: Code() %d Hint() %q, want the row's", r.Class, r.Class.Code(), r.Class.Hint())
		}
	}
	for _, k := range transportKinds {
		if !seen[Class(k)] {
			t.Errorf("transport kind %s has no row", k)
		}
	}
	if ClassPolicyDenied == ClassUncertain || ClassPolicyDenied.Code() != ExitPolicy || ClassUncertain.Code() != ExitUncertain || ExitPolicy != 3 || ExitUncertain != 3 {
		t.Errorf("policy_denied %d and uncertain %d: want distinct names sharing exit 3", ClassPolicyDenied.Code(), ClassUncertain.Code())
	}
	for code, want := range map[int]Class{
		0: ClassInternal, 1: ClassInternal, 2: ClassInvalidInput, 3: ClassUncertain, 4: ClassFailed,
		5: ClassStorage, 6: ClassRemote, 130: ClassCancelled, 99: ClassInternal,
	} {
		if got := ClassOfCode(code); got != want {
			t.Errorf("ClassOfCode(%d) = %s, want %s", code, got, want)
		}
	}
	if c := Class("a_kind_added_later"); c.Code() != ExitRemote || c.Hint() != "" {
		t.Errorf("unknown class: code %d hint %q, want 6 and none", c.Code(), c.Hint())
	}
}

// TestExitFor_Table: the exit code a failure ends a task's run with, by
// the error table: storage 5, a too-short secret 2, a local failure 4,
// a transport failure its kind's code.
func TestExitFor_Table(t *testing.T) {
	want := map[transport.Kind]int{
		transport.KindPolicyDenied: 3, transport.KindCancelled: 130,
		transport.KindRemoteError: 4, transport.KindToolError: 4, transport.KindInvalidArguments: 4,
		transport.KindInvalidOutput: 4, transport.KindSchemaTooComplex: 4,
		transport.KindSessionExpired: 6, transport.KindTimeout: 6, transport.KindTransportLoss: 6, transport.KindMalformed: 6,
		transport.KindUnauthorized: 6, transport.KindHTTPStatus: 6, transport.KindVersionMismatch: 6, transport.KindUnsupported: 6,
	}
	for _, k := range transportKinds {
		err := fmt.Errorf("task t: %w", &transport.Error{Op: "call", Kind: k, Err: errors.New("x")})
		if got := exitFor(err); got != want[k] {
			t.Errorf("exitFor(%s) = %d, want %d", k, got, want[k])
		}
	}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("append: %w", &events.Error{Op: "append", Err: errors.New("disk full")}), ExitStorage},
		{fmt.Errorf("header: %w", transport.ErrSecretTooShort), ExitInvalid},
		{errors.New("template: no such output"), ExitFailed},
		{&transport.Error{Op: "call", Kind: "a_kind_added_later", Err: errors.New("x")}, ExitRemote},
	} {
		if got := exitFor(tc.err); got != tc.want {
			t.Errorf("exitFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestWorstExit: a batch of runs exits with its worst run's code, as a
// run exits with its worst task's: uncertain beats cancelled beats any
// other failure (the earliest of them) beats success.
func TestWorstExit(t *testing.T) {
	for _, tc := range []struct {
		codes []int
		want  int
	}{
		{nil, ExitOK},
		{[]int{0, 0}, ExitOK},
		{[]int{0, 4, 0}, ExitFailed},
		{[]int{6, 4}, ExitRemote},
		{[]int{4, 6}, ExitFailed},
		{[]int{4, 130, 5}, ExitCancelled},
		{[]int{130, 3, 4}, ExitUncertain},
	} {
		if got := WorstExit(tc.codes...); got != tc.want {
			t.Errorf("WorstExit(%v) = %d, want %d", tc.codes, got, tc.want)
		}
	}
}
