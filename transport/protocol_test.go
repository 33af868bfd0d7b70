package transport

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
)

// pinned returns a client for url pinned to version.
func pinned(t *testing.T, url, version string) *Client {
	return newClient(t, url, func(c *Config) { c.ProtocolVersion = version })
}

// outMethods lists the methods of the out requests recorded.
func outMethods(r *recorder) []string {
	var ms []string
	for _, f := range r.all() {
		if f.Dir == "out" && (f.Kind == "request" || f.Kind == "notification") {
			ms = append(ms, f.Method)
		}
	}
	return ms
}

func TestStatelessAgainstGoSDK(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{Protocol: Protocol20260728})
	rec := &recorder{}
	s := connect(t, pinned(t, url, Protocol20260728), rec.sink)
	if s.ProtocolVersion != Protocol20260728 || s.IDDigest() != "" {
		t.Fatalf("session version %q, id digest %q; want 2026-07-28 and no session id", s.ProtocolVersion, s.IDDigest())
	}
	if !strings.Contains(string(s.ServerInfo), demoserver.Name) {
		t.Errorf("serverInfo %s does not name %s", s.ServerInfo, demoserver.Name)
	}
	ctx := context.Background()
	cat, err := s.ListTools(ctx, rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.Find("regional"); !ok {
		t.Fatalf("no regional tool in %d tools (warnings %q)", len(cat.Tools), cat.Warnings)
	}
	// The SDK refuses a call whose Mcp-Param-Region header is missing or
	// differs from the body (-32020), so a result proves the mirroring.
	res, err := s.CallTool(ctx, CallRequest{Tool: "regional", Arguments: json.RawMessage(`{"region":" eu west ","query":"q"}`)}, rec.sink)
	if err != nil {
		t.Fatalf("regional: %v", err)
	}
	if !strings.Contains(string(res.StructuredContent), `" eu west "`) || srv.Calls("regional") != 1 {
		t.Fatalf("regional: %s, server count %d", res.StructuredContent, srv.Calls("regional"))
	}
	if got, want := outMethods(rec), []string{"server/discover", "tools/list", "tools/call"}; !slices.Equal(got, want) {
		t.Fatalf("requests sent %q, want %q (no initialize)", got, want)
	}
	for _, f := range rec.all() {
		if f.Dir != "out" || f.Kind != "request" {
			continue
		}
		var m struct {
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal(f.Body, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo} {
			if _, ok := m.Params.Meta[k]; !ok {
				t.Errorf("%s request lacks _meta %s: %s", f.Method, k, f.Body)
			}
		}
	}
}

func TestProtocolPinRefused(t *testing.T) {
	for _, tc := range []struct{ server, pin, offers string }{
		{"2025-11-25", Protocol20260728, `"2025-11-25"`},
		{Protocol20260728, Protocol20251125, `"2026-07-28"`},
	} {
		t.Run(tc.pin+"@"+tc.server, func(t *testing.T) {
			_, url := demotest.StartTest(t, demoserver.Options{Protocol: tc.server})
			_, err := pinned(t, url, tc.pin).Connect(context.Background(), nil)
			e := wantKind(t, err, KindVersionMismatch)
			if !strings.Contains(e.Error(), tc.pin) || !strings.Contains(e.Error(), tc.offers) {
				t.Fatalf("error %q does not name the pin %s and the offer %s", e, tc.pin, tc.offers)
			}
			if e.MayHaveExecuted() {
				t.Error("a version refusal may not count as possibly executed")
			}
		})
	}
}

func TestProtocolAutoProbesOnce(t *testing.T) {
	for _, tc := range []struct{ server, want string }{
		{"", Protocol20251125}, // the SDK's stateful handler offers the older revisions only
		{Protocol20260728, Protocol20260728},
		{Protocol20251125, Protocol20251125},
	} {
		t.Run("server="+tc.server, func(t *testing.T) {
			_, url := demotest.StartTest(t, demoserver.Options{Protocol: tc.server})
			c := pinned(t, url, ProtocolAuto)
			first, second := &recorder{}, &recorder{}
			if s := connect(t, c, first.sink); s.ProtocolVersion != tc.want {
				t.Fatalf("auto settled on %q, want %q", s.ProtocolVersion, tc.want)
			}
			if s := connect(t, c, second.sink); s.ProtocolVersion != tc.want {
				t.Fatalf("second session speaks %q, want %q", s.ProtocolVersion, tc.want)
			}
			if got := outMethods(first); got[0] != methodDiscover {
				t.Errorf("first session sent %q: the probe is server/discover", got)
			}
			if tc.want == Protocol20251125 && slices.Contains(outMethods(second), methodDiscover) {
				t.Errorf("second session probed again: %q", outMethods(second))
			}
		})
	}
}

func TestInputRequiredAnsweredAgainstGoSDK(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{Protocol: Protocol20260728})
	ctx := context.Background()
	s := connect(t, pinned(t, url, Protocol20260728), nil)
	if _, err := s.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	req := CallRequest{Tool: "confirm", Arguments: json.RawMessage(`{"item":"order-7"}`)}
	res, err := s.CallTool(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	ir := res.InputRequired
	if ir == nil || !ir.HasState || srv.Calls("confirm") != 0 {
		t.Fatalf("first answer: %s (input required %v, server count %d); want an input request and no run", res.Raw, ir, srv.Calls("confirm"))
	}
	ans, err := ir.Answer(&ElicitationPolicy{Mode: ElicitDefaults})
	if err != nil {
		t.Fatal(err)
	}
	req.Input = ans
	res2, err := s.CallTool(ctx, req, nil)
	if err != nil {
		t.Fatalf("re-issue: %v", err)
	}
	if string(res2.ID) == string(res.ID) {
		t.Errorf("re-issue reused id %s", res.ID)
	}
	if res2.InputRequired != nil || !strings.Contains(string(res2.StructuredContent), `"confirmed":true`) || srv.Calls("confirm") != 1 {
		t.Fatalf("re-issue: %s, server count %d", res2.Raw, srv.Calls("confirm"))
	}
}
