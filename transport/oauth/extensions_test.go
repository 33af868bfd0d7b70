package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// extServer is an authorization server and a protected resource on one
// loopback origin, for the extensions: client credentials (basic, post,
// private_key_jwt verified against pub) and DPoP (proofs verified, nonces
// demanded when nonce is set). It counts what it saw.
type extServer struct {
	*httptest.Server
	method                               string            // the token endpoint auth method it advertises and accepts
	pub                                  crypto.PublicKey  // the client's key, for private_key_jwt
	dpop                                 bool              // advertise DPoP
	nonce                                bool              // demand DPoP nonces at the token endpoint and the resource
	mu                                   sync.Mutex        //
	tokens                               map[string]string // access token → the DPoP jkt it is bound to ("" = bearer)
	issued                               int
	asNonceChallenges, rsNonceChallenges int
	resourceOK                           int
	errs                                 []string
}

func newExtServer(t *testing.T, method string, pub crypto.PublicKey, dpop, nonce bool) *extServer {
	s := &extServer{method: method, pub: pub, dpop: dpop, nonce: nonce, tokens: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": s.URL + "/mcp", "authorization_servers": []string{s.URL}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		m := map[string]any{"issuer": s.URL, "token_endpoint": s.URL + "/token", "grant_types_supported": []string{"client_credentials"},
			"token_endpoint_auth_methods_supported": []string{method}, "token_endpoint_auth_signing_alg_values_supported": []string{"ES256"}}
		if dpop {
			m["dpop_signing_alg_values_supported"] = []string{"ES256"}
		}
		_ = json.NewEncoder(w).Encode(m)
	})
	mux.HandleFunc("/token", s.token)
	mux.HandleFunc("/mcp", s.resource)
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *extServer) fail(w http.ResponseWriter, status int, code, why string) {
	s.errs = append(s.errs, why)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"error":%q}`, code)
}

// checkProof verifies a DPoP proof for method on target and returns its
// key's thumbprint and claims.
func checkProof(proof, method, target string) (string, dpopClaims, error) {
	var c dpopClaims
	sig, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return "", c, err
	}
	h := sig.Signatures[0].Protected
	if h.ExtraHeaders["typ"] != "dpop+jwt" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		return "", c, fmt.Errorf("bad proof header %+v", h)
	}
	payload, err := sig.Verify(h.JSONWebKey)
	if err != nil {
		return "", c, err
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", c, err
	}
	if c.HTM != method || c.HTU != target || c.JTI == "" {
		return "", c, fmt.Errorf("proof claims %+v for %s %s", c, method, target)
	}
	tp, _ := h.JSONWebKey.Thumbprint(crypto.SHA256)
	return base64.RawURLEncoding.EncodeToString(tp), c, nil
}

func (s *extServer) token(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = r.ParseForm()
	f := r.PostForm
	id, secret, basic := r.BasicAuth()
	switch s.method {
	case "client_secret_basic":
		if !basic || id != "cc-client" || secret != "cc-secret-value" || f.Get("client_secret") != "" {
			s.fail(w, 401, "invalid_client", "want client_secret_basic")
			return
		}
	case "client_secret_post":
		if basic || f.Get("client_id") != "cc-client" || f.Get("client_secret") != "cc-secret-value" {
			s.fail(w, 401, "invalid_client", "want client_secret_post")
			return
		}
	case "private_key_jwt":
		tok, err := jwt.ParseSigned(f.Get("client_assertion"), []jose.SignatureAlgorithm{jose.ES256})
		var cl jwt.Claims
		if err == nil {
			err = tok.Claims(s.pub, &cl)
		}
		if err == nil {
			err = cl.Validate(jwt.Expected{Issuer: "cc-client", Subject: "cc-client", AnyAudience: jwt.Audience{s.URL}})
		}
		if err != nil || f.Get("client_assertion_type") != jwtBearerAssertion || basic {
			s.fail(w, 401, "invalid_client", fmt.Sprintf("client assertion: %v", err))
			return
		}
	}
	if f.Get("grant_type") != "client_credentials" || f.Get("resource") != s.URL+"/mcp" {
		s.fail(w, 400, "invalid_request", "want client_credentials with the resource")
		return
	}
	jkt := ""
	if p := r.Header.Get("DPoP"); p != "" {
		tp, c, err := checkProof(p, http.MethodPost, s.URL+"/token")
		if err != nil {
			s.fail(w, 400, "invalid_dpop_proof", err.Error())
			return
		}
		if s.nonce && c.Nonce != "as-nonce" {
			s.asNonceChallenges++
			w.Header().Set("DPoP-Nonce", "as-nonce")
			s.fail(w, 400, "use_dpop_nonce", "as nonce")
			s.errs = s.errs[:len(s.errs)-1]
			return
		}
		jkt = tp
	} else if s.dpop {
		s.fail(w, 400, "invalid_dpop_proof", "no proof at the token endpoint")
		return
	}
	s.issued++
	at, typ := fmt.Sprintf("at-%d", s.issued), "Bearer"
	if jkt != "" {
		typ = "DPoP"
	}
	s.tokens[at] = jkt
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": at, "token_type": typ, "expires_in": 3600})
}

func (s *extServer) resource(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	jkt, ok := s.tokens[tok]
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+s.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(401)
		return
	}
	if jkt != "" {
		tp, c, err := checkProof(r.Header.Get("DPoP"), r.Method, s.URL+"/mcp")
		sum := sha256.Sum256([]byte(tok))
		switch {
		case scheme != "DPoP" || err != nil || tp != jkt || c.ATH != base64.RawURLEncoding.EncodeToString(sum[:]):
			s.fail(w, 401, "invalid_token", fmt.Sprintf("resource proof: scheme %s, %v, bound %v", scheme, err, tp == jkt))
			return
		case s.nonce && c.Nonce != "rs-nonce":
			s.rsNonceChallenges++
			w.Header().Set("DPoP-Nonce", "rs-nonce")
			w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
			w.WriteHeader(401)
			return
		}
	}
	s.resourceOK++
	w.WriteHeader(200)
}

// post sends one request to the resource as the transport does: a 401
// answered by OnUnauthorized and re-sent, at most twice (a credential
// refresh, a DPoP nonce).
func post(t *testing.T, c *Client, u string) int {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{}`))
		if err := c.Authorize(ctx, req); err != nil {
			t.Fatalf("authorize: %v", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || i == 2 {
			return resp.StatusCode
		}
		if err := c.OnUnauthorized(ctx, resp); err != nil {
			t.Fatalf("on 401: %v", err)
		}
	}
	return 0
}

func ecKeyPEM(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return k, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TestClientCredentials_AuthMethods: the client credentials grant
// authenticates as the server's metadata says (client_secret_basic,
// client_secret_post, or an RFC 7523 assertion signed with the private
// key), sends the resource, and a second request reuses the token.
func TestClientCredentials_AuthMethods(t *testing.T) {
	key, keyPEM := ecKeyPEM(t)
	for _, method := range []string{"client_secret_basic", "client_secret_post", "private_key_jwt"} {
		t.Run(method, func(t *testing.T) {
			s := newExtServer(t, method, &key.PublicKey, false, false)
			cfg := Config{Grant: GrantClientCredentials, ClientID: "cc-client"}
			if method == "private_key_jwt" {
				cfg.PrivateKey = keyPEM
			} else {
				cfg.ClientSecret = "cc-secret-value"
			}
			store := NewMemStore()
			c, err := NewClient(s.URL+"/mcp", cfg, store, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if st := post(t, c, s.URL+"/mcp"); st != 200 {
					t.Fatalf("request %d: status %d (server: %v)", i, st, s.errs)
				}
			}
			if s.issued != 1 || s.resourceOK != 2 || len(s.errs) != 0 {
				t.Fatalf("issued %d tokens, %d requests served, errors %v; want 1, 2, none", s.issued, s.resourceOK, s.errs)
			}
			for _, k := range store.Keys() {
				if cr, _ := store.Load(context.Background(), k); cr.ClientSecret != "" {
					t.Fatal("the configured client secret was stored with the token")
				}
			}
		})
	}
}

// TestDPoP_NoncesAndKeyKept: with an authorization server advertising
// DPoP, the token request carries a proof (retried with the server's
// nonce), the token is presented with the DPoP scheme and a fresh proof
// bound to it (ath), retried with the resource's nonce; the key is kept
// in the Store, so another Client on the same Store (another process)
// proves possession with it and needs no new token.
func TestDPoP_NoncesAndKeyKept(t *testing.T) {
	s := newExtServer(t, "client_secret_basic", nil, true, true)
	store := NewMemStore()
	cfg := Config{Grant: GrantClientCredentials, ClientID: "cc-client", ClientSecret: "cc-secret-value"}
	c, err := NewClient(s.URL+"/mcp", cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := post(t, c, s.URL+"/mcp"); st != 200 {
		t.Fatalf("status %d (server: %v)", st, s.errs)
	}
	if s.issued != 1 || s.asNonceChallenges != 1 || s.rsNonceChallenges != 1 || len(s.errs) != 0 {
		t.Fatalf("issued %d, AS nonce challenges %d, RS nonce challenges %d, errors %v; want 1, 1, 1, none", s.issued, s.asNonceChallenges, s.rsNonceChallenges, s.errs)
	}
	keys := store.Keys()
	if len(keys) != 1 {
		t.Fatalf("stored keys %v", keys)
	}
	cr, _ := store.Load(context.Background(), keys[0])
	if len(cr.DPoPKey) == 0 || !strings.EqualFold(cr.TokenType, "dpop") {
		t.Fatalf("stored credentials %v: want the DPoP key and a DPoP token", cr)
	}
	// Another process: a new Client over the same store, nonces unknown.
	c2, err := NewClient(s.URL+"/mcp", cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := post(t, c2, s.URL+"/mcp"); st != 200 || s.issued != 1 {
		t.Fatalf("second client: status %d, tokens issued %d (server: %v); want 200 with the stored token and key", st, s.issued, s.errs)
	}
}

// TestJWTBearer_WorkloadAndIDJAG: the jwt-bearer grant sends the workload
// JWT as the assertion (workload identity federation); with IDJAG the
// user's ID token is first exchanged at the IdP (RFC 8693, audience the
// issuer, resource the MCP server) and the ID-JAG it returns is the
// assertion, the client authenticating with its secret. A refused grant
// is final: one token request, no other grant tried.
func TestJWTBearer_WorkloadAndIDJAG(t *testing.T) {
	var mu sync.Mutex
	var asForms, idpForms []map[string]string
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": base + "/mcp", "authorization_servers": []string{base}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": base, "token_endpoint": base + "/token",
			"grant_types_supported": []string{string(GrantJWTBearer)}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
	})
	flat := func(r *http.Request) map[string]string {
		_ = r.ParseForm()
		m := map[string]string{}
		for k := range r.PostForm {
			m[k] = r.PostForm.Get(k)
		}
		if id, sec, ok := r.BasicAuth(); ok {
			m["basic"] = id + ":" + sec
		}
		return m
	}
	mux.HandleFunc("/idp/token", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		idpForms = append(idpForms, flat(r))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"id-jag-value","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","token_type":"N_A"}`))
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		f := flat(r)
		mu.Lock()
		asForms = append(asForms, f)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if f["assertion"] == "expired-jwt" {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"at-1","token_type":"Bearer","expires_in":3600}`))
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer at-1" {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(200)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base = srv.URL
	workload := func(jwt string) ClientOption {
		return WithAssertion(func(context.Context, string, string) (string, error) { return jwt, nil })
	}

	c, err := NewClient(base+"/mcp", Config{Grant: GrantJWTBearer, ClientID: "wl"}, NewMemStore(), nil, workload("workload-jwt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := post(t, c, base+"/mcp"); st != 200 {
		t.Fatalf("workload: status %d", st)
	}
	if f := asForms[0]; f["grant_type"] != string(GrantJWTBearer) || f["assertion"] != "workload-jwt" || f["client_id"] != "wl" || f["resource"] != base+"/mcp" || f["basic"] != "" {
		t.Fatalf("workload token request %v", f)
	}

	idToken := func(context.Context) (string, error) { return "user-id-token", nil }
	cfg := Config{Grant: GrantJWTBearer, ClientID: "ent", ClientSecret: "ent-secret-value"}
	c, err = NewClient(base+"/mcp", cfg, NewMemStore(), nil, WithAssertion(IDJAG(base+"/idp/token", "idp-client", idToken, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if st := post(t, c, base+"/mcp"); st != 200 {
		t.Fatalf("enterprise: status %d", st)
	}
	want := map[string]string{"grant_type": grantTokenExch, "subject_token": "user-id-token", "subject_token_type": tokenTypeIDToken,
		"requested_token_type": tokenTypeIDJAG, "audience": base, "resource": base + "/mcp", "client_id": "idp-client"}
	for k, v := range want {
		if idpForms[0][k] != v {
			t.Fatalf("IdP exchange %s = %q, want %q (%v)", k, idpForms[0][k], v, idpForms[0])
		}
	}
	if f := asForms[1]; f["assertion"] != "id-jag-value" || f["basic"] != "ent:ent-secret-value" {
		t.Fatalf("enterprise token request %v: want the ID-JAG with client_secret_basic", f)
	}

	c, err = NewClient(base+"/mcp", Config{Grant: GrantJWTBearer, ClientID: "wl"}, NewMemStore(), nil, workload("expired-jwt"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := c.OnUnauthorized(context.Background(), resp); err == nil || !strings.Contains(err.Error(), "invalid_grant") || strings.Contains(err.Error(), "expired-jwt") {
		t.Fatalf("refused assertion: %v; want invalid_grant, without the assertion", err)
	}
	if len(asForms) != 3 {
		t.Fatalf("token requests %d; want 3 (a refusal is not retried)", len(asForms))
	}
}
