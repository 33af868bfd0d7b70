package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

func TestResumeAfterClosedStream(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", CloseAfterPriming: true, Retry: 1, Nth: 1})
	s := connect(t, newClient(t, srv.URL, func(c *Config) { c.MaxResumeDelay = time.Millisecond }), nil)
	var rec recorder
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Content), "ok") {
		t.Errorf("content = %s", res.Content)
	}
	st := srv.Stats()
	if st.Calls["a"] != 1 || st.Executed["a"] != 1 || st.Gets != 1 {
		t.Errorf("calls %d executed %d gets %d, want 1 1 1", st.Calls["a"], st.Executed["a"], st.Gets)
	}
	get := st.Requests[len(st.Requests)-1]
	if get.HTTPMethod != "GET" || get.LastEventID == "" || get.Session == "" {
		t.Errorf("resume request = %+v", get)
	}
	fr := rec.all()
	if last := fr[len(fr)-1]; last.Kind != "response" || last.EventID == "" {
		t.Errorf("last frame = %+v", last)
	}
}

func TestResumeImpossible(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", CloseAfterPriming: true})
	srv.Inject(mcptest.Fault{HTTPMethod: "GET", Status: http.StatusMethodNotAllowed})
	s := connect(t, newClient(t, srv.URL, nil), nil)
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil)
	e := wantKind(t, err, KindTransportLoss)
	if !e.Sent || !e.Ambiguous() {
		t.Errorf("lost stream: sent %v ambiguous %v", e.Sent, e.Ambiguous())
	}
	if st := srv.Stats(); st.Calls["a"] != 1 || st.Gets != 1 {
		t.Errorf("calls %d gets %d", st.Calls["a"], st.Gets)
	}
}

func TestSplitEveryByteEndToEnd(t *testing.T) {
	tool := mcptest.ToolDef{Name: "p", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		_ = c.Progress(1, 2, "line one\nline two")
		return &mcptest.Result{Content: mcptest.Text("a\r\nb"), StructuredContent: map[string]any{"x": 1}}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	srv.Inject(mcptest.Fault{SplitBytes: true})
	s := connect(t, newClient(t, srv.URL, nil), nil)
	var rec recorder
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "p"}, rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.StructuredContent) != `{"x":1}` || len(rec.all()) != 3 {
		t.Errorf("res %s frames %d", res.StructuredContent, len(rec.all()))
	}
}

func TestResponseBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault mcptest.Fault
	}{
		{"1GiB of events", mcptest.Fault{RPCMethod: "tools/call", Flood: 1 << 30}},
		{"1GiB line", mcptest.Fault{RPCMethod: "tools/call", HugeLine: 1 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
			srv.Inject(tc.fault)
			s := connect(t, newClient(t, srv.URL, func(c *Config) { c.Policy.MaxResponseBytes = 1 << 20 }), nil)
			frames := 0
			_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, func(context.Context, Frame) error { frames++; return nil })
			e := wantKind(t, err, KindMalformed)
			if !strings.Contains(e.Error(), "too") {
				t.Errorf("error %q does not say too large/long", e)
			}
			srv.Close() // wait for the handler to notice we hung up
			if w := srv.Stats().BytesWritten; w > 64<<20 {
				t.Errorf("server wrote %d bytes before we stopped it", w)
			}
			if frames > 1200 {
				t.Errorf("%d frames for a 1 MiB bound", frames)
			}
		})
	}
}

func TestMalformedResponses(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	for _, mode := range []bool{false, true} {
		for _, tc := range []struct {
			name  string
			fault mcptest.Fault
		}{
			{"not json", mcptest.Fault{Body: []byte(`{not json`)}},
			{"wrong id", mcptest.Fault{WrongID: true}},
			{"duplicate id", mcptest.Fault{DuplicateID: true}},
			{"wrong version", mcptest.Fault{Body: []byte(`{"jsonrpc":"1.0","id":2,"result":{}}`)}},
			{"batch", mcptest.Fault{Body: []byte(`[{"jsonrpc":"2.0","id":2,"result":{}}]`)}},
			{"too deep", mcptest.Fault{Body: []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":` + deep + `}}`)}},
			{"result and error", mcptest.Fault{Body: []byte(`{"jsonrpc":"2.0","id":2,"result":{},"error":{"code":1,"message":"x"}}`)}},
			{"null id", mcptest.Fault{Body: []byte(`{"jsonrpc":"2.0","id":null,"result":{}}`)}},
			{"string id", mcptest.Fault{Body: []byte(`{"jsonrpc":"2.0","id":"2","result":{}}`)}},
			{"result not object", mcptest.Fault{Body: []byte(`{"jsonrpc":"2.0","id":2,"result":"x"}`)}},
		} {
			t.Run(fmt.Sprintf("json=%v/%s", mode, tc.name), func(t *testing.T) {
				srv := mcptest.Start(t, mcptest.Options{JSONResponse: mode}, okTool("a"))
				tc.fault.RPCMethod = "tools/call"
				srv.Inject(tc.fault)
				s := connect(t, newClient(t, srv.URL, nil), nil)
				var rec recorder
				_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, rec.sink)
				e := wantKind(t, err, KindMalformed)
				if !e.Sent || !e.Ambiguous() {
					t.Errorf("malformed after send must be ambiguous: %+v", e)
				}
				for _, f := range rec.all() {
					if !json.Valid(f.Body) {
						t.Errorf("frame body is not JSON: %q", f.Body)
					}
				}
			})
		}
	}
}

func TestTimeoutSendsCancelled(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Hang: hang})
	s := connect(t, newClient(t, srv.URL, func(c *Config) { c.Timeout = time.Second }), nil)
	var rec recorder
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, rec.sink)
	e := wantKind(t, err, KindTimeout)
	if !e.Sent || !e.Ambiguous() {
		t.Errorf("timeout after send: %+v", e)
	}
	st := srv.Stats()
	if st.Cancelled != 1 || string(st.CancelledIDs[0]) != "2" {
		t.Errorf("cancelled %d ids %s", st.Cancelled, st.CancelledIDs)
	}
	fr := rec.all()
	if last := fr[len(fr)-1]; last.Method != "notifications/cancelled" || last.Dir != "out" {
		t.Errorf("last frame = %+v", last)
	}
}

func TestMaxDuration(t *testing.T) {
	gate := make(chan struct{})
	tool := mcptest.ToolDef{Name: "chatty", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		for i := 0; ; i++ { // progress keeps the inactivity timer alive; only MaxDuration stops us
			if err := c.Progress(float64(i), 0, ""); err != nil {
				return nil, err
			}
			select {
			case gate <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	s := connect(t, newClient(t, srv.URL, func(c *Config) {
		c.Timeout = 10 * time.Second
		c.MaxDuration = time.Second
		c.Policy.MaxResponseBytes = 64 << 20
	}), nil)
	go func() {
		for range gate {
		}
	}()
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "chatty"}, nil)
	e := wantKind(t, err, KindTimeout)
	if !strings.Contains(e.Error(), "maximum duration") {
		t.Errorf("error = %v", e)
	}
	srv.Close()
	close(gate)
}

func TestCallerCancel(t *testing.T) {
	started := make(chan struct{})
	tool := mcptest.ToolDef{Name: "block", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		close(started)
		<-ctx.Done() // released by notifications/cancelled or by the client hanging up
		return nil, ctx.Err()
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	s := connect(t, newClient(t, srv.URL, nil), nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err := s.CallTool(ctx, CallRequest{Tool: "block"}, nil)
	e := wantKind(t, err, KindCancelled)
	if !e.Sent || e.Ambiguous() || !e.MayHaveExecuted() {
		t.Errorf("cancel after send: sent %v ambiguous %v mayHave %v", e.Sent, e.Ambiguous(), e.MayHaveExecuted())
	}
	if st := srv.Stats(); st.Cancelled != 1 {
		t.Errorf("server saw %d cancellations", st.Cancelled)
	}
	// Cancelled before anything was sent: definitive, nothing to notify.
	_, err = s.CallTool(ctx, CallRequest{Tool: "block"}, nil)
	if e := wantKind(t, err, KindCancelled); e.Sent || e.MayHaveExecuted() {
		t.Errorf("cancel before send: %+v", e)
	}
	if st := srv.Stats(); st.Calls["block"] != 1 || st.Cancelled != 1 {
		t.Errorf("stats after pre-send cancel: %+v", st)
	}
}

func TestUnauthorizedRefresh(t *testing.T) {
	for _, tc := range []struct {
		name      string
		times     int
		wantErr   Kind
		wantPosts int
	}{
		{"once", 1, "", 2},
		{"twice", 0, KindUnauthorized, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusUnauthorized, Times: tc.times})
			resolves := 0
			c := newClient(t, srv.URL, func(c *Config) {
				c.Headers = map[string]SecretRef{"Authorization": {Env: "TOKEN"}}
				c.Policy.EnvironmentAllowlist = []string{"TOKEN"}
				c.Getenv = func(string) string { resolves++; return fmt.Sprintf("Bearer tok-0000%d", resolves) }
			})
			s := connect(t, c, nil)
			before := resolves
			_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil)
			if tc.wantErr != "" {
				wantKind(t, err, tc.wantErr)
			} else if err != nil {
				t.Fatal(err)
			}
			st := srv.Stats()
			if st.Calls["a"] != tc.wantPosts || resolves-before != 2 {
				t.Errorf("calls %d resolves %d, want %d and 2", st.Calls["a"], resolves-before, tc.wantPosts)
			}
			var ids, auth []string
			for _, r := range st.Requests {
				if r.RPCMethod == "tools/call" {
					ids = append(ids, string(r.ID))
					auth = append(auth, r.Header.Get("Authorization"))
				}
			}
			if len(ids) != 2 || ids[0] != ids[1] || auth[0] == auth[1] {
				t.Errorf("resend ids %v auth %v: want the same id with a refreshed credential", ids, auth)
			}
		})
	}
}

func TestUnauthorizedOnInitialize(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{})
	srv.Inject(mcptest.Fault{RPCMethod: "initialize", Status: http.StatusUnauthorized, Nth: 1})
	srv.Inject(mcptest.Fault{RPCMethod: "notifications/initialized", Status: http.StatusUnauthorized, Nth: 1})
	connect(t, newClient(t, srv.URL, nil), nil)
	if st := srv.Stats(); st.Initialize != 2 || st.Initialized != 2 {
		t.Errorf("initialize %d initialized %d, want 2 and 2", st.Initialize, st.Initialized)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	second := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	first := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	first.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusTemporaryRedirect, Location: second.URL})
	s := connect(t, newClient(t, first.URL, nil), nil)
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil)
	e := wantKind(t, err, KindHTTPStatus)
	if e.Status != http.StatusTemporaryRedirect || e.MayHaveExecuted() {
		t.Errorf("redirect: %+v", e)
	}
	if n := len(second.Stats().Requests); n != 0 {
		t.Errorf("redirect target saw %d requests", n)
	}
}

func TestSlowFramesGate(t *testing.T) {
	gate := make(chan struct{})
	tool := mcptest.ToolDef{Name: "p", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		for i := range 3 {
			if err := c.Progress(float64(i), 3, ""); err != nil {
				return nil, err
			}
		}
		return &mcptest.Result{}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Gate: gate})
	s := connect(t, newClient(t, srv.URL, nil), nil)
	seen := make(chan Frame)
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(context.Background(), CallRequest{Tool: "p"}, func(ctx context.Context, f Frame) error {
			if f.Dir == "in" {
				seen <- f
			}
			return nil
		})
		done <- err
	}()
	for i := range 4 { // 3 progress + response; each after the first needs one gate release
		if i > 0 {
			gate <- struct{}{}
		}
		if f := <-seen; (i < 3) != (f.Kind == "notification") {
			t.Errorf("frame %d kind %s", i, f.Kind)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
