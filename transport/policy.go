package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Policy is the network and secret policy checked before any byte is sent.
type Policy struct {
	NetworkAllowlist     []string      // exact hosts or "*.suffix"; empty = every host allowed (still subject to AllowPrivate)
	AllowedSchemes       []string      // empty = ["https"]
	AllowedPorts         []int         // empty = any port
	AllowPrivate         bool          // loopback, RFC1918, link-local, CGNAT, ULA, site-local, unspecified, reserved, multicast (also inside IPv4-mapped, IPv4-compatible, NAT64 and 6to4 addresses) refused unless true
	EnvironmentAllowlist []string      // env names a SecretRef may read
	SecretFileRoots      []string      // directories a SecretRef.File must lie under
	ConnectTimeout       time.Duration // 0 = 10s
	MaxResponseBytes     int64         // 0 = 4 MiB; capped at 64 MiB
	Resolver             Resolver      // nil = net.DefaultResolver
}

// Resolver looks up a host name; *net.Resolver satisfies it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

const (
	defaultConnectTimeout   = 10 * time.Second
	defaultMaxResponseBytes = 4 << 20
	maxMaxResponseBytes     = 64 << 20
)

func (p Policy) connectTimeout() time.Duration {
	if p.ConnectTimeout <= 0 {
		return defaultConnectTimeout
	}
	return p.ConnectTimeout
}

func (p Policy) maxResponseBytes() int64 {
	switch {
	case p.MaxResponseBytes <= 0:
		return defaultMaxResponseBytes
	case p.MaxResponseBytes > maxMaxResponseBytes:
		return maxMaxResponseBytes
	}
	return p.MaxResponseBytes
}

// CheckURL checks raw against p as New does, without any network I/O: the
// scheme, userinfo, port, allowlist, and a literal address (any spelling)
// against the private ranges. Host names are checked after resolution, at
// dial time; static checkers can call this to agree with the transport.
func CheckURL(p Policy, raw string) error {
	_, err := p.checkURL(raw)
	return err
}

func policyErr(format string, args ...any) *Error {
	return &Error{Op: "policy", Kind: KindPolicyDenied, Err: fmt.Errorf(format, args...)}
}

// checkURL validates u against the policy without touching the network. It
// returns the host and port to dial.
func (p Policy) checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, policyErr("parse url: %w", err)
	}
	if u.User != nil {
		return nil, policyErr("url %q carries userinfo", u.Redacted())
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, policyErr("url %q has no host", u.Redacted())
	}
	scheme := strings.ToLower(u.Scheme)
	allowed := p.AllowedSchemes
	if len(allowed) == 0 {
		allowed = []string{"https"}
	}
	if scheme != "http" && scheme != "https" {
		return nil, policyErr("scheme %q is not supported (http or https only)", u.Scheme)
	}
	if !slices.ContainsFunc(allowed, func(s string) bool { return strings.EqualFold(s, scheme) }) {
		return nil, policyErr("scheme %q not in allowed schemes %v", u.Scheme, allowed)
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	pn, err := strconv.Atoi(port)
	if err != nil || pn <= 0 || pn > 65535 {
		return nil, policyErr("port %q is invalid", port)
	}
	if len(p.AllowedPorts) > 0 && !slices.Contains(p.AllowedPorts, pn) {
		return nil, policyErr("port %d not in allowed ports %v", pn, p.AllowedPorts)
	}
	if !p.hostAllowed(host) {
		return nil, policyErr("host %q not in network allowlist %v", host, p.NetworkAllowlist)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if err := p.checkAddr(host, addr); err != nil {
			return nil, err
		}
	} else if a, ok := legacyIPv4(host); ok {
		// inet_aton reads "2130706433", "0177.0.0.1", "0x7f.1" or "127.1"
		// as 127.0.0.1; Go's resolver does not. Refuse the ambiguity.
		return nil, policyErr("host %q is a non-canonical IPv4 spelling (of %s); write the address as a dotted quad", host, a)
	}
	return u, nil
}

// legacyIPv4 reports whether host is an all-numeric IPv4 spelling other
// than the dotted quad: one to four dot-separated decimal, octal (leading
// 0) or hex (0x) numbers, optionally with a trailing dot. It returns the
// address inet_aton would read, or the host itself when out of range.
func legacyIPv4(host string) (string, bool) {
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(parts) > 4 {
		return "", false
	}
	vals := make([]uint64, len(parts))
	for i, part := range parts {
		base, digits := 10, part
		switch {
		case len(part) > 1 && (part[:2] == "0x" || part[:2] == "0X"):
			base, digits = 16, part[2:]
		case len(part) > 1 && part[0] == '0':
			base, digits = 8, part[1:]
		}
		if part == "" || (digits == "" && base != 16) {
			return "", false
		}
		v, err := strconv.ParseUint(digits, base, 64)
		if digits == "" {
			v, err = 0, nil
		}
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return host, true // numeric, but no address at all
			}
			return "", false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return host, true
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(32-8*(len(vals)-1)) {
		return host, true
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String(), true
}

func (p Policy) hostAllowed(host string) bool {
	if len(p.NetworkAllowlist) == 0 {
		return true
	}
	return HostAllowed(host, p.NetworkAllowlist)
}

// HostAllowed matches a lower-case host against allowlist entries: exact
// names or IP literals, and *.suffix for any subdomain of suffix (not the
// suffix itself). Static checkers use it so they apply the transport's rule.
func HostAllowed(host string, allowlist []string) bool {
	host = strings.TrimSuffix(host, ".")
	for _, a := range allowlist {
		a = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(a)), ".")
		a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if a == host {
			return true
		}
	}
	return false
}

var privatePrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
		"::/96", // unspecified, loopback and the deprecated IPv4-compatible addresses
		"fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// embedsIPv4 are IPv6 ranges that carry an IPv4 address a gateway may
// forward to: NAT64 (well-known and local-use prefixes, last 32 bits) and
// 6to4 (bits 16-47). The embedded address is checked like any IPv4 one.
var embedsIPv4 = []struct {
	p   netip.Prefix
	off int // byte offset of the embedded IPv4 address
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12},
	{netip.MustParsePrefix("64:ff9b:1::/48"), 12},
	{netip.MustParsePrefix("2002::/16"), 2},
}

// IsPrivate reports whether addr lies in a range refused unless
// AllowPrivate (loopback, RFC 1918, link-local, CGNAT, ULA, unspecified,
// multicast, reserved, and IPv6 forms embedding any of those).
func IsPrivate(addr netip.Addr) bool { return isPrivate(addr) }

// isPrivate reports whether addr lies in a range refused unless AllowPrivate.
func isPrivate(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	for _, e := range embedsIPv4 {
		if e.p.Contains(addr) {
			b := addr.As16()
			if isPrivate(netip.AddrFrom4([4]byte(b[e.off : e.off+4]))) {
				return true
			}
		}
	}
	for _, p := range privatePrefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

func (p Policy) checkAddr(host string, addr netip.Addr) error {
	if !addr.IsValid() {
		return policyErr("host %q resolved to an invalid address", host)
	}
	if !p.AllowPrivate && isPrivate(addr) {
		return policyErr("host %q resolves to private address %s (allowPrivate is false)", host, addr)
	}
	return nil
}

// pinnedDialer resolves the host once, checks every answer against the
// policy and then dials only the checked addresses.
type pinnedDialer struct {
	policy Policy
	host   string // the one host this client talks to
	port   string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex
	addrs []netip.Addr
	err   error
	done  bool
}

func (d *pinnedDialer) resolve(ctx context.Context) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return d.addrs, d.err
	}
	addrs, err := d.lookup(ctx)
	if err != nil {
		var te *Error
		if !errors.As(err, &te) { // transient lookup failure: try again next time
			return nil, err
		}
	}
	d.addrs, d.err, d.done = addrs, err, true
	return addrs, err
}

func (d *pinnedDialer) lookup(ctx context.Context) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(d.host); err == nil {
		if err := d.policy.checkAddr(d.host, a); err != nil {
			return nil, err
		}
		return []netip.Addr{a}, nil
	}
	r := d.policy.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupIPAddr(ctx, d.host)
	if err != nil {
		return nil, fmt.Errorf("resolve %q: %w", d.host, err)
	}
	if len(ips) == 0 {
		return nil, policyErr("host %q resolved to no address", d.host)
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			return nil, policyErr("host %q resolved to invalid address %v", d.host, ip.IP)
		}
		if err := d.policy.checkAddr(d.host, a); err != nil {
			return nil, err
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// DialContext ignores the address http.Transport asks for (always our host)
// and dials the pinned, checked addresses in order.
func (d *pinnedDialer) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	addrs, err := d.resolve(ctx)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, a := range addrs {
		c, err := d.dial(ctx, network, net.JoinHostPort(a.String(), d.port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// newHTTPClient builds the default client: pinned dialer, no proxy, no
// redirects, bounded connect and TLS handshake.
func newHTTPClient(u *url.URL, p Policy) (*http.Client, *pinnedDialer) {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	nd := &net.Dialer{Timeout: p.connectTimeout(), KeepAlive: 30 * time.Second}
	d := &pinnedDialer{policy: p, host: strings.ToLower(u.Hostname()), port: port, dial: nd.DialContext}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   p.connectTimeout(),
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // bounded by Config.Timeout through the request context
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr, CheckRedirect: noRedirect}, d
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
