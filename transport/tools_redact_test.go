package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestConnectAndListTools_RedactEveryRemoteString (issue 27 item 1): a
// server echoing the Authorization value in every string of its
// initialize result and tools/list gets it into nothing a session or a
// catalog keeps (a client that sent no secret keeps it all, so the test
// is not vacuous), while what decides reads the tool as received: its
// digest equals the one computed without redaction, the arguments and the
// output validate against the schemas as sent, and validation messages
// are redacted. A tool whose name carries the secret is not listed, and a
// warning says so with the name redacted.
func TestConnectAndListTools_RedactEveryRemoteString(t *testing.T) {
	const secret = "Leak3d-Cr3dential-9Q"
	init, tools := mcptest.LeakyMetadata("Authorization", secret, "meta")
	srv := mcptest.Start(t, mcptest.Options{Initialize: init}, tools...)
	ctx := context.Background()

	open := func(c *Client) (*Session, *Catalog) {
		s := connect(t, c, nil)
		cat, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s, cat
	}
	sess, cat := open(secretClient(t, srv, secret))
	// The same server, told the secret by a header agentctl does not know
	// as one: what it echoes is kept as sent.
	_, plainCat := open(newClient(t, srv.URL, func(c *Config) {
		c.Headers = map[string]SecretRef{"Authorization": {Env: "MCP_TOKEN"}}
		c.Policy.EnvironmentAllowlist = []string{"MCP_TOKEN"}
		c.Getenv = func(string) string { return "short" + "-but-not-the-secret" }
	}))

	kept := func(s *Session, c *Catalog) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s %s\n", s.ProtocolVersion, s.ServerInfo, s.Capabilities, s.Instructions)
		for _, tl := range c.Tools {
			fmt.Fprintf(&b, "%s %s %s %s %s %s %s\n", tl.Name, tl.Title, tl.Description, tl.InputSchema, tl.OutputSchema, tl.Annotations, tl.Execution)
		}
		b.WriteString(strings.Join(c.Warnings, "\n"))
		return b.String()
	}
	got := kept(sess, cat)
	if strings.Contains(got, secret) {
		t.Fatalf("the session or catalog keeps the secret:\n%s", got)
	}
	if n := strings.Count(got, Redacted); n < 25 {
		t.Fatalf("%d redaction markers, want one per echoed string:\n%s", n, got)
	}
	// Every member of what is kept was scrubbed, none dropped.
	var info map[string]any
	if err := json.Unmarshal(sess.ServerInfo, &info); err != nil || info["name"] != Redacted || info["websiteUrl"] != "https://mcp.example/"+Redacted {
		t.Fatalf("serverInfo %s (%v)", sess.ServerInfo, err)
	}
	if sess.Instructions != Redacted || !strings.Contains(string(sess.Capabilities), `"echo":{"v":"`+Redacted+`"}`) {
		t.Fatalf("instructions %q, capabilities %s", sess.Instructions, sess.Capabilities)
	}

	want, ok := plainCat.Find("meta")
	if len(cat.Tools) != 1 || cat.Tools[0].Name != "meta" || !ok || len(plainCat.Tools) != 2 {
		t.Fatalf("listed %d tools (%+v), want meta alone", len(cat.Tools), cat.Tools)
	}
	if len(cat.Warnings) != 1 || cat.Warnings[0] != `tool "named-`+Redacted+`": skipped: its name carries a secret value agentctl sent; it cannot be called` {
		t.Fatalf("warnings %q", cat.Warnings)
	}
	if _, ok := cat.Find("named-" + secret); ok {
		t.Fatal("the tool whose name is the secret can be found")
	}
	tool := cat.Tools[0]
	if !strings.Contains(string(want.InputSchema), secret) {
		t.Fatalf("the plain client's schema does not carry the secret: %s", want.InputSchema)
	}
	if tool.Digest() != want.Digest() {
		t.Fatalf("digest %s, want the digest as received %s", tool.Digest(), want.Digest())
	}
	// A tool rebuilt from its record keeps the recorded digest.
	rebuilt := Tool{Name: tool.Name, InputSchema: tool.InputSchema, OutputSchema: tool.OutputSchema, Execution: tool.Execution}
	if rebuilt.Digest() == want.Digest() || rebuilt.WithDigest(tool.Digest()).Digest() != want.Digest() {
		t.Fatalf("rebuilt digest %s, WithDigest %s", rebuilt.Digest(), rebuilt.WithDigest(tool.Digest()).Digest())
	}

	// Decisions on the schemas as sent: the secret is an allowed value of
	// q, and "[REDACTED]" a valid output (its schema says "not the secret").
	if err := ValidateArguments(tool, json.RawMessage(fmt.Sprintf(`{"q":%q}`, secret))); err != nil {
		t.Fatalf("arguments valid against the schema as sent: %v", err)
	}
	if err := ValidateOutput(tool, json.RawMessage(`{"v":"`+Redacted+`"}`)); err != nil {
		t.Fatalf("output valid against the schema as sent: %v", err)
	}
	if err := ValidateOutput(rebuilt, json.RawMessage(`{"v":"`+Redacted+`"}`)); err == nil {
		t.Fatal("the redacted schema accepts the output: the test shows nothing")
	}
	if tool.TaskSupport() != TaskSupportForbidden || !tool.OutputSchemaRedacted() {
		t.Fatalf("task support %s, output schema redacted %v", tool.TaskSupport(), tool.OutputSchemaRedacted())
	}
	// A violation quotes the enum as sent: redacted.
	err := ValidateArguments(tool, json.RawMessage(`{"q":"b"}`))
	e := wantKind(t, err, KindInvalidArguments)
	if strings.Contains(e.Error(), secret) || !strings.Contains(e.Error(), Redacted) {
		t.Fatalf("violation message: %v", e)
	}
	vs, err := ArgumentViolations(tool, json.RawMessage(`{"q":"b"}`), nil)
	if err != nil || len(vs) == 0 || strings.Contains(fmt.Sprint(vs), secret) {
		t.Fatalf("violations %v, %v", vs, err)
	}

	// CheckReceived records the verdict on the schema as sent, redaction
	// having changed the schema and not the value.
	res := &CallResult{StructuredContent: json.RawMessage(`{"v":"` + Redacted + `"}`), red: tool.red}
	CheckReceived(ctx, tool, res)
	if res.Received == nil || res.Received.Kind != "" {
		t.Fatalf("received verdict %+v, want valid", res.Received)
	}
}
