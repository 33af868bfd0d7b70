package demoserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol20260728 is the stateless MCP revision (Options.Protocol).
const Protocol20260728 = "2026-07-28"

// ModernToolNames lists the tools a 2026-07-28 server adds: confirm asks
// for input first (an input-required result with an elicitation and a
// requestState) and runs only once answered; regional marks its region
// argument with x-mcp-header, so the SDK checks the Mcp-Param-Region header
// against the body (the SDK refuses to register an invalid annotation).
var ModernToolNames = []string{"confirm", "regional"}

// ConfirmState is the requestState confirm sends with its input request.
const ConfirmState = `{"round":1,"nonce":"c0ffee"}`

// ConfirmOutput is the output of confirm.
type ConfirmOutput struct {
	Confirmed bool   `json:"confirmed"`
	Item      string `json:"item"`
}

// RegionalInput is the input of regional.
type RegionalInput struct {
	Region string `json:"region"`
	Query  string `json:"query"`
}

func (s *Server) addModernTools() {
	s.mcp.AddTool(&mcp.Tool{
		Name:        "confirm",
		Description: "Asks the client to confirm (input-required result), then returns the answer; runs only when answered.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"item": map[string]any{"type": "string"}}},
		OutputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"confirmed": map[string]any{"type": "boolean"}, "item": map[string]any{"type": "string"}}},
	}, s.confirm)

	s.mcp.AddTool(&mcp.Tool{
		Name:        "regional",
		Description: "Echoes its region, which travels as the Mcp-Param-Region header too.",
		InputSchema: map[string]any{"type": "object", "required": []string{"region"}, "properties": map[string]any{
			"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
			"query":  map[string]any{"type": "string"}}},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.calls["regional"].Add(1)
		var in RegionalInput
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "region " + in.Region}},
			StructuredContent: map[string]any{"region": in.Region}}, nil
	})

}

// confirm answers a first call with an input request (nothing counted:
// the tool has not run) and a retry carrying the answer and the exact
// requestState with the result (counted).
func (s *Server) confirm(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Item string `json:"item"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &in)
	resp, ok := req.Params.InputResponses["confirm"]
	if !ok {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message: "Confirm " + in.Item + "?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
					"confirmed": map[string]any{"type": "boolean", "default": true}}},
			}},
			RequestState: ConfirmState,
		}, nil
	}
	if req.Params.RequestState != ConfirmState {
		return nil, fmt.Errorf("requestState %q is not the one sent", req.Params.RequestState)
	}
	er, ok := resp.(*mcp.ElicitResult)
	if !ok {
		return nil, fmt.Errorf("input response %T is not an elicitation result", resp)
	}
	s.calls["confirm"].Add(1)
	out := ConfirmOutput{Item: in.Item}
	if er.Action == "accept" {
		out.Confirmed, _ = er.Content["confirmed"].(bool)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%v", out.Confirmed)}},
		StructuredContent: out}, nil
}
