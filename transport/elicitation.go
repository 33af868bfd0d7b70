package transport

import (
	"errors"
	"net/url"
	"strings"
)

// maxElicitationHosts bounds how many hosts URLElicitationHosts reports.
const maxElicitationHosts = 8

// URLElicitationHosts reports whether err is JSON-RPC error -32042 (URL
// elicitation required: a person must visit a URL before the request can
// proceed, which agentctl cannot do for them) and returns the distinct
// hosts of the URLs in its data.elicitations, lowercased, each reduced to
// the characters a host name or address may hold ("" entries dropped), so
// an operator can be told where to go without printing a remote URL. The
// call ends uncertain (fsm.URLElicitationRequired).
func URLElicitationHosts(err error) (hosts []string, ok bool) {
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindRemoteError || e.Code != CodeURLElicitationRequired {
		return nil, false
	}
	var data struct {
		Elicitations []struct {
			URL string `json:"url"`
		} `json:"elicitations"`
	}
	if present(e.Data) && strictUnmarshal(e.Data, &data) == nil {
		seen := map[string]bool{}
		for _, el := range data.Elicitations {
			h := elicitationHost(el.URL)
			if h == "" || seen[h] || len(hosts) == maxElicitationHosts {
				continue
			}
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	return hosts, true
}

// elicitationHost returns the sanitised host of raw, or "" when raw is not
// an absolute http(s) URL with a plausible host.
func elicitationHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	h := strings.ToLower(u.Hostname())
	if h == "" || len(h) > 253 {
		return ""
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == ':') {
			return ""
		}
	}
	return h
}
