package transport

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// countingServer serves 200 on a loopback address ("127.0.0.2:0"),
// counting the requests it got; redirect, when set, answers 302 to it.
func countingServer(t *testing.T, addr string, redirect func() string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen on %s: %v", addr, err)
	}
	n := &atomic.Int64{}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if redirect != nil {
			http.Redirect(w, r, redirect(), http.StatusFound)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s, n
}

// TestPolicyClient (issue 31 follow-up: OAuth requests under the network
// policy): the client refuses a host outside the allowlist, a name whose
// resolved address is private (checked at connect time: DNS rebinding),
// and a redirect to a refused host, each before any request reaches the
// refused server (its count stays 0), with an error naming the host; an
// allowed destination is served.
func TestPolicyClient(t *testing.T) {
	inner, innerN := countingServer(t, "127.0.0.2:0", nil) // the "internal" service
	innerPort := inner.Listener.Addr().(*net.TCPAddr).Port
	allowed, allowedN := countingServer(t, "127.0.0.1:0", nil)
	redirector, redirN := countingServer(t, "127.0.0.1:0", func() string { return inner.URL + "/latest/meta-data" })
	allowlisted := Policy{AllowedSchemes: []string{"http"}, AllowPrivate: true, NetworkAllowlist: []string{"127.0.0.1"}}
	for _, tc := range []struct {
		name, url, want string
		p               Policy
	}{
		{"host not in allowlist", inner.URL + "/meta", `host "127.0.0.2" not in network allowlist`, allowlisted},
		{"name resolving to a private address", "http://meta.test:" + itoa(innerPort) + "/meta", `host "meta.test" resolves to private address`,
			Policy{AllowedSchemes: []string{"http"}, Resolver: &fakeResolver{answers: [][]string{{"127.0.0.2"}}}}},
		{"redirect to a refused host", redirector.URL + "/meta", `host "127.0.0.2" not in network allowlist`, allowlisted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := PolicyClient(tc.p).Get(tc.url)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("GET %s: http %d, want refused", tc.url, resp.StatusCode)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("GET %s: %v; want %q", tc.url, err, tc.want)
			}
		})
	}
	if innerN.Load() != 0 {
		t.Fatalf("the refused server got %d requests", innerN.Load())
	}
	if redirN.Load() != 1 {
		t.Fatalf("the redirecting server got %d requests, want 1", redirN.Load())
	}
	resp, err := PolicyClient(allowlisted).Get(allowed.URL + "/ok")
	if err != nil {
		t.Fatalf("allowed GET: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || allowedN.Load() != 1 {
		t.Fatalf("allowed GET: http %d, %d requests served", resp.StatusCode, allowedN.Load())
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
