// Command client is the official MCP conformance suite's client under test
// for agentctl: the suite runs it as `--command`, with the scenario's server
// URL as the last argument and MCP_CONFORMANCE_SCENARIO,
// MCP_CONFORMANCE_CONTEXT and MCP_CONFORMANCE_PROTOCOL_VERSION in the
// environment. It only chooses which agentctl commands to run (the built
// binary from $AGENTCTL, else agentctl on PATH): every protocol step is
// agentctl's own, through its real CLI. Each invocation records into a
// database of its own under a temporary directory.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "conformance client:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 2 && args[0] == "--browse" {
		return browse(args[1])
	}
	if len(args) == 0 {
		return errors.New("usage: client SERVER_URL (the suite passes the URL as the last argument)")
	}
	serverURL := args[len(args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	bin := os.Getenv("AGENTCTL")
	if bin == "" {
		bin = "agentctl"
	}
	dir, err := os.MkdirTemp("", "agentctl-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	a := agentctl{bin: bin, db: filepath.Join(dir, "agentctl.db"), protocol: os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION")}
	cmds, ok := scenarios[scenario]
	if !ok && strings.HasPrefix(scenario, "auth/") {
		cmds, ok = authCall, true
	}
	if !ok {
		// A scenario this driver has no command for: list the tools, which
		// every client scenario's server answers; the suite scores the rest.
		cmds = listTools
	}
	return cmds(a, serverURL)
}

// agentctl runs the CLI against one scenario's server.
type agentctl struct {
	bin, db, protocol string
	env               []string // added to agentctl's environment
}

// exec runs agentctl with args (the database and loopback permission
// added), echoing its output to stderr for the suite's logs, and returns
// its stdout.
func (a agentctl) exec(args ...string) ([]byte, error) {
	full := append([]string{"--db", a.db}, args...)
	if a.protocol != "" && len(args) > 0 && args[0] == "mcp" {
		full = append(full, "--protocol", a.protocol)
	}
	cmd := exec.Command(a.bin, full...)
	cmd.Env = append(os.Environ(), a.env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	os.Stderr.Write(out)
	if err != nil {
		return out, fmt.Errorf("agentctl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// scenarios maps a scenario name to the agentctl commands that act it out.
var scenarios = map[string]func(agentctl, string) error{
	"initialize": listTools,
	"tools_call": func(a agentctl, u string) error {
		return a.call(u, "add_numbers", `{"a":5,"b":3}`)
	},
	"sse-retry": func(a agentctl, u string) error {
		return a.call(u, "test_reconnection", `{}`)
	},
	"http-standard-headers": func(a agentctl, u string) error {
		return errors.Join(a.call(u, "test_headers", `{}`), a.call(u, "my-hyphenated-tool", `{}`))
	},
	"http-custom-headers": contextToolCalls,
	"http-invalid-tool-headers": func(a agentctl, u string) error {
		// The valid tool is called; a call of an invalid one must be
		// refused by agentctl (the tool is not in its catalogue), so its
		// failure is the expected outcome and not reported.
		if err := a.call(u, "valid_tool", `{"region":"us-west1"}`); err != nil {
			return err
		}
		if a.call(u, "invalid_object_header", `{"data":{}}`) == nil {
			return errors.New("agentctl called invalid_object_header, whose x-mcp-header is invalid")
		}
		return nil
	},
	"sep-2322-client-request-state": func(a agentctl, u string) error {
		var errs []error
		for _, tool := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
			errs = append(errs, a.call(u, tool, `{}`, "--elicitation", "defaults"))
		}
		return errors.Join(errs...)
	},
	"elicitation-sep1034-client-defaults": func(a agentctl, u string) error {
		return a.call(u, "test_client_elicitation_defaults", `{}`, "--elicitation", "defaults")
	},
	"json-schema-2020-12-preservation": func(a agentctl, u string) error {
		// List the tools, then hand the focal tool's inputSchema, as
		// agentctl recorded and printed it, back through the echo tool.
		out, err := a.exec("mcp", "tools", u, "--allow-private", "--output", "json")
		if err != nil {
			return err
		}
		schema, err := inputSchema(out, "json_schema_2020_12_tool")
		if err != nil {
			return err
		}
		args, _ := json.Marshal(map[string]json.RawMessage{"schema": schema})
		return a.call(u, "json_schema_echo", string(args))
	},
}

// contextToolCalls makes the tool calls the scenario's context lists
// (MCP_CONFORMANCE_CONTEXT {"toolCalls":[{name, arguments}]}), in order.
func contextToolCalls(a agentctl, u string) error {
	var ctx struct {
		ToolCalls []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"toolCalls"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &ctx); err != nil {
		return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
	}
	var errs []error
	for _, c := range ctx.ToolCalls {
		errs = append(errs, a.call(u, c.Name, withoutNulls(c.Arguments)))
	}
	return errors.Join(errs...)
}

// withoutNulls drops the null members of an arguments object: agentctl
// checks arguments against the tool's inputSchema before sending, and a
// null where the schema wants a boolean would stop the call there. An
// absent argument is the other case the scenario's rule covers ("null or
// not provided": no Mcp-Param header).
func withoutNulls(args json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return string(args)
	}
	for k, v := range m {
		if string(v) == "null" {
			delete(m, k)
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func listTools(a agentctl, u string) error {
	_, err := a.exec("mcp", "tools", u, "--allow-private")
	return err
}

func (a agentctl) call(u, tool, args string, flags ...string) error {
	_, err := a.exec(append([]string{"mcp", "call", u, tool, "--args", args, "--allow-private", "--idempotency", "idempotent"}, flags...)...)
	return err
}

// inputSchema finds tool's inputSchema in `mcp tools --output json`.
func inputSchema(out []byte, tool string) (json.RawMessage, error) {
	var doc struct {
		Data struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("mcp tools --output json: %w", err)
	}
	for _, t := range doc.Data.Tools {
		if t.Name == tool {
			return t.InputSchema, nil
		}
	}
	return nil, fmt.Errorf("mcp tools listed no tool %q", tool)
}
