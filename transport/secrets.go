package transport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
)

// SecretRef says where a header value comes from; resolved at dispatch time, never stored.
type SecretRef struct {
	Env  string `json:"env,omitempty" yaml:"env,omitempty"`
	File string `json:"file,omitempty" yaml:"file,omitempty"`
}

// maxSecretFileBytes bounds a secret file.
const maxSecretFileBytes = 64 << 10

// Redacted is what every resolved secret value is replaced by in frames and errors.
const Redacted = "[REDACTED]"

// resolve returns the secret's value. Policy violations are KindPolicyDenied;
// a missing or empty value is KindUnauthorized. The value never appears in
// the returned error.
func (r SecretRef) resolve(p Policy, getenv func(string) string) (string, error) {
	switch {
	case r.Env != "" && r.File != "":
		return "", policyErr("secret reference names both env %q and file %q", r.Env, r.File)
	case r.Env != "":
		if !slices.Contains(p.EnvironmentAllowlist, r.Env) {
			return "", policyErr("env %q is not in the environment allowlist", r.Env)
		}
		v := getenv(r.Env)
		if v == "" {
			return "", &Error{Op: "secret", Kind: KindUnauthorized, Err: fmt.Errorf("env %q is empty or unset", r.Env)}
		}
		return v, nil
	case r.File != "":
		return readSecretFile(p, r.File)
	}
	return "", policyErr("empty secret reference")
}

func readSecretFile(p Policy, name string) (string, error) {
	if !filepath.IsAbs(name) {
		return "", policyErr("secret file %q is not an absolute path", name)
	}
	real, err := filepath.EvalSymlinks(name)
	if err != nil {
		return "", &Error{Op: "secret", Kind: KindUnauthorized, Err: fmt.Errorf("secret file %q: %w", name, err)}
	}
	under := false
	for _, root := range p.SecretFileRoots {
		rr, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(rr, real)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != "." {
			under = true
			break
		}
	}
	if !under {
		return "", policyErr("secret file %q is not under the secret file roots %v", name, p.SecretFileRoots)
	}
	f, err := os.Open(real)
	if err != nil {
		return "", &Error{Op: "secret", Kind: KindUnauthorized, Err: fmt.Errorf("secret file %q: %w", name, err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", &Error{Op: "secret", Kind: KindUnauthorized, Err: fmt.Errorf("secret file %q: %w", name, err)}
	}
	if !st.Mode().IsRegular() {
		return "", policyErr("secret file %q is not a regular file (%s)", name, st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return "", &Error{Op: "secret", Kind: KindUnauthorized, Err: fmt.Errorf("secret file %q: %w", name, err)}
	}
	if len(b) > maxSecretFileBytes {
		return "", policyErr("secret file %q is larger than %d bytes", name, maxSecretFileBytes)
	}
	s := strings.TrimSuffix(string(b), "\n")
	s = strings.TrimSuffix(s, "\r")
	if s == "" {
		return "", &Error{Op: "secret", Kind: KindUnauthorized, Err: fmt.Errorf("secret file %q is empty", name)}
	}
	return s, nil
}

// redactor remembers every secret value resolved by a client, so that it can
// be scrubbed from anything handed to a sink or put in an error.
type redactor struct {
	mu     sync.Mutex
	values []string // longest first
}

func (r *redactor) add(v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	forms := []string{v}
	// The token of "Bearer xyz" alone is as secret as the whole value.
	if f := strings.Fields(v); len(f) > 1 {
		forms = append(forms, f[len(f)-1])
	}
	for _, s := range forms {
		for _, form := range jsonForms(s) {
			if form != "" && !slices.Contains(r.values, form) {
				r.values = append(r.values, form)
			}
		}
	}
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
}

// jsonForms returns s plus the ways JSON encoders may escape it.
func jsonForms(s string) []string {
	out := []string{s}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	plain := strings.TrimSuffix(b.String(), "\n")
	out = append(out, plain[1:len(plain)-1])
	html, _ := json.Marshal(s)
	out = append(out, string(html[1:len(html)-1]))
	return out
}

func (r *redactor) string(s string) string {
	if r == nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	return s
}

// json scrubs a JSON message; if scrubbing broke its syntax the result is the
// scrubbed text as a JSON string, so a frame body is always valid JSON.
func (r *redactor) json(b []byte) json.RawMessage {
	if r == nil || len(b) == 0 {
		return b
	}
	r.mu.Lock()
	hit := false
	for _, v := range r.values {
		if bytes.Contains(b, []byte(v)) {
			hit = true
			break
		}
	}
	r.mu.Unlock()
	if !hit {
		return slices.Clone(b)
	}
	s := r.string(string(b))
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	q, _ := json.Marshal(s)
	return q
}

// error scrubs err's message; the result keeps err in its chain only when
// nothing had to be scrubbed.
func (r *redactor) error(err error) error {
	if err == nil || r == nil {
		return err
	}
	msg := err.Error()
	if red := r.string(msg); red != msg {
		return redactedError(red)
	}
	return err
}

type redactedError string

func (e redactedError) Error() string { return string(e) }
