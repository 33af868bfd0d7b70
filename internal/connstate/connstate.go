// Package connstate counts a test server's connections through net/http's
// ConnState hook, so that a test can wait, without sleeping, until a
// client has closed every connection it made.
package connstate

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Counter counts the connections of the http.Server whose ConnState is
// its Hook. The zero Counter is ready to use.
type Counter struct {
	mu       sync.Mutex
	accepted int
	open     int
	none     chan struct{} // signalled each time open drops to 0
}

// Hook is the http.Server ConnState function that counts.
func (c *Counter) Hook(_ net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case http.StateNew:
		c.accepted++
		c.open++
	case http.StateClosed, http.StateHijacked:
		if c.open--; c.open == 0 {
			select {
			case c.noneLocked() <- struct{}{}:
			default:
			}
		}
	}
}

func (c *Counter) noneLocked() chan struct{} {
	if c.none == nil {
		c.none = make(chan struct{}, 1)
	}
	return c.none
}

// Counts returns how many connections the server accepted and how many of
// them are still open.
func (c *Counter) Counts() (accepted, open int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted, c.open
}

// WaitClosed fails tb unless every connection the server accepted is
// closed within d (what, e.g. "the AS", names the server in the failure);
// it returns how many the server accepted.
func (c *Counter) WaitClosed(tb testing.TB, what string, d time.Duration) int {
	tb.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		accepted, open, none := c.accepted, c.open, c.noneLocked()
		c.mu.Unlock()
		if open == 0 {
			return accepted
		}
		select {
		case <-none: // open reached 0 at some point since: look again
		case <-deadline.C:
			accepted, open = c.Counts()
			tb.Fatalf("%d of the %d connections to %s still open after %v", open, accepted, what, d)
			return accepted
		}
	}
}
