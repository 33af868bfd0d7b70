package report

import (
	"github.com/agentctl/agentctl/events"
)

// chainBatch is how many events go to the checker at a time.
const chainBatch = 512

// chainCheck runs events.Verifier over the run's events in its own
// goroutine, fed in batches by the reader, so that hashing overlaps the
// read of the log instead of adding to it.
type chainCheck struct {
	batch []events.Event
	in    chan []events.Event
	free  chan []events.Event // batches checked, for reuse
	done  chan struct{}
	v     events.Verifier
	err   error
}

func newChainCheck(runID string) *chainCheck {
	c := &chainCheck{in: make(chan []events.Event, 4), free: make(chan []events.Event, 6), done: make(chan struct{}), v: events.Verifier{RunID: runID}}
	go func() {
		defer close(c.done)
		for b := range c.in {
			for _, e := range b {
				if c.err == nil {
					c.err = c.v.Next(e)
				}
			}
			clear(b) // drop the payloads it holds
			select {
			case c.free <- b[:0]:
			default:
			}
		}
	}()
	return c
}

// add queues e for checking.
func (c *chainCheck) add(e events.Event) {
	c.batch = append(c.batch, e)
	if len(c.batch) == chainBatch {
		c.in <- c.batch
		select {
		case c.batch = <-c.free:
		default:
			c.batch = make([]events.Event, 0, chainBatch)
		}
	}
}

// result waits for the check of every event added and returns how many
// verified, the chain versions met (events.Verifier.Chain) and the first
// break (nil when the chain holds). Call it once.
func (c *chainCheck) result() (int64, string, error) {
	if len(c.batch) > 0 {
		c.in <- c.batch
	}
	close(c.in)
	<-c.done
	return c.v.Count(), c.v.Chain(), c.err
}
