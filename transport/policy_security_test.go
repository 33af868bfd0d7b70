package transport

import (
	"bufio"
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// ssrfRow is one line of testdata/ssrf.txt.
type ssrfRow struct {
	url                 string
	allowed, allowedPvt bool
}

// readSSRFTable reads testdata/ssrf.txt, the table shared with the static
// checker's test in cmd/agentctl.
func readSSRFTable(t *testing.T) []ssrfRow {
	t.Helper()
	f, err := os.Open("testdata/ssrf.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []ssrfRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			t.Fatalf("ssrf.txt: bad line %q", line)
		}
		rows = append(rows, ssrfRow{fs[0], fs[1] == "allow", fs[2] == "allow"})
	}
	if len(rows) < 60 {
		t.Fatalf("ssrf.txt has %d rows", len(rows))
	}
	return rows
}

// TestPolicy_SSRFTable checks every row with allowPrivate false and true:
// a refusal is policy_denied and happens in New, before any network I/O.
func TestPolicy_SSRFTable(t *testing.T) {
	for _, row := range readSSRFTable(t) {
		for _, pvt := range []bool{false, true} {
			want := row.allowed
			if pvt {
				want = row.allowedPvt
			}
			pol := Policy{AllowedSchemes: []string{"http", "https"}, AllowPrivate: pvt}
			_, err := New(Config{URL: row.url, Policy: pol})
			if cerr := CheckURL(pol, row.url); (cerr == nil) != (err == nil) {
				t.Errorf("CheckURL(%q) = %v but New: %v", row.url, cerr, err)
			}
			if (err == nil) != want {
				t.Errorf("New(%q, allowPrivate=%v): err = %v, want allowed %v", row.url, pvt, err, want)
			}
			if err != nil && KindOf(err) != KindPolicyDenied {
				t.Errorf("New(%q): kind %q, want policy_denied", row.url, KindOf(err))
			}
		}
	}
}

// TestPolicy_ResolvedPrivateRefusedBeforeDial: a host name whose resolver
// answers any private address of the table is refused at Connect, with
// nothing dialed and nothing sent; with allowPrivate it connects.
func TestPolicy_ResolvedPrivateRefusedBeforeDial(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	u, _ := url.Parse(srv.URL)
	n := 0
	for _, row := range readSSRFTable(t) {
		ru, err := url.Parse(row.url)
		if err != nil || row.allowed || !row.allowedPvt {
			continue
		}
		addr, err := netip.ParseAddr(ru.Hostname())
		if err != nil {
			continue
		}
		n++
		for _, pvt := range []bool{false, true} {
			r := &fakeResolver{answers: [][]string{{"203.0.113.7", addr.WithZone("").String()}}}
			c, err := New(Config{URL: "http://svc.example:" + u.Port() + "/mcp",
				Policy: Policy{AllowedSchemes: []string{"http"}, Resolver: r, AllowPrivate: pvt}})
			if err != nil {
				t.Fatal(err)
			}
			asked := redirectDial(c, u.Host)
			before := len(srv.Stats().Requests)
			s, err := c.Connect(context.Background(), nil)
			if pvt {
				if err != nil {
					t.Errorf("%s with allowPrivate: %v", addr, err)
				} else {
					_ = s.Close(context.Background())
				}
				continue
			}
			if KindOf(err) != KindPolicyDenied || asError(t, err).Sent {
				t.Errorf("resolved to %s: err = %v, want policy_denied before sending", addr, err)
			}
			if len(*asked) != 0 || len(srv.Stats().Requests) != before {
				t.Errorf("resolved to %s: dialed %v", addr, *asked)
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d private literal rows", n)
	}
}

// TestPolicy_RebindingPinnedAcrossSessions: the resolver answers public,
// then loopback; every later session of the same client, and every new
// connection, goes to the first (checked) answer only.
func TestPolicy_RebindingPinnedAcrossSessions(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	u, _ := url.Parse(srv.URL)
	r := &fakeResolver{answers: [][]string{{"203.0.113.9"}, {"127.0.0.1"}, {"10.0.0.1"}}}
	c, err := New(Config{URL: "http://rebind.example:" + u.Port() + "/mcp", Policy: Policy{AllowedSchemes: []string{"http"}, Resolver: r}})
	if err != nil {
		t.Fatal(err)
	}
	asked := redirectDial(c, u.Host)
	for range 3 {
		s := connect(t, c, nil)
		if _, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil); err != nil {
			t.Fatal(err)
		}
		_ = s.Close(context.Background())
		c.http.CloseIdleConnections()
	}
	if r.calls != 1 {
		t.Errorf("resolver consulted %d times, want 1", r.calls)
	}
	for _, a := range *asked {
		if a != "203.0.113.9:"+u.Port() {
			t.Errorf("dialed %s, want only the first answer", a)
		}
	}
}

// TestPolicy_RedirectToLoopbackNeverFollowed: a public server answering
// 301/302/303/307/308 to a loopback URL is an http_status error; the
// loopback server sees nothing, even when the caller injects an
// http.Client that would follow redirects.
func TestPolicy_RedirectToLoopbackNeverFollowed(t *testing.T) {
	target := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, injected := range []bool{false, true} {
			first := mcptest.Start(t, mcptest.Options{}, okTool("a"))
			first.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: code, Location: target.URL})
			fu, _ := url.Parse(first.URL)
			cfg := Config{URL: "http://public.example:" + fu.Port() + "/mcp", MaxResumeDelay: -1,
				Policy: Policy{AllowedSchemes: []string{"http"}, Resolver: &fakeResolver{answers: [][]string{{"203.0.113.9"}}}}}
			if injected {
				cfg.URL, cfg.Policy.AllowPrivate = first.URL, true
				cfg.HTTPClient = &http.Client{} // follows redirects by default
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !injected {
				redirectDial(c, fu.Host)
			}
			s := connect(t, c, nil)
			_, err = s.CallTool(context.Background(), CallRequest{Tool: "a"}, nil)
			e := wantKind(t, err, KindHTTPStatus)
			if e.Status != code || !strings.Contains(e.Error(), "not followed") {
				t.Errorf("%d (injected %v): %v", code, injected, e)
			}
			if n := len(target.Stats().Requests); n != 0 {
				t.Fatalf("%d (injected %v): loopback target saw %d requests", code, injected, n)
			}
		}
	}
}
