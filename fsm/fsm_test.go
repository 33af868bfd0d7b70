package fsm

import (
	"errors"
	"strings"
	"testing"
)

// TestFire_EveryStateTrigger is the whole machine as a table: every state ×
// every trigger, for a redispatchable call with its budget as it would be in
// that state. Class-dependent edges are covered by TestFire_Classes.
func TestFire_EveryStateTrigger(t *testing.T) {
	const ill = "illegal"
	type row struct {
		from State
		trig Trigger
		to   State // "" when illegal
		dec  Decision
	}
	rows := []row{
		{Prepared, Dispatch, Dispatched, DecideSend},
		{Prepared, Succeed, "", ""},
		{Prepared, FailDefinitive, Failed, DecideNone},
		{Prepared, FailAmbiguous, "", ""},
		{Prepared, FailPossiblyExecuted, "", ""},
		{Prepared, Reconnected, "", ""},
		{Prepared, SchemaChanged, "", ""},
		{Prepared, ToolMissing, "", ""},
		{Prepared, ReconnectFailed, "", ""},
		{Prepared, Cancel, Cancelled, DecideNone},
		{Prepared, ReconcileApplied, "", ""},
		{Prepared, ReconcileNotApplied, "", ""},
		{Prepared, TaskAccepted, "", ""},
		{Prepared, TaskWorking, "", ""},
		{Prepared, TaskInputRequired, "", ""},
		{Prepared, TaskCancelled, "", ""},
		{Prepared, TaskLost, "", ""},
		{Prepared, URLElicitationRequired, "", ""},
		{Prepared, InputRequested, "", ""},
		{Prepared, InputAnswered, "", ""},

		{Dispatched, Dispatch, "", ""},
		{Dispatched, Succeed, Succeeded, DecideNone},
		{Dispatched, FailDefinitive, Failed, DecideNone},
		{Dispatched, FailAmbiguous, Reconnecting, DecideReconnect},
		{Dispatched, FailPossiblyExecuted, Uncertain, DecideNone},
		{Dispatched, Reconnected, "", ""},
		{Dispatched, SchemaChanged, "", ""},
		{Dispatched, ToolMissing, "", ""},
		{Dispatched, ReconnectFailed, "", ""},
		{Dispatched, Cancel, Uncertain, DecideNone},
		{Dispatched, ReconcileApplied, "", ""},
		{Dispatched, ReconcileNotApplied, "", ""},
		{Dispatched, TaskAccepted, Accepted, DecidePoll},
		{Dispatched, TaskWorking, "", ""},
		{Dispatched, TaskInputRequired, "", ""},
		{Dispatched, TaskCancelled, "", ""},
		{Dispatched, TaskLost, "", ""},
		{Dispatched, URLElicitationRequired, Uncertain, DecideNone},
		{Dispatched, InputRequested, InputRequired, DecideAnswerInput},
		{Dispatched, InputAnswered, "", ""},

		{Reconnecting, Dispatch, "", ""},
		{Reconnecting, Succeed, "", ""},
		{Reconnecting, FailDefinitive, Failed, DecideNone},
		{Reconnecting, FailAmbiguous, "", ""},
		{Reconnecting, FailPossiblyExecuted, "", ""},
		{Reconnecting, Reconnected, Redispatched, DecideResend},
		{Reconnecting, SchemaChanged, Failed, DecideNone},
		{Reconnecting, ToolMissing, Failed, DecideNone},
		{Reconnecting, ReconnectFailed, Uncertain, DecideNone},
		{Reconnecting, Cancel, Uncertain, DecideNone},
		{Reconnecting, ReconcileApplied, "", ""},
		{Reconnecting, ReconcileNotApplied, "", ""},
		{Reconnecting, TaskAccepted, "", ""},
		{Reconnecting, TaskWorking, "", ""},
		{Reconnecting, TaskInputRequired, "", ""},
		{Reconnecting, TaskCancelled, "", ""},
		{Reconnecting, TaskLost, "", ""},
		{Reconnecting, URLElicitationRequired, "", ""},
		{Reconnecting, InputRequested, "", ""},
		{Reconnecting, InputAnswered, "", ""},

		{Redispatched, Dispatch, "", ""},
		{Redispatched, Succeed, Succeeded, DecideNone},
		{Redispatched, FailDefinitive, Failed, DecideNone},
		{Redispatched, FailAmbiguous, Uncertain, DecideNone},
		{Redispatched, FailPossiblyExecuted, Uncertain, DecideNone},
		{Redispatched, Reconnected, "", ""},
		{Redispatched, SchemaChanged, "", ""},
		{Redispatched, ToolMissing, "", ""},
		{Redispatched, ReconnectFailed, "", ""},
		{Redispatched, Cancel, Uncertain, DecideNone},
		{Redispatched, ReconcileApplied, "", ""},
		{Redispatched, ReconcileNotApplied, "", ""},
		{Redispatched, TaskAccepted, Accepted, DecidePoll},
		{Redispatched, TaskWorking, "", ""},
		{Redispatched, TaskInputRequired, "", ""},
		{Redispatched, TaskCancelled, "", ""},
		{Redispatched, TaskLost, "", ""},
		{Redispatched, URLElicitationRequired, Uncertain, DecideNone},
		{Redispatched, InputRequested, InputRequired, DecideAnswerInput},
		{Redispatched, InputAnswered, "", ""},

		{Uncertain, Dispatch, "", ""},
		{Uncertain, Succeed, "", ""},
		{Uncertain, FailDefinitive, "", ""},
		{Uncertain, FailAmbiguous, "", ""},
		{Uncertain, FailPossiblyExecuted, "", ""},
		{Uncertain, Reconnected, "", ""},
		{Uncertain, SchemaChanged, "", ""},
		{Uncertain, ToolMissing, "", ""},
		{Uncertain, ReconnectFailed, "", ""},
		{Uncertain, Cancel, "", ""},
		{Uncertain, ReconcileApplied, Succeeded, DecideNone},
		{Uncertain, ReconcileNotApplied, Failed, DecideNone},
		{Uncertain, TaskAccepted, "", ""},
		{Uncertain, TaskWorking, "", ""},
		{Uncertain, TaskInputRequired, "", ""},
		{Uncertain, TaskCancelled, "", ""},
		{Uncertain, TaskLost, "", ""},
		{Uncertain, URLElicitationRequired, "", ""},
		{Uncertain, InputRequested, "", ""},
		{Uncertain, InputAnswered, "", ""},

		// MCP tasks: the CreateTaskResult is on disk.
		{Accepted, Dispatch, "", ""},
		{Accepted, Succeed, Succeeded, DecideNone},
		{Accepted, FailDefinitive, Failed, DecideNone},
		{Accepted, FailAmbiguous, Polling, DecidePoll},
		{Accepted, FailPossiblyExecuted, Uncertain, DecideNone},
		{Accepted, Reconnected, "", ""},
		{Accepted, SchemaChanged, "", ""},
		{Accepted, ToolMissing, "", ""},
		{Accepted, ReconnectFailed, "", ""},
		{Accepted, Cancel, Cancelling, DecideCancelTask},
		{Accepted, ReconcileApplied, "", ""},
		{Accepted, ReconcileNotApplied, "", ""},
		{Accepted, TaskAccepted, "", ""},
		{Accepted, TaskWorking, Polling, DecidePoll},
		{Accepted, TaskInputRequired, InputRequired, DecideCancelTask},
		{Accepted, TaskCancelled, Failed, DecideNone},
		{Accepted, TaskLost, Reconnecting, DecideReconnect},
		{Accepted, URLElicitationRequired, "", ""},
		{Accepted, InputRequested, "", ""},
		{Accepted, InputAnswered, "", ""},

		{Polling, Dispatch, "", ""},
		{Polling, Succeed, Succeeded, DecideNone},
		{Polling, FailDefinitive, Failed, DecideNone},
		{Polling, FailAmbiguous, Polling, DecidePoll},
		{Polling, FailPossiblyExecuted, Uncertain, DecideNone},
		{Polling, Reconnected, "", ""},
		{Polling, SchemaChanged, "", ""},
		{Polling, ToolMissing, "", ""},
		{Polling, ReconnectFailed, "", ""},
		{Polling, Cancel, Cancelling, DecideCancelTask},
		{Polling, ReconcileApplied, "", ""},
		{Polling, ReconcileNotApplied, "", ""},
		{Polling, TaskAccepted, "", ""},
		{Polling, TaskWorking, "", ""}, // identical statuses are folded by the caller
		{Polling, TaskInputRequired, InputRequired, DecideCancelTask},
		{Polling, TaskCancelled, Failed, DecideNone},
		{Polling, TaskLost, Reconnecting, DecideReconnect},
		{Polling, URLElicitationRequired, "", ""},
		{Polling, InputRequested, "", ""},
		{Polling, InputAnswered, "", ""},

		{InputRequired, Dispatch, "", ""},
		{InputRequired, Succeed, "", ""},
		{InputRequired, FailDefinitive, "", ""},
		{InputRequired, FailAmbiguous, Uncertain, DecideNone},
		{InputRequired, FailPossiblyExecuted, Uncertain, DecideNone},
		{InputRequired, Reconnected, "", ""},
		{InputRequired, SchemaChanged, "", ""},
		{InputRequired, ToolMissing, "", ""},
		{InputRequired, ReconnectFailed, "", ""},
		{InputRequired, Cancel, Uncertain, DecideNone},
		{InputRequired, ReconcileApplied, "", ""},
		{InputRequired, ReconcileNotApplied, "", ""},
		{InputRequired, TaskAccepted, "", ""},
		{InputRequired, TaskWorking, "", ""},
		{InputRequired, TaskInputRequired, "", ""},
		{InputRequired, TaskCancelled, Uncertain, DecideNone},
		{InputRequired, TaskLost, Uncertain, DecideNone},
		{InputRequired, URLElicitationRequired, "", ""},
		{InputRequired, InputRequested, "", ""},
		{InputRequired, InputAnswered, Polling, DecidePoll}, // 2026-07-28: tasks/update answered it

		{Cancelling, Dispatch, "", ""},
		{Cancelling, Succeed, Succeeded, DecideNone},
		{Cancelling, FailDefinitive, Failed, DecideNone},
		{Cancelling, FailAmbiguous, Uncertain, DecideNone},
		{Cancelling, FailPossiblyExecuted, Uncertain, DecideNone},
		{Cancelling, Reconnected, "", ""},
		{Cancelling, SchemaChanged, "", ""},
		{Cancelling, ToolMissing, "", ""},
		{Cancelling, ReconnectFailed, "", ""},
		{Cancelling, Cancel, "", ""},
		{Cancelling, ReconcileApplied, "", ""},
		{Cancelling, ReconcileNotApplied, "", ""},
		{Cancelling, TaskAccepted, "", ""},
		{Cancelling, TaskWorking, "", ""},
		{Cancelling, TaskInputRequired, "", ""},
		{Cancelling, TaskCancelled, Cancelled, DecideNone},
		{Cancelling, TaskLost, Uncertain, DecideNone},
		{Cancelling, URLElicitationRequired, "", ""},
		{Cancelling, InputRequested, "", ""},
		{Cancelling, InputAnswered, "", ""},
	}
	// Succeeded, failed and cancelled accept nothing at all.
	for _, s := range []State{Succeeded, Failed, Cancelled} {
		for _, tr := range triggers {
			rows = append(rows, row{s, tr, "", ""})
		}
	}

	seen := map[[2]string]bool{}
	for _, r := range rows {
		key := [2]string{string(r.from), string(r.trig)}
		if seen[key] {
			t.Fatalf("table lists %s × %s twice", r.from, r.trig)
		}
		seen[key] = true
	}
	for _, s := range states {
		for _, tr := range triggers {
			if !seen[[2]string{string(s), string(tr)}] {
				t.Errorf("table misses %s × %s", s, tr)
			}
		}
	}

	for _, r := range rows {
		name := string(r.from) + "/" + string(r.trig)
		t.Run(name, func(t *testing.T) {
			in := Call{State: r.from, Idempotency: Idempotent}
			if r.from == Redispatched {
				in.Redispatches = 1
			}
			got, tr, dec, err := Fire(in, r.trig, "detail")
			if r.to == "" {
				if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("Fire = %v, %v, %v, %v; want %s", got, tr, dec, err, ill)
				}
				for _, want := range []string{string(r.from), string(r.trig)} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
				if got != in || tr != (Transition{}) || dec != DecideNone {
					t.Errorf("illegal Fire returned %+v, %+v, %q; want input unchanged, zero transition, none", got, tr, dec)
				}
				return
			}
			if err != nil {
				t.Fatalf("Fire: %v", err)
			}
			if got.State != r.to || dec != r.dec {
				t.Errorf("Fire → %s, %s; want %s, %s", got.State, dec, r.to, r.dec)
			}
			if tr.From != r.from || tr.To != r.to || tr.Trigger != r.trig {
				t.Errorf("transition %v; want %s -%s-> %s", tr, r.from, r.trig, r.to)
			}
			if !strings.HasSuffix(tr.Reason, "detail") {
				t.Errorf("reason %q lost the caller's detail", tr.Reason)
			}
		})
	}
}

// TestFire_Classes runs each idempotency class through each kind of failure,
// first from dispatched and then, where it can get there, from redispatched.
func TestFire_Classes(t *testing.T) {
	type outcome struct {
		to     State
		dec    Decision
		reason string
	}
	failures := []Trigger{FailDefinitive, FailAmbiguous, FailPossiblyExecuted, Cancel}
	for _, idem := range idempotencies {
		redo := idem.Redispatchable()
		first := map[Trigger]outcome{
			FailDefinitive:       {Failed, DecideNone, "boom"},
			FailPossiblyExecuted: {Uncertain, DecideNone, "possibly_executed: boom"},
			Cancel:               {Uncertain, DecideNone, "cancelled_after_send: boom"},
		}
		if redo {
			first[FailAmbiguous] = outcome{Reconnecting, DecideReconnect, "boom"}
		} else {
			first[FailAmbiguous] = outcome{Uncertain, DecideNone, "not_redispatchable:" + string(idem) + ": boom"}
		}
		second := map[Trigger]outcome{
			FailDefinitive:       {Failed, DecideNone, "boom"},
			FailAmbiguous:        {Uncertain, DecideNone, "second_failure: boom"},
			FailPossiblyExecuted: {Uncertain, DecideNone, "possibly_executed: boom"},
			Cancel:               {Uncertain, DecideNone, "cancelled_after_send: boom"},
		}
		for _, f := range failures {
			t.Run(string(idem)+"/dispatched/"+string(f), func(t *testing.T) {
				c := mustFire(t, New(idem), Dispatch)
				got, tr, dec, err := Fire(c, f, "boom")
				if err != nil {
					t.Fatal(err)
				}
				want := first[f]
				if got.State != want.to || dec != want.dec || tr.Reason != want.reason {
					t.Errorf("got %s, %s, %q; want %s, %s, %q", got.State, dec, tr.Reason, want.to, want.dec, want.reason)
				}
				if got.Redispatches != 0 {
					t.Errorf("Redispatches = %d after first failure; want 0", got.Redispatches)
				}
			})
			if !redo {
				continue
			}
			t.Run(string(idem)+"/redispatched/"+string(f), func(t *testing.T) {
				c := mustFire(t, New(idem), Dispatch, FailAmbiguous, Reconnected)
				if c.State != Redispatched || c.Redispatches != 1 {
					t.Fatalf("setup: %+v; want redispatched with one redispatch", c)
				}
				got, tr, dec, err := Fire(c, f, "boom")
				if err != nil {
					t.Fatal(err)
				}
				want := second[f]
				if got.State != want.to || dec != want.dec || tr.Reason != want.reason {
					t.Errorf("got %s, %s, %q; want %s, %s, %q", got.State, dec, tr.Reason, want.to, want.dec, want.reason)
				}
			})
		}
		t.Run(string(idem)+"/reconnect-outcomes", func(t *testing.T) {
			if !redo {
				// The only way into reconnecting is the guarded edge; a
				// forged value must still never be resent.
				forged := Call{State: Reconnecting, Idempotency: idem}
				_, _, _, err := Fire(forged, Reconnected, "")
				if !errors.Is(err, ErrIllegalTransition) || !strings.Contains(err.Error(), "redispatchAllowed") {
					t.Errorf("Reconnected on forged %s call: err = %v; want illegal naming the guard", idem, err)
				}
				return
			}
			// A changed or missing tool fails the call; no new session leaves
			// the first request's fate open: uncertain. Nothing is resent.
			for _, o := range []struct {
				trig   Trigger
				to     State
				reason string
			}{
				{SchemaChanged, Failed, "schema_changed"},
				{ToolMissing, Failed, "tool_missing"},
				{ReconnectFailed, Uncertain, "reconnect_failed"},
			} {
				c := mustFire(t, New(idem), Dispatch, FailAmbiguous)
				got, tr, dec, err := Fire(c, o.trig, "")
				if err != nil || got.State != o.to || dec != DecideNone || tr.Reason != o.reason || got.Redispatches != 0 {
					t.Errorf("%s: got %+v, %v, %s, %v; want %s (%s), nothing resent", o.trig, got, tr, dec, err, o.to, o.reason)
				}
			}
		})
	}
}

// TestFire_BudgetSpent: a dispatched call that already used its redispatch
// (only reachable by a forged or future value) goes to uncertain.
func TestFire_BudgetSpent(t *testing.T) {
	for _, n := range []int{1, 2, -1} {
		c := Call{State: Dispatched, Idempotency: Pure, Redispatches: n}
		got, tr, dec, err := Fire(c, FailAmbiguous, "")
		if err != nil || got.State != Uncertain || dec != DecideNone || tr.Reason != ReasonBudgetSpent {
			t.Errorf("Redispatches=%d: got %+v, %v, %s, %v; want uncertain (%s)", n, got, tr, dec, err, ReasonBudgetSpent)
		}
	}
}

func TestFire_BadInput(t *testing.T) {
	cases := []struct {
		name    string
		c       Call
		trig    Trigger
		illegal bool
	}{
		{"unknown trigger", New(Pure), "explode", true},
		{"empty trigger", New(Pure), "", true},
		{"unknown state", Call{State: "limbo", Idempotency: Pure}, Dispatch, true},
		{"zero call", Call{}, Dispatch, true},
		{"bad idempotency", Call{State: Dispatched, Idempotency: "sometimes"}, FailAmbiguous, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, tr, dec, err := Fire(tc.c, tc.trig, "")
			if err == nil {
				t.Fatalf("Fire = %+v, %v, %s; want error", got, tr, dec)
			}
			if errors.Is(err, ErrIllegalTransition) != tc.illegal {
				t.Errorf("err = %v; illegal=%v", err, tc.illegal)
			}
			if got != tc.c || dec != DecideNone {
				t.Errorf("Fire changed the call on error: %+v, %s", got, dec)
			}
		})
	}
	// An empty class is the documented default, not an error.
	got, _, _, err := Fire(Call{State: Dispatched}, FailAmbiguous, "")
	if err != nil || got.State != Uncertain || got.Idempotency != Unknown {
		t.Errorf("empty class: %+v, %v; want uncertain, unknown", got, err)
	}
}

func TestJoinReason(t *testing.T) {
	for _, tc := range []struct{ code, detail, want string }{
		{"", "", ""},
		{"", "timeout", "timeout"},
		{"schema_changed", "", "schema_changed"},
		{"schema_changed", "schema_changed", "schema_changed"},
		{"schema_changed", "digest a != b", "schema_changed: digest a != b"},
		{"schema_changed", "schema_changed: digest a != b", "schema_changed: digest a != b"},
	} {
		got := joinReason(tc.code, tc.detail)
		if got != tc.want {
			t.Errorf("joinReason(%q, %q) = %q; want %q", tc.code, tc.detail, got, tc.want)
		}
		if again := joinReason(tc.code, got); again != got {
			t.Errorf("joinReason not idempotent: %q → %q", got, again)
		}
	}
}

func TestParseIdempotency(t *testing.T) {
	for in, want := range map[string]Idempotency{
		"": Unknown, "pure": Pure, "idempotent": Idempotent, "keyed": Keyed,
		"at_most_once": AtMostOnce, "unknown": Unknown,
	} {
		got, err := ParseIdempotency(in)
		if err != nil || got != want {
			t.Errorf("ParseIdempotency(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Pure", "at-most-once", "once", " pure"} {
		_, err := ParseIdempotency(in)
		if err == nil {
			t.Errorf("ParseIdempotency(%q) succeeded; want error", in)
			continue
		}
		msg := err.Error()
		for _, want := range []string{in, "pure", "idempotent", "keyed", "at_most_once", "unknown"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not name %q", msg, want)
			}
		}
	}
}

func TestPredicates(t *testing.T) {
	terminal := map[State]bool{Succeeded: true, Failed: true, Uncertain: true, Cancelled: true}
	if len(states) != 12 || len(triggers) != 20 {
		t.Errorf("%d states, %d triggers: a new one needs rows in TestFire_EveryStateTrigger", len(states), len(triggers))
	}
	for _, s := range states {
		if s.Terminal() != terminal[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
	}
	redo := map[Idempotency]bool{Pure: true, Idempotent: true, Keyed: true}
	for _, i := range append(idempotencies, "", "bogus") {
		if i.Redispatchable() != redo[i] {
			t.Errorf("%q.Redispatchable() = %v", i, i.Redispatchable())
		}
	}
}

func TestRebuild(t *testing.T) {
	// A call that was redispatched, then the process died: the log alone
	// restores the state and the spent budget.
	var log []Transition
	c := New(Keyed)
	for _, trig := range []Trigger{Dispatch, FailAmbiguous, Reconnected} {
		var tr Transition
		var err error
		c, tr, _, err = Fire(c, trig, "r")
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, tr)
	}
	got, err := Rebuild(Keyed, log)
	if err != nil || got != c {
		t.Fatalf("Rebuild = %+v, %v; want %+v", got, err, c)
	}
	if got.Redispatches != 1 {
		t.Fatalf("Redispatches = %d; want 1", got.Redispatches)
	}
	// After the restart, a further ambiguous failure is final.
	if next, _, _, _ := Fire(got, FailAmbiguous, ""); next.State != Uncertain {
		t.Errorf("after rebuild, fail_ambiguous → %s; want uncertain", next.State)
	}

	empty, err := Rebuild("", nil)
	if err != nil || empty != New(Unknown) {
		t.Errorf("Rebuild(empty) = %+v, %v; want New(unknown)", empty, err)
	}

	bad := []struct {
		name    string
		idem    Idempotency
		log     []Transition
		illegal bool
	}{
		{"gap", Pure, []Transition{{From: Dispatched, To: Succeeded, Trigger: Succeed}}, true},
		{"wrong target", Pure, []Transition{{From: Prepared, To: Succeeded, Trigger: Dispatch}}, true},
		{"illegal trigger", Pure, []Transition{{From: Prepared, To: Succeeded, Trigger: Succeed}}, true},
		{"forged redispatch", AtMostOnce, []Transition{
			{From: Prepared, To: Dispatched, Trigger: Dispatch},
			{From: Dispatched, To: Reconnecting, Trigger: FailAmbiguous},
		}, true},
		{"second redispatch", Pure, []Transition{
			{From: Prepared, To: Dispatched, Trigger: Dispatch},
			{From: Dispatched, To: Reconnecting, Trigger: FailAmbiguous},
			{From: Reconnecting, To: Redispatched, Trigger: Reconnected},
			{From: Redispatched, To: Reconnecting, Trigger: FailAmbiguous},
		}, true},
		{"bad class", "twice", nil, false},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rebuild(tc.idem, tc.log)
			if err == nil || errors.Is(err, ErrIllegalTransition) != tc.illegal {
				t.Errorf("Rebuild err = %v; want error (illegal=%v)", err, tc.illegal)
			}
		})
	}
}

// mustFire fires triggers in order with an empty reason and fails on error.
func mustFire(tb testing.TB, c Call, ts ...Trigger) Call {
	tb.Helper()
	for _, trig := range ts {
		var err error
		c, _, _, err = Fire(c, trig, "")
		if err != nil {
			tb.Fatalf("Fire(%s): %v", trig, err)
		}
	}
	return c
}

// TestFire_InputRequiredResult is the 2026-07-28 MRTR path: an
// input-required result puts the call in input_required (the tool has not
// run), answering re-issues it without spending the redispatch budget,
// a cancel or unanswerable input ends it with nothing executed, and the
// rounds are bounded.
func TestFire_InputRequiredResult(t *testing.T) {
	for _, idem := range idempotencies {
		c := mustFire(t, New(idem), Dispatch)
		for round := 1; round <= MaxInputRounds; round++ {
			next, tr, dec, err := Fire(c, InputRequested, "confirm=elicitation/create")
			if err != nil || next.State != InputRequired || dec != DecideAnswerInput || next.InputRounds != round {
				t.Fatalf("%s round %d: Fire(input_requested) = %+v, %v, %s, %v", idem, round, next, tr, dec, err)
			}
			c = next
			next, _, dec, err = Fire(c, InputAnswered, "")
			if err != nil || next.State != Redispatched || dec != DecideResend || next.Redispatches != 0 {
				t.Fatalf("%s round %d: Fire(input_answered) = %+v, %s, %v; want redispatched, budget unspent", idem, round, next, dec, err)
			}
			c = next
		}
		next, tr, _, err := Fire(c, InputRequested, "")
		if err != nil || next.State != Failed || !strings.HasPrefix(tr.Reason, ReasonInputRoundsExceeded) {
			t.Fatalf("%s: round %d: %+v %v %v; want failed (%s)", idem, MaxInputRounds+1, next, tr, err, ReasonInputRoundsExceeded)
		}
		// The first ambiguous failure after an answered round follows the
		// rule of dispatched: the budget is whole.
		next, _, dec, err := Fire(c, FailAmbiguous, "timeout")
		want := Uncertain
		if idem.Redispatchable() {
			want = Reconnecting
		}
		if err != nil || next.State != want {
			t.Errorf("%s: fail_ambiguous after an answered round → %s (%s, %v), want %s", idem, next.State, dec, err, want)
		}
		in := mustFire(t, mustFire(t, New(idem), Dispatch), InputRequested)
		for trig, want := range map[Trigger]State{Cancel: Cancelled, FailDefinitive: Failed} {
			if next, _, _, err := Fire(in, trig, ""); err != nil || next.State != want {
				t.Errorf("%s: %s in an input-required result → %s (%v), want %s", idem, trig, next.State, err, want)
			}
		}
	}
	// An MCP task's input_required keeps its rules: no answer re-issues it;
	// a 2026-07-28 task's answer (tasks/update) goes back to polling it.
	task := mustFire(t, mustFire(t, mustFire(t, New(Idempotent), Dispatch), TaskAccepted), TaskInputRequired)
	if next, tr, _, err := Fire(task, InputAnswered, ""); err != nil || next.State != Polling || tr.Reason != "" {
		t.Errorf("input_answered on a task's input_required: %s %q %v, want polling", next.State, tr.Reason, err)
	}
	if next, _, _, _ := Fire(task, Cancel, ""); next.State != Uncertain {
		t.Errorf("cancel on a task's input_required → %s, want uncertain", next.State)
	}
}
