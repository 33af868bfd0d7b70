package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestHostile_InvalidUTF8: a response (JSON or SSE) carrying bytes that
// are not UTF-8 is malformed, with the offset in the message, and every
// frame handed to the sink is valid UTF-8 JSON (encoding/json would have
// accepted the bytes and rewritten them to U+FFFD in the result).
func TestHostile_InvalidUTF8(t *testing.T) {
	body := []byte("{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\"}]}}")
	for _, mode := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", mode), func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{JSONResponse: mode}, okTool("a"))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Body: body})
			s := connect(t, newClient(t, srv.URL, nil), nil)
			var rec recorder
			_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, rec.sink)
			e := wantKind(t, err, KindMalformed)
			if !strings.Contains(e.Error(), fmt.Sprintf("invalid UTF-8 at byte %d", strings.IndexByte(string(body), 0xff))) {
				t.Errorf("error = %v", e)
			}
			checkFramesUTF8(t, rec.all())
		})
	}
}

// TestHostile_InvalidUTF8ErrorBody: an HTTP error whose body is JSON with
// bytes that are not UTF-8 is recorded as text, valid UTF-8.
func TestHostile_InvalidUTF8ErrorBody(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	s := connect(t, newClient(t, srv.URL, nil), nil)
	var rec recorder
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("{\"error\":{\"message\":\"bad \xfe\xff\"}}"))
	})
	x := &exchange{s: s, sink: rec.sink, ctx: context.Background(), id: json.RawMessage("9"), idle: time.NewTimer(time.Hour)}
	defer x.idle.Stop()
	w := httptest.NewRecorder()
	h(w, nil)
	if err := x.httpError(w.Result()); err != nil {
		t.Fatal(err)
	}
	checkFramesUTF8(t, rec.all())
	if fr := rec.all(); len(fr) != 1 || !strings.Contains(string(fr[0].Body), `"status":400`) {
		t.Errorf("frames = %+v", fr)
	}
}

func checkFramesUTF8(t *testing.T, frames []Frame) {
	t.Helper()
	if len(frames) == 0 {
		t.Fatal("no frames")
	}
	for _, f := range frames {
		if !json.Valid(f.Body) || !utf8.Valid(f.Body) {
			t.Errorf("frame %s %s body is not UTF-8 JSON: %q", f.Dir, f.Kind, f.Body)
		}
	}
}
