package mcptest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", DefaultProtocolVersion)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestFaultMatching(t *testing.T) {
	var fs faults
	fs.add(Fault{RPCMethod: "tools/call", Nth: 2, Status: 401})
	fs.add(Fault{RPCMethod: "tools/call", Tool: "b", Status: 503, Times: 2})
	var got []string
	for _, tool := range []string{"a", "a", "a", "b", "b", "b"} {
		f := fs.match("POST", "tools/call", tool, "")
		got = append(got, fmt.Sprint(f != nil, statusOf(f)))
	}
	want := "[false 0 true 401 false 0 true 503 true 503 false 0]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func statusOf(f *Fault) int {
	if f == nil {
		return 0
	}
	return f.Status
}

func TestJSONModeAndExpiry(t *testing.T) {
	srv := Start(t, Options{JSONResponse: true, ExpireAfter: 1}, ToolDef{Name: "a"})
	resp := post(t, srv.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if sid == "" || !bytes.Contains(b, []byte(DefaultProtocolVersion)) || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("initialize: %s %q", b, sid)
	}
	resp = post(t, srv.URL, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a"}}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte(`"text":"ok"`)) {
		t.Errorf("call: %s", b)
	}
	resp = post(t, srv.URL, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a"}}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("expired session: %d", resp.StatusCode)
	}
	if st := srv.Stats(); st.Initialize != 1 || st.Calls["a"] != 2 || st.Executed["a"] != 1 {
		t.Errorf("stats %+v", st)
	}
}

// recordTB records Errorf calls instead of failing the test.
type recordTB struct {
	testing.TB
	errs []string
}

func (r *recordTB) Helper()       {}
func (r *recordTB) Failed() bool  { return false }
func (r *recordTB) Skipped() bool { return false }
func (r *recordTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestUnfiredFaultFailsTheTest(t *testing.T) {
	srv := NewServer(Options{JSONResponse: true}, ToolDef{Name: "a"})
	defer srv.Close()
	srv.Inject(Fault{RPCMethod: "initialize", Nth: 1, Status: http.StatusServiceUnavailable})                // fires
	srv.Inject(Fault{RPCMethod: "tools/call", Tool: "missing", Status: http.StatusBadGateway})               // never fires
	srv.Inject(Fault{RPCMethod: "ping", Status: http.StatusTeapot, Optional: "documents an optional fault"}) // never fires, optional
	resp := post(t, srv.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("initialize: %d, want the injected 503", resp.StatusCode)
	}
	rec := &recordTB{TB: t}
	srv.CheckFaults(rec)
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], `Tool:"missing"`) || !strings.Contains(rec.errs[0], "matched 0 requests") {
		t.Fatalf("CheckFaults reported %q, want exactly the unfired tools/call fault", rec.errs)
	}
}
