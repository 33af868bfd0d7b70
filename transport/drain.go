package transport

import (
	"errors"
	"io"
	"time"
)

// A POST's SSE stream ends right after the response (the server SHOULD
// close it then, MCP Streamable HTTP). net/http reuses a connection only
// once its response body has been read to the end; a body closed before
// that closes the connection. The response event and the stream's end
// often arrive in two reads, so closing the body as soon as the response
// was parsed cost about a third of all calls a new TCP connection (60 of
// 200 sequential calls to the go-sdk server), with its handshake and the
// server's per-connection setup. The exchange therefore reads the stream
// to its end before closing it, briefly: a server that keeps the stream
// open past drainWait has its stream closed as before, and from then on
// the client closes every stream at once (Client.noDrain), so such a
// server costs one wait per client, not one per call.

const (
	// drainWait bounds the wait for a stream's end after its response.
	drainWait = 20 * time.Millisecond
	// drainMax bounds what is read and dropped after the response.
	drainMax = 64 << 10
)

// errDrained ends a request whose stream stayed open after its response.
var errDrained = errors.New("response stream still open after the response")

// drain reads what is left of a response stream whose response has been
// delivered, so that its connection can be reused; what follows the
// response is not a frame of this exchange and is not recorded.
func (x *exchange) drain(body io.Reader) {
	if x.s.c.noDrain.Load() || x.cancel == nil {
		return
	}
	t := time.AfterFunc(drainWait, func() {
		x.s.c.noDrain.Store(true)
		x.cancel(errDrained)
	})
	n, err := io.Copy(io.Discard, io.LimitReader(body, drainMax))
	if !t.Stop() || err != nil || n == drainMax {
		x.s.c.noDrain.Store(true)
	}
}
