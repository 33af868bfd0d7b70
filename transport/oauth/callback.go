package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// loginTimeout bounds the wait for the user to finish in the browser.
const loginTimeout = 5 * time.Minute

// callbackResult is what the authorization server redirected to the loopback.
type callbackResult struct {
	code, state, iss, err string
	hasIss                bool
}

// callback is the loopback redirect listener of one authorization.
type callback struct {
	redirectURI string
	srv         *http.Server
	results     chan callbackResult

	mu    sync.Mutex
	state string // the authorization request's; a response without it is ignored
}

// expect sets the state an authorization response must carry.
func (cb *callback) expect(state string) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	cb.state = state
}

// listen opens the loopback redirect: cfg.RedirectURI (http on a loopback
// address) or http://127.0.0.1:PORT/callback on a random port.
func (a *Authorizer) listen(ctx context.Context) (*callback, error) {
	host, path := "127.0.0.1:0", "/callback"
	if a.cfg.RedirectURI != "" {
		u, err := url.Parse(a.cfg.RedirectURI)
		if err != nil || u.Scheme != "http" || !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("%w: redirect URI %s (only http on a loopback address)", ErrInsecure, withoutQuery(a.cfg.RedirectURI))
		}
		host, path = u.Host, u.Path
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "0")
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("oauth: loopback redirect listener on %s: %w", host, err)
	}
	cb := &callback{results: make(chan callbackResult, 1)}
	cb.redirectURI = (&url.URL{Scheme: "http", Host: ln.Addr().String(), Path: path}).String()
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code") == "" && q.Get("error") == "" {
			http.Error(w, "not an authorization response", http.StatusBadRequest)
			return
		}
		cb.mu.Lock()
		want := cb.state
		cb.mu.Unlock()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(want)) != 1 {
			// Not the response to our request (a forged or stale one):
			// ignored, the wait goes on.
			http.Error(w, "unknown state", http.StatusBadRequest)
			return
		}
		res := callbackResult{code: q.Get("code"), state: q.Get("state"), iss: q.Get("iss"), hasIss: q.Has("iss"), err: q.Get("error")}
		once.Do(func() { cb.results <- res })
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "agentctl: authorization received; you may close this window.")
	})
	cb.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = cb.srv.Serve(ln) }()
	return cb, nil
}

// wait returns the authorization response, bounded by loginTimeout and ctx.
func (cb *callback) wait(ctx context.Context) (callbackResult, error) {
	t := time.NewTimer(loginTimeout)
	defer t.Stop()
	select {
	case res := <-cb.results:
		return res, nil
	case <-t.C:
		return callbackResult{}, fmt.Errorf("%w: no authorization response on %s within %s", ErrNotAuthorized, cb.redirectURI, loginTimeout)
	case <-ctx.Done():
		return callbackResult{}, fmt.Errorf("oauth: waiting for the authorization response: %w", context.Cause(ctx))
	}
}

func (cb *callback) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := cb.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = cb.srv.Close()
	}
}
