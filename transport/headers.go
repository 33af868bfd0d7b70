package transport

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// 2026-07-28 standard headers (Streamable HTTP): every POST carries
// Mcp-Method; tools/call, prompts/get, resources/read and tasks/* carry
// Mcp-Name; a tools/call carries one Mcp-Param-NAME per argument its tool
// marks with x-mcp-header. They repeat the body, which stays authoritative.
const (
	headerMethod      = "Mcp-Method"
	headerName        = "Mcp-Name"
	headerParamPrefix = "Mcp-Param-"
	base64Open        = "=?base64?"
	base64Close       = "?="
)

// headerBinding is one x-mcp-header annotation: the argument at Path goes
// out as Mcp-Param-Header.
type headerBinding struct {
	Path   []string
	Header string
}

// standardHeaders returns the Mcp-Name value (or "") and the Mcp-Param-*
// headers of a request with params (a map, as built by this package).
func (s *Session) standardHeaders(method string, params any) (string, map[string]string) {
	p, _ := params.(map[string]any)
	str := func(k string) string { v, _ := p[k].(string); return v }
	switch method {
	case "tools/call":
		name := str("name")
		return name, paramHeaders(s.headerBindings(name), p["arguments"])
	case "prompts/get":
		return str("name"), nil
	case "resources/read":
		return str("uri"), nil
	case "tasks/get", "tasks/update", "tasks/cancel", "tasks/result":
		return str("taskId"), nil
	}
	return "", nil
}

// setStandardHeaders sets the exchange's standard headers on h.
func (x *exchange) setStandardHeaders(h http.Header) {
	h.Set(headerMethod, x.method)
	if x.name != "" {
		h.Set(headerName, encodeHeaderValue(x.name))
	}
	for k, v := range x.params {
		h.Set(k, v)
	}
}

// headerBindings returns the x-mcp-header bindings of the tool name as
// the session last listed it.
func (s *Session) headerBindings(name string) []headerBinding {
	s.hdrMu.Lock()
	defer s.hdrMu.Unlock()
	return s.bindings[name]
}

// setHeaderBindings replaces the session's bindings after a tools/list.
func (s *Session) setHeaderBindings(b map[string][]headerBinding) {
	s.hdrMu.Lock()
	defer s.hdrMu.Unlock()
	s.bindings = b
}

// paramHeaders mirrors the bound arguments: an absent or null argument,
// or one that is not a string, boolean or safe integer, sends no header.
func paramHeaders(bs []headerBinding, args any) map[string]string {
	if len(bs) == 0 {
		return nil
	}
	var raw []byte
	switch a := args.(type) {
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		raw, _ = json.Marshal(a)
	}
	out := map[string]string{}
	for _, b := range bs {
		v, ok := lookupPath(raw, b.Path)
		if !ok {
			continue
		}
		if s, ok := headerValue(v); ok {
			out[headerParamPrefix+b.Header] = s
		}
	}
	return out
}

// lookupPath returns the JSON value at path in the object raw.
func lookupPath(raw []byte, path []string) (json.RawMessage, bool) {
	cur := json.RawMessage(raw)
	for _, k := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		v, ok := obj[k]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, present(cur)
}

// headerValue formats a primitive argument for its header: strings as is
// (base64-wrapped when not plain visible ASCII), booleans as true/false,
// integers in decimal.
func headerValue(v json.RawMessage) (string, bool) {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "", false
	}
	switch t := x.(type) {
	case string:
		return encodeHeaderValue(t), true
	case bool:
		return strconv.FormatBool(t), true
	case float64:
		if t != math.Trunc(t) || math.Abs(t) > 1<<53-1 {
			return "", false
		}
		return strconv.FormatInt(int64(t), 10), true
	}
	return "", false
}

// encodeHeaderValue wraps s as =?base64?…?= when it is not safe as a plain
// header value: non-ASCII or control characters, leading or trailing
// whitespace, or text that looks wrapped already.
func encodeHeaderValue(s string) string {
	plain := s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for i := 0; plain && i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			plain = false
		}
	}
	if plain && !(strings.HasPrefix(s, base64Open) && strings.HasSuffix(s, base64Close)) {
		return s
	}
	return base64Open + base64.StdEncoding.EncodeToString([]byte(s)) + base64Close
}

// schemaProps is the part of an inputSchema x-mcp-header lives in.
type schemaProps struct {
	Type       json.RawMessage        `json:"type"`
	Header     json.RawMessage        `json:"x-mcp-header"`
	Properties map[string]schemaProps `json:"properties"`
}

// headerAnnotations validates the x-mcp-header annotations of an
// inputSchema and returns their bindings: a value must be a non-empty
// HTTP token, on a string, integer or boolean property, unique without
// regard to case. An error makes the tool unusable on 2026-07-28.
func headerAnnotations(inputSchema json.RawMessage) ([]headerBinding, error) {
	var root schemaProps
	if json.Unmarshal(inputSchema, &root) != nil {
		return nil, nil
	}
	var out []headerBinding
	seen := map[string]string{}
	var walk func(props map[string]schemaProps, prefix []string) error
	walk = func(props map[string]schemaProps, prefix []string) error {
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := props[n]
			path := append(append([]string(nil), prefix...), n)
			where := strings.Join(path, ".")
			if p.Header != nil {
				var h string
				if json.Unmarshal(p.Header, &h) != nil || h == "" {
					return fmt.Errorf("property %q: x-mcp-header must be a non-empty string", where)
				}
				for _, c := range []byte(h) {
					if !isTokenChar(c) {
						return fmt.Errorf("property %q: x-mcp-header %q has a character not allowed in a header name", where, h)
					}
				}
				var typ string
				if json.Unmarshal(p.Type, &typ) != nil || (typ != "string" && typ != "integer" && typ != "boolean") {
					return fmt.Errorf("property %q: x-mcp-header %q is on a %s property (string, integer or boolean only)", where, h, strings.Trim(string(p.Type), `"`))
				}
				if prev, dup := seen[strings.ToLower(h)]; dup {
					return fmt.Errorf("property %q: x-mcp-header %q repeats that of %q", where, h, prev)
				}
				seen[strings.ToLower(h)] = where
				out = append(out, headerBinding{Path: path, Header: h})
			}
			if len(p.Properties) > 0 {
				if err := walk(p.Properties, path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root.Properties, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// isTokenChar reports whether c may appear in an HTTP field name (tchar).
func isTokenChar(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
