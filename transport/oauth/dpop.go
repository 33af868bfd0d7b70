package oauth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// DPoP (RFC 9449; the MCP extension io.modelcontextprotocol/auth/dpop).
//
// A DPoP key (ECDSA P-256, ES256) is generated once per credential set and
// kept with it in the Store (Credentials.DPoPKey, a private JWK: sealed with
// the other secrets, never logged), so the tokens it bound stay usable
// across processes and workers. Every token request carries a proof
// (htm, htu, iat, jti); every request to the MCP server a proof that also
// carries ath (the access token's hash). A server's use_dpop_nonce
// challenge (400 at the token endpoint, 401 at the MCP server) is answered
// by retrying with the nonce it sent in DPoP-Nonce; the nonces are kept per
// origin for later proofs.

// dpopAlg is the only proof algorithm agentctl signs with.
const dpopAlg = jose.ES256

// dpopKey is one DPoP key pair.
type dpopKey struct {
	priv *ecdsa.PrivateKey
}

func newDPoPKey() (*dpopKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("oauth: dpop key: %w", err)
	}
	return &dpopKey{priv: k}, nil
}

// parseDPoPKey reads a private JWK stored by marshal.
func parseDPoPKey(raw json.RawMessage) (*dpopKey, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("oauth: stored dpop key: %w", err)
	}
	k, ok := jwk.Key.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("oauth: stored dpop key is %T, want a P-256 private key", jwk.Key)
	}
	return &dpopKey{priv: k}, nil
}

// marshal is the private JWK (secret: stored only through a Store).
func (k *dpopKey) marshal() (json.RawMessage, error) {
	return jose.JSONWebKey{Key: k.priv, Algorithm: string(dpopAlg), Use: "sig"}.MarshalJSON()
}

// dpopClaims are a proof's claims (RFC 9449 §4.2).
type dpopClaims struct {
	JTI   string `json:"jti"`
	HTM   string `json:"htm"`
	HTU   string `json:"htu"`
	IAT   int64  `json:"iat"`
	ATH   string `json:"ath,omitempty"`
	Nonce string `json:"nonce,omitempty"`
}

// proof signs a fresh proof for method on target (its query and fragment
// dropped), bound to accessToken when not empty, with nonce when not empty.
func (k *dpopKey) proof(method, target, accessToken, nonce string, now time.Time) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: dpopAlg, Key: k.priv},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		return "", fmt.Errorf("oauth: dpop signer: %w", err)
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	c := dpopClaims{JTI: base64.RawURLEncoding.EncodeToString(jti), HTM: method, HTU: htu(target), IAT: now.Unix(), Nonce: nonce}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		c.ATH = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return jwt.Signed(signer).Claims(c).Serialize()
}

// htu is target without query and fragment (RFC 9449 §4.2).
func htu(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	return u.String()
}

// origin is the scheme://host of raw, the key of the nonces a server gave.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// dpopState is an Authorizer's DPoP key in use and the nonces servers gave.
type dpopState struct {
	mu     sync.Mutex
	key    *dpopKey          // the key of the credential set being obtained or used
	nonces map[string]string // origin → last DPoP-Nonce
	now    func() time.Time
}

func (s *dpopState) setKey(k *dpopKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = k
}

func (s *dpopState) current() *dpopKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

func (s *dpopState) nonce(target string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nonces[origin(target)]
}

// noteNonce keeps the DPoP-Nonce of resp, if any; it reports whether one was given.
func (s *dpopState) noteNonce(target string, h http.Header) bool {
	n := h.Get("DPoP-Nonce")
	if n == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nonces == nil {
		s.nonces = map[string]string{}
	}
	s.nonces[origin(target)] = n
	return true
}

func (s *dpopState) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// dpopTokenTransport adds a DPoP proof to every token request (a form POST)
// and retries once with the authorization server's nonce on a
// use_dpop_nonce answer. Other requests pass through.
type dpopTokenTransport struct {
	base  http.RoundTripper
	state *dpopState
}

// RoundTrip implements http.RoundTripper.
func (t dpopTokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := t.state.current()
	if key == nil || req.Method != http.MethodPost || !strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return t.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	target := req.URL.String()
	for attempt := 0; ; attempt++ {
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		p, err := key.proof(http.MethodPost, target, "", t.state.nonce(target), t.state.clock())
		if err != nil {
			return nil, err
		}
		r.Header.Set("DPoP", p)
		resp, err := t.base.RoundTrip(r)
		if err != nil || attempt > 0 || resp.StatusCode != http.StatusBadRequest {
			if resp != nil {
				t.state.noteNonce(target, resp.Header)
			}
			return resp, err
		}
		// 400: a use_dpop_nonce error with a DPoP-Nonce header is retried
		// once with the nonce (RFC 9449 §8); anything else is the answer.
		raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		if rerr == nil && json.Unmarshal(raw, &e) == nil && e.Error == "use_dpop_nonce" && t.state.noteNonce(target, resp.Header) {
			continue
		}
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		return resp, rerr
	}
}

// errNoDPoPKey: a DPoP token without its key (a store that lost it).
var errNoDPoPKey = errors.New("oauth: a DPoP-bound token without its DPoP key; log in again")
