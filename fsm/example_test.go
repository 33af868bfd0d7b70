package fsm_test

import (
	"fmt"

	"github.com/agentctl/agentctl/fsm"
)

// An idempotent call times out, is redispatched once on a new session whose
// schema is unchanged, and times out again: the second failure is final.
func Example() {
	c := fsm.New(fsm.Idempotent)
	for _, step := range []struct {
		t      fsm.Trigger
		reason string
	}{
		{fsm.Dispatch, ""},
		{fsm.FailAmbiguous, "timeout"},
		{fsm.Reconnected, "generation 2"},
		{fsm.FailAmbiguous, "timeout"},
	} {
		next, tr, d, err := fsm.Fire(c, step.t, step.reason)
		if err != nil {
			fmt.Println(err)
			return
		}
		// Persist tr here, then act on d.
		fmt.Printf("%v => %s\n", tr, d)
		c = next
	}
	fmt.Println(c.State, c.State.Terminal(), c.Redispatches)
	// Output:
	// prepared -dispatch-> dispatched => send
	// dispatched -fail_ambiguous-> reconnecting (timeout) => reconnect
	// reconnecting -reconnected-> redispatched (generation 2) => resend
	// redispatched -fail_ambiguous-> uncertain (second_failure: timeout) => none
	// uncertain true 1
}

// An at_most_once call is never resent: an ambiguous failure is uncertain.
func ExampleFire_atMostOnce() {
	c := fsm.New(fsm.AtMostOnce)
	c, _, _, _ = fsm.Fire(c, fsm.Dispatch, "")
	_, tr, d, _ := fsm.Fire(c, fsm.FailAmbiguous, "session expired (404)")
	fmt.Printf("%v => %s\n", tr, d)
	// Output:
	// dispatched -fail_ambiguous-> uncertain (not_redispatchable:at_most_once: session expired (404)) => none
}

// An at_most_once call runs as an MCP task. The process is killed while it
// polls; after the restart the log says to poll the same task, never to send
// the call again, and the task completes.
func ExampleRebuild_task() {
	c := fsm.New(fsm.AtMostOnce)
	var log []fsm.Transition
	for _, t := range []fsm.Trigger{fsm.Dispatch, fsm.TaskAccepted, fsm.TaskWorking} {
		var tr fsm.Transition
		c, tr, _, _ = fsm.Fire(c, t, "")
		log = append(log, tr) // persisted as call.transition
	}
	// kill -9, then resume:
	c, _ = fsm.Rebuild(fsm.AtMostOnce, log)
	for _, step := range []struct {
		t      fsm.Trigger
		reason string
	}{
		{fsm.FailAmbiguous, "interrupted"},
		{fsm.Succeed, "tasks/result validated"},
	} {
		next, tr, d, _ := fsm.Fire(c, step.t, step.reason)
		fmt.Printf("%v => %s\n", tr, d)
		c = next
	}
	// Output:
	// polling -fail_ambiguous-> polling (repoll: interrupted) => poll
	// polling -succeed-> succeeded (tasks/result validated) => none
}
