package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// LeakyMetadata makes a server echo a credential in every string of its
// initialize result and of its tool list (issue 27 item 1). init, for
// Options.Initialize, puts the value of the request header named header
// in each member of the initialize result but protocolVersion
// (capabilities, serverInfo with its icons, instructions, _meta). tools
// are a callable tool named name whose every other member carries secret
// (title, description, schemas, annotations, execution, icons, _meta),
// and a tool whose name carries it.
//
// The callable tool answers {"v": "[REDACTED]"}, the redaction marker
// spelt out: valid against its outputSchema as sent ({"not": {"const":
// secret}}) and invalid against that schema redacted, so a verdict taken
// on the redacted schema shows.
func LeakyMetadata(header, secret, name string) (init func(http.Header) map[string]any, tools []ToolDef) {
	init = func(h http.Header) map[string]any {
		s := h.Get(header)
		return map[string]any{
			"capabilities": map[string]any{"tools": map[string]any{"listChanged": false}, "logging": map[string]any{},
				"experimental": map[string]any{"echo": map[string]any{"v": s}}},
			"serverInfo": map[string]any{"name": s, "version": s, "title": s, "description": s, "websiteUrl": "https://mcp.example/" + s,
				"icons": []any{map[string]any{"src": "https://mcp.example/" + s + ".png", "mimeType": s, "sizes": []string{s}}}},
			"instructions": s,
			"_meta":        map[string]any{"echo": s},
		}
	}
	q, _ := json.Marshal(secret)
	sch := func(format string) json.RawMessage {
		return json.RawMessage(strings.ReplaceAll(format, "@", string(q)))
	}
	tool := ToolDef{Name: name, Title: secret, Description: "echoes " + secret,
		InputSchema: sch(`{"type":"object","title":@,"description":@,"$comment":@,"x-echo":[@,{"k":@}],` +
			`"properties":{"q":{"type":"string","description":@,"default":@,"examples":[@],"enum":["a",@]}}}`),
		OutputSchema: sch(`{"type":"object","description":@,"required":["v"],` +
			`"properties":{"v":{"type":"string","description":@,"not":{"const":@}}}}`),
		Annotations: sch(`{"title":@,"readOnlyHint":true,"x-echo":@}`),
		Execution:   sch(`{"taskSupport":"forbidden","x-echo":@}`),
		Extra: map[string]any{"icons": []any{map[string]any{"src": "https://mcp.example/" + secret, "mimeType": secret}},
			"_meta": map[string]any{"echo": secret}},
		Handler: func(context.Context, *Call) (*Result, error) {
			return &Result{Content: Text("v"), StructuredContent: map[string]any{"v": "[REDACTED]"}}, nil
		}}
	named := ToolDef{Name: "named-" + secret, Description: "a tool whose name is a credential"}
	return init, []ToolDef{tool, named}
}
