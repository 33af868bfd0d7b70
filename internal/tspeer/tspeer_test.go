package tspeer_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/tspeer"
)

const canary = "agentctl-canary-7f3e9c1d2b"

var httpClient = &http.Client{Timeout: 30 * time.Second}

// post sends one JSON-RPC message and returns the status, the session id
// header and the JSON-RPC messages of the answer (from SSE or JSON).
func post(t *testing.T, url, session, body string) (int, string, []json.RawMessage) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []json.RawMessage
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/event-stream"):
		for ev := range strings.SplitSeq(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n\n") {
			var data []string
			for line := range strings.SplitSeq(ev, "\n") {
				if d, ok := strings.CutPrefix(line, "data:"); ok {
					data = append(data, strings.TrimPrefix(d, " "))
				}
			}
			// The server sends a priming event with empty data first.
			if joined := strings.Join(data, "\n"); strings.TrimSpace(joined) != "" {
				msgs = append(msgs, json.RawMessage(joined))
			}
		}
	case strings.HasPrefix(ct, "application/json"):
		msgs = append(msgs, json.RawMessage(b))
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), msgs
}

func result(t *testing.T, msgs []json.RawMessage, id int, into any) {
	t.Helper()
	for _, m := range msgs {
		var env struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(m, &env); err != nil {
			t.Fatalf("bad message %s: %v", m, err)
		}
		if env.ID == nil || *env.ID != id {
			continue
		}
		if env.Error != nil {
			t.Fatalf("id %d: error %s", id, env.Error)
		}
		if err := json.Unmarshal(env.Result, into); err != nil {
			t.Fatalf("id %d: result %s: %v", id, env.Result, err)
		}
		return
	}
	t.Fatalf("no response with id %d in %q", id, msgs)
}

func TestInstalled(t *testing.T) {
	if err := tspeer.Installed(); err != nil {
		t.Fatal(err)
	}
}

func TestReferenceServer(t *testing.T) {
	t.Setenv("AGENTCTL_CANARY", canary)
	url := tspeer.Start(t)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("url = %q", url)
	}

	code, session, msgs := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"agentctl-test","version":"0"}}}`)
	if code != http.StatusOK || session == "" {
		t.Fatalf("initialize: status %d, session %q, %q", code, session, msgs)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
	}
	result(t, msgs, 1, &init)
	if init.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocolVersion = %q", init.ProtocolVersion)
	}
	if init.ServerInfo.Name != "mcp-servers/everything" || init.ServerInfo.Version == "" {
		t.Errorf("serverInfo = %+v", init.ServerInfo)
	}

	if code, _, _ := post(t, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d", code)
	}

	code, _, msgs = post(t, url, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if code != http.StatusOK {
		t.Fatalf("tools/list: status %d", code)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	result(t, msgs, 2, &list)
	have := map[string]bool{}
	for _, tool := range list.Tools {
		have[tool.Name] = true
	}
	for _, want := range []string{"echo", "get-sum", "get-structured-content", "trigger-long-running-operation", "get-env"} {
		if !have[want] {
			t.Errorf("tools/list lacks %s: %v", want, have)
		}
	}

	code, _, msgs = post(t, url, session, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get-env","arguments":{}}}`)
	if code != http.StatusOK {
		t.Fatalf("get-env: status %d", code)
	}
	var env struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	result(t, msgs, 3, &env)
	if len(env.Content) == 0 {
		t.Fatal("get-env returned no content")
	}
	var vars map[string]string
	if err := json.Unmarshal([]byte(env.Content[0].Text), &vars); err != nil {
		t.Fatalf("get-env text: %v", err)
	}
	for k, v := range vars {
		if strings.Contains(k, "CANARY") || strings.Contains(v, canary) {
			t.Errorf("child environment leaks %s=%s", k, v)
		}
		switch k {
		case "PATH", "HOME", "PORT":
		default:
			t.Errorf("unexpected variable in child environment: %s", k)
		}
	}

	// An unknown session is answered 400 (not 404) by this server.
	if code, _, _ := post(t, url, "00000000-0000-0000-0000-000000000000", `{"jsonrpc":"2.0","id":4,"method":"ping"}`); code != http.StatusBadRequest {
		t.Errorf("unknown session: status %d, want 400", code)
	}
}
