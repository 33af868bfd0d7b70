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

	"github.com/agentctl/agentctl/transport/mcptest"
)

// Remote JSON is read strictly (issue 13 item 5): in every response, SSE
// event, tool list and initialize result, a member name repeated at any
// depth makes the message malformed, member names match case-sensitively,
// and a response id matches the request id exactly as sent. encoding/json
// kept the last duplicate, let an upper-case name fill a field and compared
// ids as float64.

// hostileCall runs one tools/call of tool "a" whose response is body (the
// call's id is 2: initialize took 1) and returns the result, the server's
// execution count of "a" and the error.
func hostileCall(t *testing.T, jsonMode bool, body string) (*CallResult, int, error) {
	t.Helper()
	srv := mcptest.Start(t, mcptest.Options{JSONResponse: jsonMode}, okTool("a"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Body: []byte(body)})
	s := connect(t, newClient(t, srv.URL, nil), nil)
	var rec recorder
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, rec.sink)
	checkFramesUTF8(t, rec.all())
	return res, srv.Stats().Executed["a"], err
}

// TestHostile_DuplicateMember: {"isError":true,…,"isError":false} was
// taken as a success; a repeated name anywhere (the result, a content
// block, the envelope) is now a malformed response of a call that was sent
// and executed.
func TestHostile_DuplicateMember(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"isError", `{"jsonrpc":"2.0","id":2,"result":{"isError":true,"content":[{"type":"text","text":"disk full"}],"isError":false}}`},
		{"nested", `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"a","text":"b"}]}}`},
		{"envelope", `{"jsonrpc":"2.0","id":2,"result":{"content":[]},"jsonrpc":"2.0"}`},
	} {
		for _, jsonMode := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/json=%v", tc.name, jsonMode), func(t *testing.T) {
				res, executed, err := hostileCall(t, jsonMode, tc.body)
				e := wantKind(t, err, KindMalformed)
				if !e.Sent || !strings.Contains(e.Error(), "duplicate") {
					t.Errorf("error = %v (sent %v), want a sent call's duplicate-member error", e, e.Sent)
				}
				if res != nil || executed != 1 {
					t.Errorf("result %+v, server executed %d; want no result, executed 1", res, executed)
				}
			})
		}
	}
}

// TestHostile_CaseFoldedMember: with structuredContent and
// STRUCTUREDCONTENT both present the upper-case one won; names now match
// exactly, so the upper-case members are unknown members and ignored.
func TestHostile_CaseFoldedMember(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":2,"result":{"content":[],"structuredContent":{"v":"real"},"STRUCTUREDCONTENT":{"v":"forged"},"IsError":true}}`
	for _, jsonMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonMode), func(t *testing.T) {
			res, executed, err := hostileCall(t, jsonMode, body)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.StructuredContent) != `{"v":"real"}` || res.IsError || executed != 1 {
				t.Errorf("structuredContent %s, isError %v, executed %d; want {\"v\":\"real\"}, false, 1", res.StructuredContent, res.IsError, executed)
			}
		})
	}
}

// TestHostile_InexactID: a response id 2.0000000000000001 (2 as a float64)
// matched request 2; only the id token as sent matches now.
func TestHostile_InexactID(t *testing.T) {
	for _, id := range []string{`2.0000000000000001`, `2.0`, `2e0`, `20e-1`} {
		for _, jsonMode := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/json=%v", id, jsonMode), func(t *testing.T) {
				res, executed, err := hostileCall(t, jsonMode, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[]}}`)
				e := wantKind(t, err, KindMalformed)
				if !strings.Contains(e.Error(), "does not match request id 2") || res != nil || executed != 1 {
					t.Errorf("error %v, result %+v, executed %d", e, res, executed)
				}
			})
		}
	}
}

// TestHostile_StrictToolList: a tools/list result with a tool object that
// names itself twice is malformed (it listed the second name), and a
// "TOOLS" member no longer replaces "tools".
func TestHostile_StrictToolList(t *testing.T) {
	for _, jsonMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("duplicate/json=%v", jsonMode), func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{JSONResponse: jsonMode}, okTool("a"))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/list",
				Body: []byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"},"name":"rm-rf"}]}}`)})
			s := connect(t, newClient(t, srv.URL, nil), nil)
			cat, err := s.ListTools(context.Background(), nil)
			if e := wantKind(t, err, KindMalformed); !strings.Contains(e.Error(), "duplicate") || cat != nil {
				t.Errorf("error %v, catalog %+v", e, cat)
			}
			if n := srv.Stats().List; n != 1 {
				t.Errorf("server saw %d tools/list, want 1", n)
			}
		})
		t.Run(fmt.Sprintf("case/json=%v", jsonMode), func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{JSONResponse: jsonMode}, okTool("a"))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/list",
				Body: []byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"TOOLS":[{"name":"evil","inputSchema":{"type":"object"}}]}}`)})
			s := connect(t, newClient(t, srv.URL, nil), nil)
			cat, err := s.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(cat.Tools) != 1 || cat.Tools[0].Name != "a" {
				t.Errorf("tools = %+v, want only a", cat.Tools)
			}
		})
	}
}

// TestHostile_StrictInitialize: an initialize result carrying
// protocolVersion twice (an old version, then ours) connected; it is now a
// malformed response, and a "PROTOCOLVERSION" member is not read.
func TestHostile_StrictInitialize(t *testing.T) {
	for _, tc := range []struct {
		name, result string
		kind         Kind
	}{
		{"duplicate", `{"protocolVersion":"2024-11-05","capabilities":{},"serverInfo":{"name":"x","version":"1"},"protocolVersion":"` + ProtocolVersion + `"}`, KindMalformed},
		{"case", `{"PROTOCOLVERSION":"` + ProtocolVersion + `","capabilities":{},"serverInfo":{"name":"x","version":"1"}}`, KindVersionMismatch},
	} {
		for _, jsonMode := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/json=%v", tc.name, jsonMode), func(t *testing.T) {
				srv := mcptest.Start(t, mcptest.Options{JSONResponse: jsonMode}, okTool("a"))
				srv.Inject(mcptest.Fault{RPCMethod: "initialize", Body: []byte(`{"jsonrpc":"2.0","id":1,"result":` + tc.result + `}`)})
				s, err := newClient(t, srv.URL, nil).Connect(context.Background(), nil)
				if s != nil {
					_ = s.Close(context.Background())
				}
				wantKind(t, err, tc.kind)
				if st := srv.Stats(); st.Initialize != 1 || st.Initialized != 0 {
					t.Errorf("server saw %d initialize, %d initialized; want 1, 0", st.Initialize, st.Initialized)
				}
			})
		}
	}
}

// TestHostile_DuplicateInNotification: an SSE event carrying a progress
// notification with a repeated member makes the call malformed, as a
// response would (every SSE data payload is read strictly).
func TestHostile_DuplicateInNotification(t *testing.T) {
	body := "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"agentctl-2\",\"progress\":1,\"progress\":2}}"
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Body: []byte(body)})
	s := connect(t, newClient(t, srv.URL, nil), nil)
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil)
	if e := wantKind(t, err, KindMalformed); !strings.Contains(e.Error(), "duplicate") {
		t.Errorf("error = %v", e)
	}
}

// TestHostile_DuplicateInErrorBody: an HTTP error body with a repeated
// member is recorded as text, not as JSON that readers would read apart,
// and its detail is not taken from either "message".
func TestHostile_DuplicateInErrorBody(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	s := connect(t, newClient(t, srv.URL, nil), nil)
	var rec recorder
	body := `{"error":{"message":"first","message":"second"}}`
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(body))
	})
	x := &exchange{s: s, sink: rec.sink, ctx: context.Background(), id: json.RawMessage("9"), idle: time.NewTimer(time.Hour)}
	defer x.idle.Stop()
	w := httptest.NewRecorder()
	h(w, nil)
	if d := peekDetail(w.Result(), s.c.red); d != body {
		t.Errorf("detail = %q, want the body as text", d)
	}
	if err := x.httpError(w.Result()); err != nil {
		t.Fatal(err)
	}
	var text struct {
		Status int    `json:"status"`
		Text   string `json:"text"`
	}
	if fr := rec.all(); len(fr) != 1 || json.Unmarshal(fr[0].Body, &text) != nil || text.Status != 400 || text.Text != body {
		t.Errorf("frames = %+v, want one http_error frame holding the body as text", fr)
	}
}
