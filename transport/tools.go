package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// Bounds on tools/list pagination.
const (
	MaxToolPages = 100
	MaxTools     = 10000
)

// Tool is one tool definition as listed by the server; remote text is
// data. Every member but Name is redacted of the secret values the client
// sent (a listed Name never carries one: such a tool is not listed); the
// digest, validation and task support decide on the members as received,
// which a tool listed by ListTools keeps beside (tools_redact.go).
type Tool struct {
	Name, Title, Description                          string
	InputSchema, OutputSchema, Annotations, Execution json.RawMessage // as sent, redacted (nil when absent)
	// digest is Digest computed once when tools/list built the tool: every
	// call records it, and canonicalising schemas is not free.
	digest string
	sent   *toolSent // the members redaction changed, as received; nil when none
	red    *redactor // the listing client's, for validation messages
}

// Digest returns "sha256:" + hex of the canonical JSON (sorted keys, no HTML
// escaping, numbers as sent) of {name, inputSchema, outputSchema, execution}
// as the server sent them (before redaction), absent members omitted. Wire
// key order, title, description and annotations never change it.
func (t Tool) Digest() string {
	if t.digest != "" {
		return t.digest
	}
	return t.computeDigest()
}

func (t Tool) computeDigest() string {
	var b strings.Builder
	b.WriteString("{")
	// Members in sorted order: execution, inputSchema, name, outputSchema.
	first := true
	add := func(key string, raw []byte) {
		if !first {
			b.WriteString(",")
		}
		first = false
		k, _ := canonjson.Marshal(key)
		b.Write(k)
		b.WriteString(":")
		b.Write(raw)
	}
	canon := func(raw json.RawMessage) []byte {
		c, err := canonjson.Canonical(raw)
		if err != nil { // cannot happen for a listed tool; digest the bytes as sent
			q, _ := canonjson.Marshal(string(raw))
			return q
		}
		return c
	}
	if ex := t.execution(); present(ex) {
		add("execution", canon(ex))
	}
	if in := t.inputSchema(); present(in) {
		add("inputSchema", canon(in))
	}
	name, _ := canonjson.Marshal(t.Name)
	add("name", name)
	if out := t.outputSchema(); present(out) {
		add("outputSchema", canon(out))
	}
	b.WriteString("}")
	sum := sha256.Sum256([]byte(b.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func present(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

// Catalog is the complete tool list of a session.
type Catalog struct {
	Tools    []Tool
	Warnings []string // e.g. tools skipped for lacking an inputSchema
	// TTL and CacheScope are the 2026-07-28 caching hints of tools/list
	// (ttlMs, cacheScope; the smallest ttlMs of its pages, and "private"
	// if any page says so): how long the result may be reused, and by
	// whom. An absent ttlMs is 0 (immediately stale); 2025-11-25 has
	// neither.
	TTL        time.Duration
	CacheScope string
}

// Find returns the tool named name.
func (c *Catalog) Find(name string) (Tool, bool) {
	for _, t := range c.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Digest returns "sha256:" + hex over the sorted tool digests, newline-separated.
func (c *Catalog) Digest() string {
	ds := make([]string, len(c.Tools))
	for i, t := range c.Tools {
		ds[i] = t.Digest()
	}
	sort.Strings(ds)
	sum := sha256.Sum256([]byte(strings.Join(ds, "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

type wireTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  json.RawMessage `json:"annotations"`
	Execution    json.RawMessage `json:"execution"`
}

// ListTools fetches the whole tool list, following nextCursor (opaque) to
// the end, at most MaxToolPages pages and MaxTools tools. A tool without an
// inputSchema, a duplicate name, or a name carrying a secret value the
// client sent, is skipped with a warning. Every other remote string of a
// tool is redacted (Tool).
func (s *Session) ListTools(ctx context.Context, sink Sink) (*Catalog, error) {
	s.toolsChanged.Store(false) // a change announced from here on makes the next call list again
	cat := &Catalog{}
	seen := map[string]bool{}
	bindings := map[string][]headerBinding{}
	cursor := ""
	for page := 1; ; page++ {
		if page > MaxToolPages {
			return nil, &Error{Op: "tools/list", Kind: KindMalformed, Sent: true,
				Message: fmt.Sprintf("more than %d pages of tools (last cursor %q)", MaxToolPages, s.c.red.cut(cursor, 64))}
		}
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		m, err := s.roundTrip(ctx, "tools/list", params, sink, s.newID())
		if err != nil {
			return nil, err
		}
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
			TTLMs      *int64            `json:"ttlMs"`
			CacheScope string            `json:"cacheScope"`
		}
		if err := strictUnmarshal(m.Result, &res); err != nil {
			return nil, &Error{Op: "tools/list", Kind: KindMalformed, Sent: true, Err: fmt.Errorf("%w: page %d: %v", errMalformed, page, err)}
		}
		cat.cacheHints(page, res.TTLMs, res.CacheScope)
		for i, raw := range res.Tools {
			var wt wireTool
			if err := strictUnmarshal(raw, &wt); err != nil || wt.Name == "" {
				cat.Warnings = append(cat.Warnings, fmt.Sprintf("page %d tool %d: skipped: not a tool object with a name", page, i))
				continue
			}
			if !present(wt.InputSchema) || !strings.HasPrefix(strings.TrimSpace(string(wt.InputSchema)), "{") {
				cat.Warnings = append(cat.Warnings, fmt.Sprintf("tool %q: skipped: no inputSchema object", s.c.red.cut(wt.Name, 128)))
				continue
			}
			if seen[wt.Name] {
				cat.Warnings = append(cat.Warnings, fmt.Sprintf("tool %q: skipped: duplicate name", s.c.red.cut(wt.Name, 128)))
				continue
			}
			seen[wt.Name] = true
			if w := secretNameWarning(wt.Name, s.c.red); w != "" {
				cat.Warnings = append(cat.Warnings, w)
				continue
			}
			if s.stateless() {
				bs, err := headerAnnotations(wt.InputSchema)
				if err != nil { // 2026-07-28: such a tool must not be called
					cat.Warnings = append(cat.Warnings, fmt.Sprintf("tool %q: skipped: invalid x-mcp-header: %s", s.c.red.cut(wt.Name, 128), s.c.red.cut(err.Error(), 256)))
					continue
				}
				if len(bs) > 0 {
					bindings[wt.Name] = bs
				}
			}
			t := Tool{Name: wt.Name, Title: wt.Title, Description: wt.Description,
				InputSchema: wt.InputSchema, OutputSchema: nonNull(wt.OutputSchema),
				Annotations: nonNull(wt.Annotations), Execution: nonNull(wt.Execution)}
			t.digest = t.computeDigest() // on the tool as received
			cat.Tools = append(cat.Tools, redactTool(t, s.c.red))
			if len(cat.Tools) > MaxTools {
				return nil, &Error{Op: "tools/list", Kind: KindMalformed, Sent: true,
					Message: fmt.Sprintf("more than %d tools", MaxTools)}
			}
		}
		if res.NextCursor == nil || *res.NextCursor == "" {
			if s.stateless() {
				s.setHeaderBindings(bindings)
			}
			return cat, nil
		}
		cursor = *res.NextCursor
	}
}

func nonNull(raw json.RawMessage) json.RawMessage {
	if !present(raw) {
		return nil
	}
	return raw
}

// cacheHints folds one tools/list page's ttlMs and cacheScope into the
// catalog's: the smallest ttl (absent or negative is 0), and "private"
// unless every page is "public".
func (c *Catalog) cacheHints(page int, ttlMs *int64, scope string) {
	ttl := time.Duration(0)
	if ttlMs != nil && *ttlMs > 0 && *ttlMs < int64(math.MaxInt64/time.Millisecond) {
		ttl = time.Duration(*ttlMs) * time.Millisecond
	}
	if page == 1 || ttl < c.TTL {
		c.TTL = ttl
	}
	if scope != "public" {
		scope = "private"
	}
	if page == 1 || scope == "private" {
		c.CacheScope = scope
	}
}
