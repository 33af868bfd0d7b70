package transport

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
)

// TestTraceContextOnEveryRequest: with Config.TraceContext set, every
// request of both protocol revisions carries the W3C trace context in
// params._meta (as recorded, so the log knows the span id the server was
// given) and as the traceparent/tracestate headers; notifications carry
// none, and without TraceContext nothing is added.
func TestTraceContextOnEveryRequest(t *testing.T) {
	for _, proto := range []string{Protocol20251125, Protocol20260728} {
		for _, on := range []bool{true, false} {
			name := proto + "/off"
			if on {
				name = proto + "/on"
			}
			t.Run(name, func(t *testing.T) {
				srv := demoserver.New(demoserver.Options{Protocol: proto})
				var mu sync.Mutex
				headers := map[string]string{} // JSON-RPC method → traceparent header
				hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					if tp := r.Header.Get("traceparent"); tp != "" {
						headers[tp] = r.Header.Get("tracestate")
					}
					mu.Unlock()
					srv.Handler().ServeHTTP(w, r)
				}))
				t.Cleanup(func() {
					for ss := range srv.MCPServer().Sessions() {
						_ = ss.Close()
					}
					hs.CloseClientConnections()
					hs.Close()
				})
				n := 0
				c := newClient(t, hs.URL, func(c *Config) {
					c.ProtocolVersion = proto
					if on {
						c.TraceContext = func() (string, string) {
							mu.Lock()
							defer mu.Unlock()
							n++
							return "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b" + string(rune('0'+n)) + "-01", "vendor=x"
						}
					}
				})
				rec := &recorder{}
				s := connect(t, c, rec.sink)
				if _, err := s.ListTools(context.Background(), rec.sink); err != nil {
					t.Fatal(err)
				}
				if _, err := s.CallTool(context.Background(), CallRequest{Tool: "search", Arguments: json.RawMessage(`{"q":"x"}`)}, rec.sink); err != nil {
					t.Fatal(err)
				}
				requests := 0
				for _, f := range rec.all() {
					if f.Dir != "out" {
						continue
					}
					var m struct {
						Params struct {
							Meta map[string]any `json:"_meta"`
						} `json:"params"`
					}
					if err := json.Unmarshal(f.Body, &m); err != nil {
						t.Fatal(err)
					}
					tp, _ := m.Params.Meta[MetaTraceparent].(string)
					switch {
					case f.Kind != "request" || !on:
						if tp != "" || strings.Contains(string(f.Body), "traceparent") {
							t.Fatalf("%s %s carries a trace context: %s", f.Kind, f.Method, f.Body)
						}
					default:
						requests++
						mu.Lock()
						ts, sent := headers[tp]
						mu.Unlock()
						if !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || m.Params.Meta[MetaTracestate] != "vendor=x" || !sent || ts != "vendor=x" {
							t.Fatalf("%s: _meta %v, header sent %v (%q)", f.Method, m.Params.Meta, sent, ts)
						}
						if f.Method == "tools/call" && m.Params.Meta["progressToken"] == nil {
							t.Fatalf("tools/call lost its progressToken: %s", f.Body)
						}
					}
				}
				if on && requests < 3 {
					t.Fatalf("%d requests with a trace context, want every request (at least 3)", requests)
				}
				if !on && len(headers) != 0 {
					t.Fatalf("headers sent without TraceContext: %v", headers)
				}
			})
		}
	}
}
