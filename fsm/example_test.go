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
