package spec

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/transport"
)

// The checks in this file apply the workflow's own policy to what the file
// declares, before anything runs: a remote the policy would refuse at dial
// time is refused here already. The transport checks again at dial time,
// after DNS resolution; these static checks see only literal hosts.

// defaultSchemes is the scheme list when spec.policy.network.allowedSchemes is empty.
var defaultSchemes = []string{"https"}

// managedHeaders are set by agentctl itself and may not be overridden.
var managedHeaders = []string{
	"accept", "connection", "content-length", "content-type", "host", "last-event-id",
	"mcp-protocol-version", "mcp-session-id", "origin", "transfer-encoding", "user-agent",
}

func (c *checker) policy() {
	pol := c.w.Spec.Policy
	for i, e := range pol.NetworkAllowlist {
		if err := checkAllowEntry(e); err != nil {
			c.errf(fmt.Sprintf("spec.policy.networkAllowlist[%d]", i), "%v", err)
		}
	}
	for i, e := range pol.EnvironmentAllowlist {
		if !isEnvName(e) {
			c.errf(fmt.Sprintf("spec.policy.environmentAllowlist[%d]", i), "%q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", e)
		}
	}
	for i, r := range pol.SecretFileRoots {
		if !filepath.IsAbs(r) {
			c.errf(fmt.Sprintf("spec.policy.secretFileRoots[%d]", i), "secret file root %q must be an absolute path", r)
		}
	}
	c.commandPolicy()
	net := pol.Network
	for i, s := range net.AllowedSchemes {
		if s != "http" && s != "https" {
			c.errf(fmt.Sprintf("spec.policy.network.allowedSchemes[%d]", i), "unsupported scheme %q; want http or https", s)
		}
	}
	for i, p := range net.AllowedPorts {
		if p < 1 || p > 65535 {
			c.errf(fmt.Sprintf("spec.policy.network.allowedPorts[%d]", i), "port %d is out of range 1-65535", p)
		}
	}
	if net.ConnectTimeoutSeconds < 0 {
		c.errf("spec.policy.network.connectTimeoutSeconds", "must not be negative (0 means the default), got %d", net.ConnectTimeoutSeconds)
	}
	if net.MaxResponseBytes < 0 {
		c.errf("spec.policy.network.maxResponseBytes", "must not be negative (0 means the default), got %d", net.MaxResponseBytes)
	}
}

// checkAllowEntry validates one networkAllowlist entry: a host name, an IP
// literal or *.suffix (what the transport matches; no CIDR ranges).
func checkAllowEntry(e string) error {
	switch {
	case e == "":
		return fmt.Errorf("empty entry; want a host name, IP address or *.suffix")
	case strings.Contains(e, "://") || strings.ContainsAny(e, " @?#"):
		return fmt.Errorf("entry %q must be a bare host name, IP address or *.suffix, not a URL", e)
	}
	if _, err := netip.ParsePrefix(e); err == nil {
		return fmt.Errorf("entry %q is a CIDR range; list host names or IP addresses instead", e)
	}
	if _, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
		return nil
	}
	host := strings.TrimPrefix(e, "*.")
	if host == "" || strings.ContainsAny(host, "*/:[]") {
		return fmt.Errorf("entry %q must be a host name, IP address or *.suffix (a wildcard only as a leading *.)", e)
	}
	return nil
}

func (c *checker) servers() {
	for _, name := range sortedNames(c.w.Spec.MCPServers) {
		s := c.w.Spec.MCPServers[name]
		p := joinPath("spec.mcpServers", name)
		if !isIdent(name) {
			c.keyErrf(p, "server name %q must match [A-Za-z_][A-Za-z0-9_-]*", name)
		}
		if s.IsStdio() || c.has(p+".command") {
			c.stdioServer(p, s)
		} else {
			c.serverURL(p+".url", s.URL)
		}
		if c.has(p+".timeoutSeconds") && s.TimeoutSeconds <= 0 {
			c.errf(p+".timeoutSeconds", "must be greater than 0, got %d", s.TimeoutSeconds)
		}
		if c.has(p+".maxSeconds") && s.MaxSeconds <= 0 {
			c.errf(p+".maxSeconds", "must be greater than 0, got %d", s.MaxSeconds)
		}
		if c.has(p+".protocolVersion") && !contains(ProtocolPins, s.ProtocolVersion) {
			c.errf(p+".protocolVersion", "unsupported protocolVersion %q; want one of %s", s.ProtocolVersion, strings.Join(ProtocolPins, ", "))
		}
		if c.has(p+".useTasks") && !contains([]string{UseTasksOptional, UseTasksAlways, UseTasksNever}, s.UseTasks) {
			c.errf(p+".useTasks", "unknown useTasks %q; want one of optional, always, never", s.UseTasks)
		}
		for _, h := range sortedNames(s.Headers) {
			c.header1(joinPath(p+".headers", h), h, s.Headers[h])
		}
		c.auth(p, s)
	}
}

func (c *checker) header1(p, name string, ref SecretRefSpec) {
	switch {
	case !isToken(name):
		c.keyErrf(p, "%q is not a valid HTTP header name", name)
	case contains(managedHeaders, strings.ToLower(name)):
		c.keyErrf(p, "header %q is set by agentctl and cannot be configured", name)
	}
	c.secretRef(p, ref)
}

// secretRef checks a secret reference and applies the secret policy to it.
func (c *checker) secretRef(p string, ref SecretRefSpec) {
	pol := c.w.Spec.Policy
	switch {
	case ref.Env != "" && ref.File != "":
		c.errf(p, "set exactly one of env or file, not both")
	case ref.Env == "" && ref.File == "" && strings.Contains(p, ".auth."):
		c.errf(p, "must be a secret reference {env: NAME} or {file: PATH}")
	case ref.Env == "" && ref.File == "":
		c.errf(p, "headers must be secret references {env: NAME} or {file: PATH}")
	case ref.Env != "":
		switch {
		case !isEnvName(ref.Env):
			c.errf(p+".env", "%q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", ref.Env)
		case len(pol.EnvironmentAllowlist) == 0:
			c.policyf(p+".env", "environment variable %q may not be read: spec.policy.environmentAllowlist is empty; list %s there", ref.Env, ref.Env)
		case !contains(pol.EnvironmentAllowlist, ref.Env):
			c.policyf(p+".env", "environment variable %q is not in spec.policy.environmentAllowlist %v", ref.Env, pol.EnvironmentAllowlist)
		}
	default:
		switch {
		case !filepath.IsAbs(ref.File):
			c.errf(p+".file", "secret file %q must be an absolute path", ref.File)
		case len(pol.SecretFileRoots) == 0:
			c.policyf(p+".file", "secret file %q may not be read: spec.policy.secretFileRoots is empty; list its directory there", ref.File)
		case !underRoots(ref.File, pol.SecretFileRoots):
			c.policyf(p+".file", "secret file %q is not under spec.policy.secretFileRoots %v", ref.File, pol.SecretFileRoots)
		}
	}
}

func underRoots(file string, roots []string) bool {
	if !filepath.IsAbs(file) {
		return false
	}
	file = filepath.Clean(file)
	for _, r := range roots {
		rel, err := filepath.Rel(filepath.Clean(r), file)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}

// serverURL checks that a remote's URL is well formed and allowed by the
// workflow's network policy.
func (c *checker) serverURL(p, raw string) {
	if raw == "" {
		c.errf(p, "url is required, like https://host/mcp")
		return
	}
	if strings.Contains(raw, "${{") {
		c.errf(p, "templates are not allowed in url")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		c.errf(p, "url %q does not parse: %v", raw, unwrapURLError(err))
		return
	}
	if u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		c.errf(p, "url %q must be absolute, like https://host/mcp", raw)
		return
	}
	if u.User != nil {
		c.errf(p, "url must not carry credentials; use headers with a secret reference")
		return
	}
	if u.Fragment != "" {
		c.errf(p, "url %q must not have a #fragment", raw)
	}
	if c.badUnder("spec.policy") {
		return // the policy itself is broken; judging by it would mislead
	}
	net := c.w.Spec.Policy.Network
	scheme := strings.ToLower(u.Scheme)
	schemes := net.AllowedSchemes
	if len(schemes) == 0 {
		schemes = defaultSchemes
	}
	if !contains(schemes, scheme) {
		hint := "spec.policy.network.allowedSchemes " + fmt.Sprint(schemes)
		if len(net.AllowedSchemes) == 0 {
			hint = "the default allowedSchemes [https]; add it to spec.policy.network.allowedSchemes"
		}
		c.policyf(p, "scheme %q is not allowed by %s", scheme, hint)
		return
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		c.errf(p, "url %q has no host", raw)
		return
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		c.errf(p, "url %q has an invalid port %q", raw, port)
		return
	} else if len(net.AllowedPorts) > 0 && !containsInt(net.AllowedPorts, n) {
		c.policyf(p, "port %d is not in spec.policy.network.allowedPorts %v", n, net.AllowedPorts)
		return
	}
	if al := c.w.Spec.Policy.NetworkAllowlist; len(al) > 0 && !transport.HostAllowed(host, al) {
		c.policyf(p, "host %q is not in spec.policy.networkAllowlist %v", host, al)
		return
	}
	if what := privateKind(host); what != "" && !net.AllowPrivate {
		c.policyf(p, "host %q is a %s address; set spec.policy.network.allowPrivate: true to allow it", host, what)
		return
	}
	// Last, the transport's own rule, so that check never accepts what a run
	// would refuse (odd IPv4 spellings, private ranges inside IPv6, ...).
	if err := transport.CheckURL(c.w.transportPolicy(), raw); err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.Err != nil {
			err = te.Err
		}
		c.policyf(p, "%v", err)
	}
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// privateKind names the kind of non-public address a literal host is, or "".
// Host names are not resolved here (the transport checks resolved
// addresses); "localhost" counts as loopback.
func privateKind(host string) string {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "loopback"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	if !transport.IsPrivate(ip) {
		return ""
	}
	switch ip = ip.Unmap().WithZone(""); {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast():
		return "multicast"
	case ip.IsUnspecified():
		return "unspecified"
	}
	return "private or reserved"
}

func containsInt(list []int, n int) bool {
	for _, e := range list {
		if e == n {
			return true
		}
	}
	return false
}

func isEnvName(s string) bool {
	return isIdent(s) && !strings.Contains(s, "-")
}

// isToken reports whether s is an HTTP header field name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c >= 0x7f || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}
