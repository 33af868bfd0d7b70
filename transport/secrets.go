package transport

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// Resolve returns the secret's value under policy p (getenv nil =
// os.Getenv), with the errors of resolve: the value is never in them. For
// secrets used outside a request's headers (OAuth client secrets and keys).
func (r SecretRef) Resolve(p Policy, getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	return r.resolve(p, getenv)
}

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
		return v, checkSecretLength(v, "env:"+r.Env)
	case r.File != "":
		v, err := readSecretFile(p, r.File)
		if err != nil {
			return "", err
		}
		return v, checkSecretLength(v, "file:"+r.File)
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

// ErrSecretTooShort is wrapped by the error refusing a secret value shorter
// than MinSecretBytes (or whose last word, the token of "Bearer xyz", is):
// such a value cannot be redacted without corrupting data.
var ErrSecretTooShort = errors.New("secret value too short to be redacted")

// checkSecretLength refuses a resolved value too short to be masked, naming
// the reference (ref, e.g. "env:MCP_TOKEN"), never the value.
func checkSecretLength(v, ref string) error {
	short := len(v) < MinSecretBytes
	if f := strings.Fields(v); len(f) > 1 && len(f[len(f)-1]) < MinSecretBytes {
		short = true
	}
	if !short {
		return nil
	}
	return &Error{Op: "secret", Kind: KindPolicyDenied,
		Err: fmt.Errorf("%w: %s resolves to a value (or a last word) shorter than %d bytes; use a longer credential", ErrSecretTooShort, ref, MinSecretBytes)}
}
