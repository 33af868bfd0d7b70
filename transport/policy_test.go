package transport

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

func TestPolicyCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url    string
		policy Policy
		ok     bool
	}{
		{"https://mcp.example.com/mcp", Policy{}, true},
		{"http://mcp.example.com/mcp", Policy{}, false}, // https only by default
		{"http://mcp.example.com/mcp", Policy{AllowedSchemes: []string{"http"}}, true},
		{"https://user:pw@mcp.example.com/mcp", Policy{}, false},
		{"file:///etc/passwd", Policy{AllowedSchemes: []string{"file"}}, false},
		{"ftp://mcp.example.com/", Policy{AllowedSchemes: []string{"ftp"}}, false},
		{"https://mcp.example.com:8443/", Policy{AllowedPorts: []int{443}}, false},
		{"https://mcp.example.com:8443/", Policy{AllowedPorts: []int{8443}}, true},
		{"https://mcp.example.com/", Policy{NetworkAllowlist: []string{"mcp.example.com"}}, true},
		{"https://evil.example.com/", Policy{NetworkAllowlist: []string{"mcp.example.com"}}, false},
		{"https://a.tools.example/", Policy{NetworkAllowlist: []string{"*.tools.example"}}, true},
		{"https://tools.example/", Policy{NetworkAllowlist: []string{"*.tools.example"}}, false},
		{"https://eviltools.example/", Policy{NetworkAllowlist: []string{"*.tools.example"}}, false},
		{"https://127.0.0.1/", Policy{}, false},
		{"https://127.0.0.1/", Policy{AllowPrivate: true}, true},
		{"https://169.254.169.254/latest/meta-data", Policy{}, false},
		{"https://10.1.2.3/", Policy{}, false},
		{"https://172.20.0.1/", Policy{}, false},
		{"https://192.168.1.1/", Policy{}, false},
		{"https://100.64.0.1/", Policy{}, false},
		{"https://0.0.0.0/", Policy{}, false},
		{"https://224.0.0.1/", Policy{}, false},
		{"https://[::1]/", Policy{}, false},
		{"https://[fd00::1]/", Policy{}, false},
		{"https://[fe80::1]/", Policy{}, false},
		{"https://[::ffff:127.0.0.1]/", Policy{}, false},
		{"https://[::ffff:169.254.169.254]/", Policy{}, false},
		{"https://[::]/", Policy{}, false},
		{"https://8.8.8.8/", Policy{}, true},
		{"https://[2001:4860:4860::8888]/", Policy{}, true},
	} {
		_, err := New(Config{URL: tc.url, Policy: tc.policy})
		if (err == nil) != tc.ok {
			t.Errorf("New(%q, %+v) error = %v, want ok %v", tc.url, tc.policy, err, tc.ok)
		}
		if err != nil && KindOf(err) != KindPolicyDenied {
			t.Errorf("New(%q): kind %q", tc.url, KindOf(err))
		}
	}
}

// fakeResolver answers from a list, one answer per lookup, and counts lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers [][]string
	calls   int
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.answers[min(r.calls, len(r.answers)-1)]
	r.calls++
	var out []net.IPAddr
	for _, s := range a {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

// redirectDial sends every pinned dial to target and records what was asked.
func redirectDial(c *Client, target string) *[]string {
	var mu sync.Mutex
	var asked []string
	c.dialer.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		asked = append(asked, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, target)
	}
	return &asked
}

func TestPolicyResolver(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	u, _ := url.Parse(srv.URL)
	t.Run("private answer refused before any byte", func(t *testing.T) {
		r := &fakeResolver{answers: [][]string{{"203.0.113.9", "10.0.0.7"}}}
		c, err := New(Config{URL: "http://mcp.test:" + u.Port() + "/mcp", Policy: Policy{AllowedSchemes: []string{"http"}, Resolver: r}})
		if err != nil {
			t.Fatal(err)
		}
		asked := redirectDial(c, u.Host)
		_, err = c.Connect(context.Background(), nil)
		e := wantKind(t, err, KindPolicyDenied)
		if e.Sent || !strings.Contains(e.Error(), "10.0.0.7") {
			t.Errorf("error %v sent %v", e, e.Sent)
		}
		if len(*asked) != 0 || len(srv.Stats().Requests) != 0 {
			t.Errorf("dialed %v; server saw %d requests", *asked, len(srv.Stats().Requests))
		}
	})
	t.Run("resolved once and pinned", func(t *testing.T) {
		r := &fakeResolver{answers: [][]string{{"203.0.113.9"}, {"127.0.0.1"}}}
		c, err := New(Config{URL: "http://mcp.test:" + u.Port() + "/mcp", Policy: Policy{AllowedSchemes: []string{"http"}, Resolver: r}})
		if err != nil {
			t.Fatal(err)
		}
		asked := redirectDial(c, u.Host)
		s := connect(t, c, nil)
		for range 3 {
			c.http.CloseIdleConnections() // force new dials
			if _, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if r.calls != 1 {
			t.Errorf("resolver consulted %d times, want 1", r.calls)
		}
		for _, a := range *asked {
			if a != "203.0.113.9:"+u.Port() {
				t.Errorf("dialed %s, want only the checked address", a)
			}
		}
		if len(*asked) < 2 {
			t.Errorf("dials = %v, want several", *asked)
		}
	})
	t.Run("loopback", func(t *testing.T) {
		if _, err := New(Config{URL: srv.URL, Policy: Policy{AllowedSchemes: []string{"http"}}}); KindOf(err) != KindPolicyDenied {
			t.Errorf("127.0.0.1 without allowPrivate: %v", err)
		}
		connect(t, newClient(t, srv.URL, nil), nil)
	})
}

const canary = "canary-5ecret-9f8e7d"

func TestSecretsNeverLeak(t *testing.T) {
	leak := mcptest.ToolDef{Name: "leak", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		_ = c.Notify("notifications/message", map[string]any{"level": "info", "data": "auth was " + c.Header.Get("Authorization")})
		return &mcptest.Result{Content: mcptest.Text("you sent " + c.Header.Get("X-Api-Key")), StructuredContent: map[string]any{"h": c.Header.Get("Authorization")}}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, leak, mcptest.EchoHeaders("echo"))
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte(canary+"-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv.URL, func(c *Config) {
		c.Headers = map[string]SecretRef{"Authorization": {Env: "TOKEN"}, "X-Api-Key": {File: file}}
		c.Policy.EnvironmentAllowlist = []string{"TOKEN"}
		c.Policy.SecretFileRoots = []string{dir}
		c.Getenv = func(k string) string { return "Bearer " + canary }
	})
	var rec recorder
	s := connect(t, c, rec.sink)
	var outs []string
	for _, tool := range []string{"leak", "echo"} {
		res, err := s.CallTool(context.Background(), CallRequest{Tool: tool}, rec.sink)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(res.Raw), string(res.Content), string(res.StructuredContent))
	}
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Body: []byte(`{"jsonrpc":"2.0","id":"` + canary + `","result":{}}`)})
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "leak"}, rec.sink)
	outs = append(outs, err.Error())
	for _, f := range rec.all() {
		outs = append(outs, string(f.Body), string(f.ID))
	}
	all := strings.Join(outs, "\n")
	if strings.Contains(all, canary) {
		t.Errorf("secret leaked:\n%s", all)
	}
	if !strings.Contains(all, Redacted) {
		t.Errorf("nothing redacted:\n%s", all)
	}
	// The server did get the real values (one trailing newline stripped from the file).
	h := srv.Stats().Requests[0].Header
	if h.Get("Authorization") != "Bearer "+canary || h.Get("X-Api-Key") != canary+"-file" {
		t.Errorf("server got %q / %q", h.Get("Authorization"), h.Get("X-Api-Key"))
	}
}

func TestSecretRefPolicy(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	inside, outside := filepath.Join(dir, "k"), filepath.Join(other, "k")
	big := filepath.Join(dir, "big")
	for p, content := range map[string]string{inside: "value-in-file\n", outside: "value-in-file", big: strings.Repeat("x", maxSecretFileBytes+1)} {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	p := Policy{EnvironmentAllowlist: []string{"OK"}, SecretFileRoots: []string{dir}}
	getenv := func(k string) string { return map[string]string{"OK": "value-in-env", "NOPE": "value-in-env"}[k] }
	for _, tc := range []struct {
		ref  SecretRef
		want string
		kind Kind
	}{
		{SecretRef{Env: "OK"}, "value-in-env", ""},
		{SecretRef{Env: "NOPE"}, "", KindPolicyDenied},
		{SecretRef{File: inside}, "value-in-file", ""},
		{SecretRef{File: outside}, "", KindPolicyDenied},
		{SecretRef{File: link}, "", KindPolicyDenied},
		{SecretRef{File: dir}, "", KindPolicyDenied},
		{SecretRef{File: big}, "", KindPolicyDenied},
		{SecretRef{File: "relative/k"}, "", KindPolicyDenied},
		{SecretRef{File: filepath.Join(dir, "missing")}, "", KindUnauthorized},
	} {
		got, err := tc.ref.resolve(p, getenv)
		if got != tc.want || KindOf(err) != tc.kind {
			t.Errorf("resolve(%+v) = %q, %v; want %q, kind %q", tc.ref, got, err, tc.want, tc.kind)
		}
	}
}
