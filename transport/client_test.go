package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

func TestPagination(t *testing.T) {
	tools := []mcptest.ToolDef{okTool("a"), okTool("b"), okTool("c"), okTool("d"), {Name: "noschema", OmitInputSchema: true}}
	srv := mcptest.Start(t, mcptest.Options{PageSize: 2}, tools...)
	s := connect(t, newClient(t, srv.URL, nil), nil)
	var rec recorder
	cat, err := s.ListTools(context.Background(), rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cat.Tools); got != 4 {
		t.Errorf("tools = %d, want 4", got)
	}
	if len(cat.Warnings) != 1 || !strings.Contains(cat.Warnings[0], "noschema") {
		t.Errorf("warnings = %q", cat.Warnings)
	}
	if st := srv.Stats(); st.List != 3 {
		t.Errorf("server saw %d tools/list, want 3", st.List)
	}
	var cursors []string
	for _, f := range rec.all() {
		if f.Dir == "out" {
			var m struct {
				Params struct{ Cursor string } `json:"params"`
			}
			_ = json.Unmarshal(f.Body, &m)
			cursors = append(cursors, m.Params.Cursor)
		}
	}
	if fmt.Sprint(cursors) != "[ page-2 page-4]" {
		t.Errorf("cursors = %q", cursors)
	}
}

func TestHeaders(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.EchoHeaders("echo"))
	c := newClient(t, srv.URL, func(c *Config) { c.UserAgent = "agentctl/1.2.3" })
	s := connect(t, c, nil)
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "echo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	if err := json.Unmarshal(res.StructuredContent, &h); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
		"Origin": "agentctl://local", "Mcp-Protocol-Version": ProtocolVersion,
		// The session id went out (the server saw it, below) but a server
		// quoting it back gets it scrubbed: it is a bearer credential.
		"Mcp-Session-Id": Redacted, "User-Agent": "agentctl/1.2.3",
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
	if got := srv.Stats().Requests[len(srv.Stats().Requests)-1].Header.Get("Mcp-Session-Id"); got != "mcptest-session-1" {
		t.Errorf("server saw Mcp-Session-Id %q, want mcptest-session-1", got)
	}
	init := srv.Stats().Requests[0]
	if init.RPCMethod != "initialize" || init.Header.Get("Mcp-Protocol-Version") != "" || init.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("initialize carried session headers: %v", init.Header)
	}
	if s.IDDigest() == "" || strings.Contains(s.IDDigest(), "mcptest-session") {
		t.Errorf("IDDigest = %q", s.IDDigest())
	}
}

func TestVersionMismatch(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{ProtocolVersion: "2025-06-18"})
	_, err := newClient(t, srv.URL, nil).Connect(context.Background(), nil)
	e := wantKind(t, err, KindVersionMismatch)
	if !strings.Contains(e.Error(), "2025-06-18") || !strings.Contains(e.Error(), "2025-11-25") {
		t.Errorf("error %q does not name both versions", e)
	}
	if st := srv.Stats(); st.Initialized != 0 {
		t.Errorf("initialized sent after a mismatch")
	}
}

func TestProgressBackpressure(t *testing.T) {
	sentAll := make(chan struct{})
	tool := mcptest.ToolDef{Name: "slow", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		for i := 1; i <= 3; i++ {
			if err := c.Progress(float64(i), 3, ""); err != nil {
				return nil, err
			}
		}
		close(sentAll) // everything but the result is on the wire
		return &mcptest.Result{Content: mcptest.Text("done")}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	s := connect(t, newClient(t, srv.URL, nil), nil)

	release, parked := make(chan struct{}), make(chan struct{})
	var rec recorder
	sink := func(ctx context.Context, f Frame) error {
		_ = rec.sink(ctx, f)
		if f.Kind == "notification" && bytes.Contains(f.Body, []byte(`"progress":1`)) {
			close(parked)
			<-release // a slow disk
		}
		return nil
	}
	done := make(chan error, 1)
	var res *CallResult
	go func() {
		var err error
		res, err = s.CallTool(context.Background(), CallRequest{Tool: "slow", ProgressToken: "tok-1"}, sink)
		done <- err
	}()
	<-sentAll
	<-parked
	// The server has written everything; the reader must still be parked in the sink.
	if n := len(rec.all()); n != 2 {
		t.Fatalf("frames while the sink blocks = %d, want 2 (request, progress 1)", n)
	}
	select {
	case err := <-done:
		t.Fatalf("CallTool returned while the sink was blocked: %v", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range rec.all() {
		var m struct {
			Params struct {
				Progress      float64
				ProgressToken string
			}
		}
		_ = json.Unmarshal(f.Body, &m)
		kinds = append(kinds, fmt.Sprintf("%s/%s/%v", f.Dir, f.Kind, m.Params.Progress))
		if f.Kind == "notification" && m.Params.ProgressToken != "tok-1" {
			t.Errorf("progress token = %q", m.Params.ProgressToken)
		}
	}
	want := "[out/request/0 in/notification/1 in/notification/2 in/notification/3 in/response/0]"
	if fmt.Sprint(kinds) != want {
		t.Errorf("frames = %v, want %v", kinds, want)
	}
	if string(res.ID) != `2` {
		t.Errorf("id = %s", res.ID)
	}
}

func TestSinkErrorAborts(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	s := connect(t, newClient(t, srv.URL, nil), nil)
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, func(ctx context.Context, f Frame) error {
		return fmt.Errorf("disk full")
	})
	e := wantKind(t, err, KindTransportLoss)
	if e.Sent || e.Ambiguous() || !strings.Contains(e.Error(), "disk full") {
		t.Errorf("error = %v (sent %v)", e, e.Sent)
	}
	if n := srv.Stats().Calls["a"]; n != 0 {
		t.Errorf("server saw %d calls after the intent was not persisted", n)
	}
}

func TestServerRequestWithOurID(t *testing.T) {
	tool := mcptest.ToolDef{Name: "ask", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		// A server request reusing the id of the client's request: not the response.
		if err := c.Request("sampling/createMessage", c.ID, map[string]any{}); err != nil {
			return nil, err
		}
		return &mcptest.Result{Content: mcptest.Text("fine")}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	s := connect(t, newClient(t, srv.URL, nil), nil)
	var rec recorder
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "ask"}, rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Content), "fine") {
		t.Errorf("content = %s", res.Content)
	}
	fr := rec.all()
	if len(fr) != 4 || fr[1].Kind != "server_request" || fr[1].Method != "sampling/createMessage" ||
		fr[2].Dir != "out" || fr[2].Kind != "response" || fr[3].Dir != "in" || fr[3].Kind != "response" {
		t.Errorf("frames = %+v", fr)
	}
}

func TestToolErrorAndRemoteError(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{JSONResponse: true},
		mcptest.ToolDef{Name: "fails", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, fmt.Errorf("no such row")
		}})
	s := connect(t, newClient(t, srv.URL, nil), nil)
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "fails"}, nil)
	if err != nil || !res.IsError {
		t.Fatalf("isError result: res %+v err %v", res, err)
	}
	_, err = s.CallTool(context.Background(), CallRequest{Tool: "missing"}, nil)
	e := wantKind(t, err, KindRemoteError)
	if e.Code != -32602 || e.Ambiguous() || e.MayHaveExecuted() {
		t.Errorf("remote error = %+v", e)
	}
}

func TestHTTPStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		status   int
		kind     Kind
		mayHave  bool
		ambiguus bool
	}{
		{http.StatusServiceUnavailable, KindHTTPStatus, true, false},
		{http.StatusInternalServerError, KindHTTPStatus, true, false},
		{http.StatusBadRequest, KindHTTPStatus, false, false},
		{http.StatusForbidden, KindHTTPStatus, false, false},
		{http.StatusNotFound, KindSessionExpired, true, true},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: tc.status})
			s := connect(t, newClient(t, srv.URL, nil), nil)
			var rec recorder
			_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, rec.sink)
			e := wantKind(t, err, tc.kind)
			if e.Status != tc.status || e.MayHaveExecuted() != tc.mayHave || e.Ambiguous() != tc.ambiguus {
				t.Errorf("error %v: status %d mayHave %v ambiguous %v", e, e.Status, e.MayHaveExecuted(), e.Ambiguous())
			}
			fr := rec.all()
			if last := fr[len(fr)-1]; last.Kind != "http_error" || last.HTTPStatus != tc.status || !json.Valid(last.Body) {
				t.Errorf("last frame = %+v", last)
			}
		})
	}
}

func TestSessionExpiredThenNewSessionSeesNewSchema(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{ExpireAfter: 2}, okTool("a"))
	c := newClient(t, srv.URL, nil)
	s := connect(t, c, nil)
	cat, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := cat.Find("a")
	srv.AddTool(mcptest.ToolDef{Name: "a", InputSchema: json.RawMessage(`{"type":"object","required":["q"]}`)})
	_, err = s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil)
	e := wantKind(t, err, KindSessionExpired)
	if !e.Ambiguous() || e.Status != 404 {
		t.Errorf("expired: %+v", e)
	}
	s2 := connect(t, c, nil)
	cat2, err := s2.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	nu, _ := cat2.Find("a")
	if old.Digest() == nu.Digest() {
		t.Errorf("schema change not visible in the digest")
	}
	if s2.IDDigest() == s.IDDigest() {
		t.Errorf("same session digest after restart")
	}
	if st := srv.Stats(); st.Initialize != 2 || st.Calls["a"] != 1 || st.Executed["a"] != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestListToolsBounded(t *testing.T) {
	var tools []mcptest.ToolDef
	for i := range MaxToolPages + 1 {
		tools = append(tools, okTool(fmt.Sprintf("t%03d", i)))
	}
	srv := mcptest.Start(t, mcptest.Options{PageSize: 1}, tools...)
	s := connect(t, newClient(t, srv.URL, nil), nil)
	_, err := s.ListTools(context.Background(), nil)
	if e := wantKind(t, err, KindMalformed); !strings.Contains(e.Error(), "pages") {
		t.Errorf("error = %v", e)
	}
	if st := srv.Stats(); st.List != MaxToolPages {
		t.Errorf("server saw %d pages, want %d", st.List, MaxToolPages)
	}
}

func TestSessionConcurrentCalls(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	s := connect(t, newClient(t, srv.URL, nil), nil)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil)
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	ids := map[string]bool{}
	for _, r := range srv.Stats().Requests {
		if r.RPCMethod == "tools/call" {
			ids[string(r.ID)] = true
		}
	}
	if len(ids) != 8 {
		t.Errorf("distinct ids = %d, want 8", len(ids))
	}
}
