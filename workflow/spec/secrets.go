package spec

import (
	"fmt"
	"slices"
)

// UnsetSecrets lists the {env: NAME} header references of the remotes the
// tasks use whose variable getenv returns empty, each at the position of
// the reference in the file. An unset secret is a local setup mistake: the
// commands that run a workflow refuse it (exit 2) before anything is sent,
// rather than letting the server answer 401. References the policy refuses
// are Parse's concern and are not listed here.
func (w *Workflow) UnsetSecrets(getenv func(string) string) Diagnostics {
	used := map[string]bool{}
	for _, t := range w.Spec.Tasks {
		used[t.With.Server] = true
	}
	c := &checker{w: w}
	var ds Diagnostics
	for _, name := range sortedNames(w.Spec.MCPServers) {
		if !used[name] {
			continue
		}
		s := w.Spec.MCPServers[name]
		for _, v := range sortedNames(s.Env) {
			ref := s.Env[v]
			if ref.Env == "" || !slices.Contains(w.Spec.Policy.EnvironmentAllowlist, ref.Env) || getenv(ref.Env) != "" {
				continue
			}
			path := joinPath(joinPath(joinPath("spec.mcpServers", name)+".env", v), "env")
			at := c.at(path)
			ds = append(ds, Diagnostic{File: w.File, Line: at.line, Col: at.col, Field: path,
				Message: fmt.Sprintf("secret env:%s (variable %s of stdio server %s) is empty or unset in this environment; set it and run again", ref.Env, v, name)})
		}
		if s.Auth != nil {
			for _, r := range s.Auth.OAuth.authRefs(joinPath("spec.mcpServers", name)) {
				if r.ref.Env == "" || !slices.Contains(w.Spec.Policy.EnvironmentAllowlist, r.ref.Env) || getenv(r.ref.Env) != "" {
					continue
				}
				at := c.at(r.path + ".env")
				ds = append(ds, Diagnostic{File: w.File, Line: at.line, Col: at.col, Field: r.path + ".env",
					Message: fmt.Sprintf("secret env:%s (%s of remote %s) is empty or unset in this environment; set it and run again", r.ref.Env, r.what, name)})
			}
		}
		for _, h := range sortedNames(s.Headers) {
			ref := s.Headers[h]
			if ref.Env == "" || !slices.Contains(w.Spec.Policy.EnvironmentAllowlist, ref.Env) || getenv(ref.Env) != "" {
				continue
			}
			path := joinPath(joinPath(joinPath("spec.mcpServers", name)+".headers", h), "env")
			at := c.at(path)
			ds = append(ds, Diagnostic{File: w.File, Line: at.line, Col: at.col, Field: path,
				Message: fmt.Sprintf("secret env:%s (header %s of remote %s) is empty or unset in this environment; set it and run again", ref.Env, h, name)})
		}
	}
	return ds
}
