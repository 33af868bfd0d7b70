package fsm

import (
	"errors"
	"strings"
	"testing"
)

// TestFire_TaskClasses runs every idempotency class through every outcome of
// an MCP task once its CreateTaskResult is on disk: a failed or interrupted
// poll polls the same task again whatever the class, and only a lost task
// follows the redispatch rule.
func TestFire_TaskClasses(t *testing.T) {
	type outcome struct {
		to     State
		dec    Decision
		reason string
	}
	for _, idem := range idempotencies {
		lost := outcome{Uncertain, DecideNone, "task_lost: boom"}
		if idem.Redispatchable() {
			lost = outcome{Reconnecting, DecideReconnect, "task_lost: boom"}
		}
		running := map[Trigger]outcome{
			FailAmbiguous:        {Polling, DecidePoll, "repoll: boom"},
			Succeed:              {Succeeded, DecideNone, "boom"},
			FailDefinitive:       {Failed, DecideNone, "boom"},
			FailPossiblyExecuted: {Uncertain, DecideNone, "possibly_executed: boom"},
			TaskCancelled:        {Failed, DecideNone, "task_cancelled_by_server: boom"},
			TaskInputRequired:    {InputRequired, DecideCancelTask, "boom"},
			TaskLost:             lost,
			Cancel:               {Cancelling, DecideCancelTask, "boom"},
		}
		for _, from := range []State{Accepted, Polling} {
			for trig, want := range running {
				t.Run(string(idem)+"/"+string(from)+"/"+string(trig), func(t *testing.T) {
					c := mustFire(t, New(idem), Dispatch, TaskAccepted)
					if from == Polling {
						c = mustFire(t, c, TaskWorking)
					}
					got, tr, dec, err := Fire(c, trig, "boom")
					if err != nil {
						t.Fatal(err)
					}
					if got.State != want.to || dec != want.dec || tr.Reason != want.reason {
						t.Errorf("got %s, %s, %q; want %s, %s, %q", got.State, dec, tr.Reason, want.to, want.dec, want.reason)
					}
					if got.Redispatches != 0 {
						t.Errorf("Redispatches = %d; want 0 (polling is not a resend)", got.Redispatches)
					}
				})
			}
		}
		// input_required ends uncertain whatever tasks/cancel answers.
		for _, trig := range []Trigger{TaskCancelled, FailAmbiguous, FailPossiblyExecuted, TaskLost, Cancel} {
			c := mustFire(t, New(idem), Dispatch, TaskAccepted, TaskWorking, TaskInputRequired)
			got, tr, dec, err := Fire(c, trig, "boom")
			if err != nil || got.State != Uncertain || dec != DecideNone || tr.Reason != "input_required: boom" {
				t.Errorf("%s: input_required -%s-> %+v, %v, %s, %v; want uncertain (input_required: boom)", idem, trig, got, tr, dec, err)
			}
		}
		// A user cancel is cancelled only when the server confirms it; a
		// task that finished first keeps its outcome.
		for trig, want := range map[Trigger]outcome{
			TaskCancelled:        {Cancelled, DecideNone, "task_cancelled: boom"},
			Succeed:              {Succeeded, DecideNone, "boom"},
			FailDefinitive:       {Failed, DecideNone, "boom"},
			FailAmbiguous:        {Uncertain, DecideNone, "cancelled_after_send: boom"},
			FailPossiblyExecuted: {Uncertain, DecideNone, "cancelled_after_send: boom"},
			TaskLost:             {Uncertain, DecideNone, "task_lost: boom"},
		} {
			c := mustFire(t, New(idem), Dispatch, TaskAccepted, Cancel)
			got, tr, dec, err := Fire(c, trig, "boom")
			if err != nil || got.State != want.to || dec != want.dec || tr.Reason != want.reason {
				t.Errorf("%s: cancelling -%s-> %+v, %v, %s, %v; want %s (%s)", idem, trig, got, tr, dec, err, want.to, want.reason)
			}
		}
		// -32042 on the tools/call: a person must act; nothing is resent.
		c := mustFire(t, New(idem), Dispatch)
		got, tr, dec, err := Fire(c, URLElicitationRequired, "host auth.example.com")
		if err != nil || got.State != Uncertain || dec != DecideNone || tr.Reason != "url_elicitation_required: host auth.example.com" {
			t.Errorf("%s: url elicitation: %+v, %v, %s, %v; want uncertain (url_elicitation_required: …)", idem, got, tr, dec, err)
		}
	}
}

// TestFire_TaskAfterRedispatch: a keyed call whose first tools/call was lost
// before any CreateTaskResult is redispatched once; the second task, once
// accepted, polls like the first would have, but losing it is final.
func TestFire_TaskAfterRedispatch(t *testing.T) {
	c := mustFire(t, New(Keyed), Dispatch, FailAmbiguous, Reconnected, TaskAccepted)
	if c.State != Accepted || c.Redispatches != 1 {
		t.Fatalf("setup: %+v; want accepted after one redispatch", c)
	}
	polled := mustFire(t, c, FailAmbiguous)
	if polled.State != Polling || polled.Redispatches != 1 {
		t.Errorf("repoll after redispatch: %+v; want polling, budget unchanged", polled)
	}
	got, tr, dec, err := Fire(polled, TaskLost, "tasks/get: task not found")
	if err != nil || got.State != Uncertain || dec != DecideNone || tr.Reason != "task_lost: tasks/get: task not found" {
		t.Errorf("task lost after redispatch: %+v, %v, %s, %v; want uncertain (task_lost)", got, tr, dec, err)
	}
}

// TestFire_TaskLostForged: even a forged accepted value of a class that may
// not be resent never reaches reconnecting, and Rebuild rejects such a log.
func TestFire_TaskLostForged(t *testing.T) {
	for _, idem := range []Idempotency{AtMostOnce, Unknown} {
		got, _, _, err := Fire(Call{State: Polling, Idempotency: idem}, TaskLost, "")
		if err != nil || got.State != Uncertain {
			t.Errorf("%s: task_lost → %+v, %v; want uncertain", idem, got, err)
		}
		_, err = Rebuild(idem, []Transition{
			{From: Prepared, To: Dispatched, Trigger: Dispatch},
			{From: Dispatched, To: Accepted, Trigger: TaskAccepted},
			{From: Accepted, To: Reconnecting, Trigger: TaskLost},
		})
		if !errors.Is(err, ErrIllegalTransition) || !strings.Contains(err.Error(), "uncertain") {
			t.Errorf("%s: Rebuild of a forged task_lost redispatch: %v; want illegal (machine gives uncertain)", idem, err)
		}
	}
}

// TestRebuild_TaskCrash is the crash story of issue 16: an at_most_once
// task call dies while polling; the log alone says to poll the same task.
func TestRebuild_TaskCrash(t *testing.T) {
	var log []Transition
	c := New(AtMostOnce)
	for _, trig := range []Trigger{Dispatch, TaskAccepted, TaskWorking} {
		var tr Transition
		var err error
		if c, tr, _, err = Fire(c, trig, ""); err != nil {
			t.Fatal(err)
		}
		log = append(log, tr)
	}
	// The process is killed here. Resume rebuilds the call from the log.
	got, err := Rebuild(AtMostOnce, log)
	if err != nil || got != c || got.State != Polling {
		t.Fatalf("Rebuild = %+v, %v; want %+v in polling", got, err, c)
	}
	next, tr, dec, err := Fire(got, FailAmbiguous, "interrupted")
	if err != nil || next.State != Polling || dec != DecidePoll || tr.Reason != "repoll: interrupted" {
		t.Fatalf("resume: %+v, %v, %s, %v; want polling, poll, repoll", next, tr, dec, err)
	}
	if done, _, _, err := Fire(next, Succeed, ""); err != nil || done.State != Succeeded {
		t.Errorf("completed task after resume: %+v, %v; want succeeded", done, err)
	}
}
