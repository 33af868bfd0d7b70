package fsm

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestFire_RandomSequences throws seeded random trigger sequences (legal or
// not) at every class and checks the promises that must hold whatever the
// caller does: at most one redispatch, none for at_most_once/unknown, one
// Transition per legal Fire, illegal Fire changes nothing, and Rebuild of the
// transitions gives back the final Call. Once a task is accepted, nothing is
// sent again unless the task was lost and the class allows a redispatch.
func TestFire_RandomSequences(t *testing.T) {
	const seed = 20250601
	rng := rand.New(rand.NewPCG(seed, seed))
	inputs := append(append([]Trigger{}, triggers...), "bogus")
	runs := 5000
	if testing.Short() {
		runs = 500
	}
	reached := map[State]int{}
	for run := 0; run < runs; run++ {
		idem := idempotencies[rng.IntN(len(idempotencies))]
		c := New(idem)
		var (
			log                        []Transition
			sends, reconnects, resends int
			seq                        []Trigger
			accepted, lostTask         bool
			inputResends               int
			byInput                    bool // in redispatched by input_answered
		)
		// Bias towards the triggers that move a live call forward, so long
		// paths (dispatch, fail, reconnect, fail again) are common.
		for step := 0; step < 12; step++ {
			var trig Trigger
			if n := rng.IntN(3); n == 0 {
				trig = []Trigger{Dispatch, FailAmbiguous, Reconnected}[rng.IntN(3)]
			} else if n == 1 {
				trig = []Trigger{TaskAccepted, TaskWorking, TaskLost, FailAmbiguous, Cancel, TaskInputRequired, InputRequested, InputAnswered}[rng.IntN(8)]
			} else {
				trig = inputs[rng.IntN(len(inputs))]
			}
			seq = append(seq, trig)
			next, tr, dec, err := Fire(c, trig, "")
			if err != nil {
				if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("seed %d run %d %v: unexpected error %v", seed, run, seq, err)
				}
				if next != c || tr != (Transition{}) || dec != DecideNone {
					t.Fatalf("seed %d run %d %v: illegal Fire changed something: %+v %v %s", seed, run, seq, next, tr, dec)
				}
				continue
			}
			if tr.From != c.State || tr.To != next.State || tr.Trigger != trig {
				t.Fatalf("seed %d run %d %v: transition %v does not match %s → %s", seed, run, seq, tr, c.State, next.State)
			}
			if c.State.Terminal() && c.State != Uncertain {
				t.Fatalf("seed %d run %d %v: left terminal state %s", seed, run, seq, c.State)
			}
			if tr.From == Accepted || tr.From == Polling {
				if trig == FailAmbiguous && (next.State != Polling || dec != DecidePoll) {
					t.Fatalf("seed %d run %d %v: a failed poll went to %s (%s), not back to polling", seed, run, seq, next.State, dec)
				}
				if trig == TaskLost {
					lostTask = true
				}
			}
			if next.State == Accepted {
				accepted = true
			}
			switch dec {
			case DecideSend:
				if accepted {
					t.Fatalf("seed %d run %d %v: send after the task was accepted", seed, run, seq)
				}
				sends++
			case DecideReconnect:
				reconnects++
			case DecideResend:
				if trig == InputAnswered { // an answer re-issues: never budgeted
					inputResends++
					byInput = true
					if tr.From != InputRequired || !c.ByInputResult {
						t.Fatalf("seed %d run %d %v: input resend from %s without an input-required result", seed, run, seq, tr.From)
					}
					break
				}
				byInput = false
				resends++
				if reconnects != resends {
					t.Fatalf("seed %d run %d %v: resend without a reconnect first", seed, run, seq)
				}
				if accepted && !lostTask {
					t.Fatalf("seed %d run %d %v: resend of an accepted task that was not lost", seed, run, seq)
				}
			}
			log = append(log, tr)
			c = next
			reached[c.State]++

			if c.Redispatches > RedispatchBudget || resends > RedispatchBudget || reconnects > RedispatchBudget {
				t.Fatalf("seed %d run %d %v: %d redispatches, %d reconnects, %d resends", seed, run, seq, c.Redispatches, reconnects, resends)
			}
			if c.Redispatches != resends {
				t.Fatalf("seed %d run %d %v: Redispatches=%d but %d resend decisions", seed, run, seq, c.Redispatches, resends)
			}
			if sends > 1 {
				t.Fatalf("seed %d run %d %v: sent %d times", seed, run, seq, sends)
			}
			if c.InputRounds > MaxInputRounds || inputResends > c.InputRounds || (c.State == InputRequired && c.ByInputResult && dec != DecideAnswerInput && tr.To == InputRequired) {
				t.Fatalf("seed %d run %d %v: %d input rounds, %d input resends", seed, run, seq, c.InputRounds, inputResends)
			}
			if !idem.Redispatchable() && (reconnects > 0 || c.State == Reconnecting || (c.State == Redispatched && !byInput)) {
				t.Fatalf("seed %d run %d %v: %s call reached %s", seed, run, seq, idem, c.State)
			}
		}
		got, err := Rebuild(idem, log)
		if err != nil || got != c {
			t.Fatalf("seed %d run %d %v: Rebuild = %+v, %v; want %+v", seed, run, seq, got, err, c)
		}
	}
	// The generator must actually exercise the whole machine.
	for _, s := range states {
		if s != Prepared && reached[s] == 0 {
			t.Errorf("no random sequence reached %s: %v", s, reached)
		}
	}
}

// BenchmarkFire shows what building the machine per call costs.
func BenchmarkFire(b *testing.B) {
	c := mustFire(b, New(Idempotent), Dispatch)
	for b.Loop() {
		if _, _, _, err := Fire(c, FailAmbiguous, "timeout"); err != nil {
			b.Fatal(err)
		}
	}
}
