package spec

import (
	"time"

	"github.com/agentctl/agentctl/transport"
)

// transportPolicy is the workflow's policy as the transport applies it.
func (w *Workflow) transportPolicy() transport.Policy {
	p := w.Spec.Policy
	return transport.Policy{
		NetworkAllowlist:     p.NetworkAllowlist,
		AllowedSchemes:       p.Network.AllowedSchemes,
		AllowedPorts:         p.Network.AllowedPorts,
		AllowPrivate:         p.Network.AllowPrivate,
		EnvironmentAllowlist: p.EnvironmentAllowlist,
		SecretFileRoots:      p.SecretFileRoots,
		ConnectTimeout:       time.Duration(p.Network.ConnectTimeoutSeconds) * time.Second,
		MaxResponseBytes:     p.Network.MaxResponseBytes,
	}
}

// TransportConfig turns a server declaration and the workflow policy into
// the transport's configuration.
func (w *Workflow) TransportConfig(name string) transport.Config {
	srv := w.Spec.MCPServers[name]
	headers := map[string]transport.SecretRef{}
	for k, v := range srv.Headers {
		headers[k] = transport.SecretRef{Env: v.Env, File: v.File}
	}
	cfg := transport.Config{
		URL:         srv.URL,
		Headers:     headers,
		Policy:      w.transportPolicy(),
		Timeout:     time.Duration(srv.TimeoutSeconds) * time.Second,
		MaxDuration: time.Duration(srv.MaxSeconds) * time.Second,
		Elicitation: w.elicits(name),
		// The pin: "" is the default revision.
		ProtocolVersion: srv.ProtocolVersion,
		// At 2026-07-28 the server decides, per tools/call, to answer with
		// a task, and only to a client declaring the tasks extension: it
		// is declared unless the server's useTasks is never.
		TasksExtension: srv.TasksPolicy() != UseTasksNever,
	}
	if srv.IsStdio() {
		cfg.URL, cfg.Headers = "", nil
		cfg.Command = append([]string(nil), srv.Command...)
		cfg.Dir = srv.Cwd
		cfg.ShutdownGrace = time.Duration(srv.ShutdownGrace) * time.Second
		cfg.Env = map[string]transport.EnvValue{}
		for k, v := range srv.Env {
			cfg.Env[k] = transport.EnvValue{Value: v.Value, Ref: transport.SecretRef{Env: v.Env, File: v.File}}
		}
	}
	return cfg
}

// elicits reports whether a task calling server uses an action that answers
// elicitation requests: only then is the capability declared to it.
func (w *Workflow) elicits(server string) bool {
	for _, t := range w.Spec.Tasks {
		if t.With.Server == server && w.Action(t).Elicitation != nil {
			return true
		}
	}
	return false
}
