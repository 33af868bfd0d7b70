package transport

import (
	"context"
	"net"
	"net/http"
	"time"
)

// PolicyClient returns an HTTP client for the requests a remote makes
// beside its own connection (OAuth discovery, registration and token
// requests): every request, redirects included, has its URL checked
// against p (CheckURL: scheme, port, host allowlist, a literal address),
// and every connection dials only addresses checked at connect time (a
// host name is resolved then and each answer refused when private unless
// p.AllowPrivate, so DNS rebinding cannot reach what the URL check let
// pass). No proxy; redirects are the caller's to bound (CheckRedirect).
func PolicyClient(p Policy) *http.Client {
	nd := &net.Dialer{Timeout: p.connectTimeout(), KeepAlive: 30 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, policyErr("dial address %q: %w", addr, err)
		}
		d := &pinnedDialer{policy: p, host: host, port: port, dial: nd.DialContext}
		return d.DialContext(ctx, network, addr)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		TLSHandshakeTimeout: p.connectTimeout(),
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{Transport: policyChecked{p: p, base: tr}}
}

// policyChecked refuses a request whose URL the policy refuses, before
// any connection is made.
type policyChecked struct {
	p    Policy
	base http.RoundTripper
}

// CloseIdleConnections closes the base transport's idle connections
// (http.Client.CloseIdleConnections reaches them only through this).
func (c policyChecked) CloseIdleConnections() {
	if ci, ok := c.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// RoundTrip implements http.RoundTripper.
func (c policyChecked) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, err := c.p.checkURL(req.URL.String()); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return c.base.RoundTrip(req)
}
