package mcptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// Fault is one injected misbehaviour. The match fields select requests
// (zero values match anything); the first matching, still armed fault
// applies, and its action fields say what the server does instead of (or
// on top of) answering normally.
type Fault struct {
	// Match.
	HTTPMethod string // "POST", "GET", "DELETE"; "" = any
	RPCMethod  string // JSON-RPC method, e.g. "tools/call"; "" = any (a client's response POST has no method: only "" matches it)
	Tool       string // tools/call tool name; "" = any
	Session    string // MCP-Session-Id; "" = any
	Nth        int    // fire on the Nth matching request (1-based); 0 = from the first
	Times      int    // fire at most this many times; 0 = once when Nth > 0, else always

	// Actions.
	Status   int    // answer with this HTTP status and a short text body, or Body when set (e.g. 401, 503, 307)
	Location string // Location header for a 3xx Status

	Body        []byte // send these raw bytes instead of the response message (e.g. malformed JSON)
	WrongID     bool   // the response carries another id
	DuplicateID bool   // the response object carries the "id" member twice

	SplitBytes bool            // SSE/JSON: write and flush one byte at a time
	Gate       <-chan struct{} // SSE: before every event but the first, wait for a receive (slow frames)

	// CloseAfterPriming, on a POST (SSE): execute the call, send only the
	// priming event (with Retry), close; resume with GET + Last-Event-ID
	// delivers the rest. On a GET: send only a priming event repeating the
	// Last-Event-ID (with Retry) and close, so the stream breaks again.
	CloseAfterPriming bool
	Retry             int // retry field of the priming event, milliseconds
	// AfterPriming, on a POST (SSE): send the priming event (with Retry),
	// then these raw bytes (e.g. an event with only a retry field), then go
	// on (or close, with CloseAfterPriming).
	AfterPriming []byte

	Flood    int64 // SSE: after the priming event, stream this many bytes of log notifications, lazily
	HugeLine int64 // SSE: after the priming event, stream one data line this long, lazily

	Hang <-chan struct{} // hold the request (after the SSE headers in SSE mode) until closed or the client goes away, then go on
	// HoldAfterResponse, on a POST (SSE): keep the stream open after the
	// response until the client goes away (a server that does not close
	// it, which the spec only advises against).
	HoldAfterResponse bool

	// Optional, when non-empty, says why this fault may legitimately never
	// fire (a race the test tolerates); without it, a server made by
	// [Start] fails the test at cleanup when the fault never fired, so a
	// test cannot pass by missing its own fault.
	Optional string
}

type armedFault struct {
	Fault
	seen, fired int
}

type faults struct {
	mu   sync.Mutex
	list []*armedFault
}

func (fs *faults) add(f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.list = append(fs.list, &armedFault{Fault: f})
}

// unfired returns the faults, not marked Optional, that never fired, with
// how many requests matched their keys.
func (fs *faults) unfired() []armedFault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []armedFault
	for _, f := range fs.list {
		if f.fired == 0 && f.Optional == "" {
			out = append(out, *f)
		}
	}
	return out
}

// String describes the fault's keys and main action, for test failures.
func (f *armedFault) String() string {
	return fmt.Sprintf("{HTTPMethod:%q RPCMethod:%q Tool:%q Session:%q Nth:%d Times:%d Status:%d} (matched %d requests)",
		f.HTTPMethod, f.RPCMethod, f.Tool, f.Session, f.Nth, f.Times, f.Status, f.seen)
}

// match returns the fault for this request, counting it against every
// fault whose keys match.
func (fs *faults) match(httpMethod, rpcMethod, tool, session string) *Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var hit *Fault
	for _, f := range fs.list {
		if (f.HTTPMethod != "" && f.HTTPMethod != httpMethod) ||
			(f.RPCMethod != "" && f.RPCMethod != rpcMethod) ||
			(f.Tool != "" && f.Tool != tool) ||
			(f.Session != "" && f.Session != session) {
			continue
		}
		f.seen++
		if hit != nil || f.seen < f.Nth {
			continue
		}
		limit := f.Times
		if limit == 0 && f.Nth > 0 {
			limit = 1
		}
		if limit > 0 && f.fired >= limit {
			continue
		}
		f.fired++
		c := f.Fault
		hit = &c
	}
	return hit
}

// writeStatus answers with the fault's status.
func writeStatus(w http.ResponseWriter, f *Fault) {
	if f.Location != "" {
		w.Header().Set("Location", f.Location)
	}
	if f.Body != nil { // the fault's body instead of the short text
		ct := "text/plain; charset=utf-8"
		if json.Valid(f.Body) {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(f.Status)
		_, _ = w.Write(f.Body)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(f.Status)
	_, _ = w.Write([]byte("mcptest: injected " + http.StatusText(f.Status) + "\n"))
}
