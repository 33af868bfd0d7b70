package spec

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/invopop/jsonschema"
)

// A stdio server (mcpServers.NAME.command) is a child process speaking MCP
// on its stdin and stdout. It runs only if spec.policy.commandAllowlist
// lists its program as written; its environment is what env declares plus
// the minimal set of transport.StdioBaseEnv, never agentctl's own.

// EnvValueSpec is one variable of a stdio server's environment: a literal
// ("value" in the file) or a secret reference {env: VAR} / {file: PATH},
// resolved when the process starts and redacted from everything recorded.
type EnvValueSpec struct {
	Env   string `yaml:"env" json:"env,omitempty"`
	File  string `yaml:"file" json:"file,omitempty"`
	Value string `yaml:"-" json:"-"` // the literal, when the file gives a string
}

// IsSecret reports whether the value is a secret reference.
func (e EnvValueSpec) IsSecret() bool { return e.Env != "" || e.File != "" }

// JSONSchema describes an env value: a string, or a secret reference.
func (EnvValueSpec) JSONSchema() *jsonschema.Schema {
	ref := func(key, desc string) *jsonschema.Schema {
		props := jsonschema.NewProperties()
		props.Set(key, &jsonschema.Schema{Type: "string", MinLength: ptrU64(1), Description: desc})
		return &jsonschema.Schema{Type: "object", Properties: props, Required: []string{key}, AdditionalProperties: jsonschema.FalseSchema}
	}
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		{Type: "string", Description: "A literal value."},
		ref("env", "Environment variable of agentctl holding the value (listed in spec.policy.environmentAllowlist)."),
		ref("file", "File holding the value (under spec.policy.secretFileRoots)."),
	}}
}

func ptrU64(n uint64) *uint64 { return &n }

// JSONSchemaExtend says a server has exactly one of url and command.
func (ServerSpec) JSONSchemaExtend(s *jsonschema.Schema) {
	s.OneOf = []*jsonschema.Schema{{Required: []string{"url"}}, {Required: []string{"command"}}}
}

// IsStdio reports whether the server is a local process (command) rather
// than a Streamable HTTP endpoint (url).
func (s ServerSpec) IsStdio() bool { return len(s.Command) > 0 }

// Endpoint names the server as recorded: its url, or "stdio:" and the
// program as written for a stdio server (its resolved path is recorded
// when the process starts).
func (s ServerSpec) Endpoint() string {
	if s.IsStdio() {
		return "stdio:" + s.Command[0]
	}
	return s.URL
}

// stdioServer checks a server declared with command (p is its path).
func (c *checker) stdioServer(p string, s ServerSpec) {
	if c.has(p + ".url") {
		c.errf(p+".command", "set either url or command, not both")
	}
	switch {
	case len(s.Command) == 0:
		c.errf(p+".command", "command must name a program: [PROGRAM, ARG...]")
		return
	case strings.TrimSpace(s.Command[0]) == "":
		c.errf(indexPath(p+".command", 0), "the program (command[0]) is empty")
		return
	}
	for i, a := range s.Command {
		if strings.Contains(a, "${{") {
			c.errf(indexPath(p+".command", i), "templates are not allowed in command")
		}
		if strings.ContainsRune(a, 0) {
			c.errf(indexPath(p+".command", i), "command[%d] contains a NUL byte", i)
		}
	}
	if len(s.Headers) > 0 {
		c.errf(p+".headers", "headers apply to url servers only; give a stdio server its secrets through env")
	}
	if c.has(p+".shutdownGraceSeconds") && s.ShutdownGrace <= 0 {
		c.errf(p+".shutdownGraceSeconds", "must be greater than 0, got %d", s.ShutdownGrace)
	}
	if strings.Contains(s.Cwd, "${{") {
		c.errf(p+".cwd", "templates are not allowed in cwd")
	}
	for _, name := range sortedNames(s.Env) {
		ep := joinPath(p+".env", name)
		if !isEnvName(name) {
			c.keyErrf(ep, "%q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", name)
		}
		if v := s.Env[name]; v.IsSecret() {
			c.secretRef(ep, SecretRefSpec{Env: v.Env, File: v.File})
		}
	}
	if c.badUnder("spec.policy") {
		return
	}
	prog, al := s.Command[0], c.w.Spec.Policy.CommandAllowlist
	switch {
	case len(al) == 0:
		c.policyf(indexPath(p+".command", 0), "program %q may not run: spec.policy.commandAllowlist is empty; list %q there", prog, prog)
	case !contains(al, prog):
		c.policyf(indexPath(p+".command", 0), "program %q is not in spec.policy.commandAllowlist %v", prog, al)
	}
}

// commandPolicy checks spec.policy.commandAllowlist itself.
func (c *checker) commandPolicy() {
	for i, e := range c.w.Spec.Policy.CommandAllowlist {
		if strings.TrimSpace(e) == "" {
			c.errf(fmt.Sprintf("spec.policy.commandAllowlist[%d]", i), "empty entry; want a program as command[0] writes it")
		}
	}
}

// MarshalJSON writes a literal as a string and a reference as {env}/{file},
// as the file would (Build round-trips a workflow through JSON).
func (e EnvValueSpec) MarshalJSON() ([]byte, error) {
	if !e.IsSecret() {
		return json.Marshal(e.Value)
	}
	type ref EnvValueSpec
	return json.Marshal(ref(e))
}
