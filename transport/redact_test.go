package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// The issue 13 token: its JSON spellings include "\/" (PHP's default) and
// "\u0042\u0065..." (every character escaped).
const kanary = "Bearer Kan4ry/Tok3n-QQ7"

// escapeAll spells s with one \uXXXX escape per character.
func escapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// secretClient connects to srv sending kanary as Authorization.
func secretClient(t *testing.T, srv *mcptest.Server, value string) *Client {
	return newClient(t, srv.URL, func(c *Config) {
		c.Headers = map[string]SecretRef{"Authorization": {Env: "MCP_TOKEN"}}
		c.Policy.EnvironmentAllowlist = []string{"MCP_TOKEN"}
		c.Getenv = func(string) string { return value }
	})
}

// leaksKanary reports the first prefix of the token (at least
// MinSecretBytes long) found in s once every JSON escape is decoded.
func leaksKanary(s string) string {
	dec, _ := decodedView(s)
	for _, form := range []string{kanary, "Kan4ry/Tok3n-QQ7"} {
		for n := len(form); n >= MinSecretBytes; n-- {
			if strings.Contains(dec, form[:n]) {
				return form[:n]
			}
		}
	}
	return ""
}

func noKanary(t *testing.T, what, s string) {
	t.Helper()
	if p := leaksKanary(s); p != "" {
		t.Errorf("%s leaks %q: %s", what, p, s)
	}
}

// TestRedact_EscapedEcho: a server echoing the credential as "\/" or with
// every character \u-escaped gets it scrubbed from every frame and from
// the result, which stays valid JSON with its keys and literals intact.
func TestRedact_EscapedEcho(t *testing.T) {
	for _, spell := range []string{strings.ReplaceAll(kanary, "/", `\/`), escapeAll(kanary), escapeAll("Kan4ry/Tok3n-QQ7")} {
		echo := mcptest.ToolDef{Name: "echo", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Raw: json.RawMessage(`{"content":[{"type":"text","text":"got ` + spell + `"}],"structuredContent":{"auth":"` + spell + `","ok":true,"n":12345678}}`)}, nil
		}}
		srv := mcptest.Start(t, mcptest.Options{}, echo)
		var rec recorder
		s := connect(t, secretClient(t, srv, kanary), nil)
		res, err := s.CallTool(context.Background(), CallRequest{Tool: "echo"}, rec.sink)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rec.all() {
			noKanary(t, "frame "+f.Kind, string(f.Body))
		}
		noKanary(t, "result", string(res.Raw))
		var sc struct {
			Auth string
			OK   bool
			N    int
		}
		if err := json.Unmarshal(res.StructuredContent, &sc); err != nil || sc.Auth != Redacted || !sc.OK || sc.N != 12345678 {
			t.Errorf("structuredContent %s (%v): want auth %s, ok true, n kept", res.StructuredContent, err, Redacted)
		}
	}
}

// TestRedact_BeforeCut: an error message of 1,002 'x' then the token was
// cut at 1,024 bytes before redaction, leaking the token minus its last
// byte; the same for HTTP 500 bodies (detail cut at 256 bytes, frame at 4
// KiB). Now redaction comes first, and a prefix left at a cut is scrubbed.
func TestRedact_BeforeCut(t *testing.T) {
	cases := []struct {
		name  string
		tool  mcptest.ToolDef
		fault *mcptest.Fault
		kind  Kind
	}{
		{name: "rpc error 1024", kind: KindRemoteError, tool: mcptest.ToolDef{Name: "t", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			return nil, &mcptest.RPCError{Code: -32000, Message: strings.Repeat("x", 1002) + c.Header.Get("Authorization")}
		}}},
		{name: "http 500 json detail 256", kind: KindHTTPStatus, tool: okTool("t"), fault: &mcptest.Fault{RPCMethod: "tools/call", Status: 500,
			Body: []byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"` + strings.Repeat("x", 240) + kanary + `"}}`)}},
		{name: "http 500 text detail 256", kind: KindHTTPStatus, tool: okTool("t"), fault: &mcptest.Fault{RPCMethod: "tools/call", Status: 500,
			Body: []byte(strings.Repeat("x", 240) + kanary)}},
		{name: "http 500 body 4 KiB", kind: KindHTTPStatus, tool: okTool("t"), fault: &mcptest.Fault{RPCMethod: "tools/call", Status: 500,
			Body: []byte(strings.Repeat("x", 4<<10-12) + kanary + strings.Repeat("y", 100))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, tc.tool)
			if tc.fault != nil {
				srv.Inject(*tc.fault)
			}
			var rec recorder
			s := connect(t, secretClient(t, srv, kanary), nil)
			_, err := s.CallTool(context.Background(), CallRequest{Tool: "t"}, rec.sink)
			wantKind(t, err, tc.kind)
			noKanary(t, "error", err.Error())
			seen := err.Error()
			for _, f := range rec.all() {
				noKanary(t, "frame "+f.Kind, string(f.Body))
				seen += string(f.Body)
			}
			if !strings.Contains(seen, Redacted) {
				t.Errorf("nothing was redacted: the test did not reach the token (error %v)", err)
			}
		})
	}
}

// TestRedact_NeverKeysOrLiterals: a secret equal to "true" once turned
// {"ok":true} into invalid JSON and an executed call into a failure; a
// one-letter secret turned "text" into "te[REDACTED]t". Such values are
// now refused when resolved (before anything is sent), naming the
// reference, never the value; and a long secret that also appears as a
// key or a number is scrubbed from string values only.
func TestRedact_NeverKeysOrLiterals(t *testing.T) {
	for _, short := range []string{"true", "x", "Bearer abc"} {
		srv := mcptest.Start(t, mcptest.Options{}, okTool("t"))
		_, err := secretClient(t, srv, short).Connect(context.Background(), nil)
		e := wantKind(t, err, KindPolicyDenied)
		if !errors.Is(err, ErrSecretTooShort) || !strings.Contains(e.Error(), "env:MCP_TOKEN") || (len(short) > 1 && strings.Contains(e.Error(), short)) {
			t.Errorf("secret %q: %v; want ErrSecretTooShort naming env:MCP_TOKEN and not the value", short, err)
		}
		if st := srv.Stats(); st.Posts != 0 {
			t.Errorf("secret %q: the server saw %d POSTs; want none", short, st.Posts)
		}
	}

	const secret = "Bearer 1234567890"
	tool := mcptest.ToolDef{Name: "t", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return &mcptest.Result{Raw: json.RawMessage(`{"content":[{"type":"text","text":"1234567890"}],"structuredContent":{"1234567890":1234567890,"ok":true,"s":"x1234567890y"}}`)}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	s := connect(t, secretClient(t, srv, secret), nil)
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "t"}, nil)
	if err != nil || res.IsError {
		t.Fatalf("call: %v (isError %v)", err, res != nil && res.IsError)
	}
	want := `{"1234567890":1234567890,"ok":true,"s":"x` + Redacted + `y"}`
	if string(res.StructuredContent) != want {
		t.Errorf("structuredContent = %s, want %s", res.StructuredContent, want)
	}
}

// TestRedact_Scrub covers the decoded view: surrogate pairs, escaped
// quotes, nested JSON in a string, and the cut rule.
func TestRedact_Scrub(t *testing.T) {
	vals := []string{"s3cr\"et-ü-😀"}
	for in, want := range map[string]string{
		`a s3cr\"et-\u00fc-\ud83d\ude00 b`: `a ` + Redacted + ` b`,
		`s3cr\"et-ü-😀`:                     Redacted,
		`x s3cr\"et-…`:                     `x ` + Redacted + `…`,
		`x s3cr\"…`:                        `x s3cr\"…`, // 6 bytes: too short to be a secret's cut
		`"text"`:                           `"text"`,
	} {
		if got := scrub(in, vals); got != want {
			t.Errorf("scrub(%s) = %s, want %s", in, got, want)
		}
	}
	nested := `{"k":"{\"inner\":\"s3cr\\\"et-\\u00fc-😀\"}"}`
	got := string(scrubJSON([]byte(nested), vals, 0))
	if !json.Valid([]byte(got)) || strings.Contains(got, "s3cr") {
		t.Errorf("nested: %s", got)
	}
}

// FuzzRedactJSON: scrubbing a valid JSON document keeps it valid, keeps
// every member name, number and literal, and leaves no decoded secret.
func FuzzRedactJSON(f *testing.F) {
	for _, seed := range []string{`{"ok":true,"n":12345678,"s":"x Bearer Kan4ry\/Tok3n-QQ7 y"}`, `["\u0042earer Kan4ry/Tok3n-QQ7…"]`,
		`{"Bearer Kan4ry/Tok3n-QQ7":"Kan4ry/Tok3n-QQ7"}`, `"{\"a\":\"Kan4ry\\\/Tok3n-QQ7\"}"`, `[1,2.5e3,null,false,{}]`} {
		f.Add([]byte(seed))
	}
	r := &redactor{}
	r.add(kanary)
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		out := r.json(b)
		if !json.Valid(out) {
			t.Fatalf("scrubbed %s into invalid JSON %s", b, out)
		}
		var in, got any
		_ = json.Unmarshal(b, &in)
		_ = json.Unmarshal(out, &got)
		if !sameShape(in, got) {
			t.Fatalf("scrubbing changed more than string values: %s → %s", b, out)
		}
		if s, ok := got.(string); ok && strings.Contains(s, "Kan4ry/Tok3n-QQ7") {
			t.Fatalf("secret left in %s", out)
		}
	})
}

// sameShape compares two decoded JSON values, treating all strings as equal.
func sameShape(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if w, ok := bm[k]; !ok || !sameShape(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameShape(a[i], bs[i]) {
				return false
			}
		}
		return true
	case string:
		_, ok := b.(string)
		return ok
	}
	return a == b
}

// progressFrame is a 4 KiB notification frame, typical of the frame path.
var progressFrame = []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"srv","data":{"msg":"` +
	strings.Repeat("lorem ipsum dolor sit amet ", 150) + `","n":42,"ok":true}}}`)

// BenchmarkRedactFrame measures scrubbing one 4 KiB frame with one secret
// configured: clean (the common case) and echoing the secret.
func BenchmarkRedactFrame(b *testing.B) {
	r := &redactor{}
	r.add(kanary)
	hit := bytes.Replace(progressFrame, []byte("lorem"), []byte(kanary), 1)
	for name, frame := range map[string][]byte{"clean": progressFrame, "echo": hit} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				_ = r.json(frame)
			}
		})
	}
}

// TestCheckReceived: when redaction changed structuredContent, the
// outputSchema's verdict is taken on the value as received (a pattern the
// secret matches and "[REDACTED]" does not), and a violation's message,
// which quotes the value, is redacted. A result redaction did not change
// gets no verdict: its recorded copy is the value as received.
func TestCheckReceived(t *testing.T) {
	echo := func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		b, _ := json.Marshal(map[string]string{"auth": c.Header.Get("Authorization")})
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: json.RawMessage(b)}, nil
	}
	plain := func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: json.RawMessage(`{"auth":"none"}`)}, nil
	}
	schema := func(p string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{"auth":{"type":"string","pattern":"` + p + `"}}}`)
	}
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "echo", Handler: echo}, mcptest.ToolDef{Name: "plain", Handler: plain})
	s := connect(t, secretClient(t, srv, kanary), nil)
	for _, tc := range []struct {
		tool, pattern string
		want          *OutputCheck
	}{{"echo", "^Bearer ", &OutputCheck{}}, {"echo", "^Basic ", &OutputCheck{Kind: KindInvalidOutput}}, {"plain", "^Bearer ", nil}} {
		res, err := s.CallTool(context.Background(), CallRequest{Tool: tc.tool}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateOutput(Tool{Name: tc.tool, OutputSchema: schema("^Bearer ")}, res.StructuredContent); tc.tool == "echo" && err == nil {
			t.Fatalf("the redacted copy %s passes ^Bearer: the test shows nothing", res.StructuredContent)
		}
		CheckReceived(context.Background(), Tool{Name: tc.tool, OutputSchema: schema(tc.pattern)}, res)
		switch got := res.Received; {
		case (got == nil) != (tc.want == nil):
			t.Fatalf("%s %s: verdict %+v, want %+v", tc.tool, tc.pattern, got, tc.want)
		case got != nil && got.Kind != tc.want.Kind:
			t.Fatalf("%s %s: verdict %+v, want kind %q", tc.tool, tc.pattern, got, tc.want.Kind)
		case got != nil:
			noKanary(t, "verdict message", got.Message)
			if (got.Err() == nil) != (tc.want.Kind == "") {
				t.Fatalf("%s %s: Err() = %v", tc.tool, tc.pattern, got.Err())
			}
		}
	}
}
