package workflow

import "github.com/agentctl/agentctl/events/vocab"

// A session.catalog records the tools a session was listed with. The tools
// this run may call on the remote (its tasks' tools; every tool for a
// listing run, `mcp tools`) are recorded whole: resume, replay and the
// schema-digest check read their schemas from here. Every other tool is
// recorded by name, title, description and digest only. Its schemas are in
// the tools/list response frames (this run's; for a borrowed session, its
// origin run's, which session.opened names), and its digest keeps the
// catalog digest reproducible from the record (transport.Catalog.Digest
// hashes the tools' digests). A borrowed session's copy of the catalog thus
// costs each run the schemas of its own tools, not the whole catalog's
// (BENCHMARKS.md, session 20).

// recordedTools is tools as this run's session.catalog on remote records
// them (a new slice; tools is not changed).
func (rn *run) recordedTools(remote string, tools []vocab.ToolInfo) []vocab.ToolInfo {
	out := make([]vocab.ToolInfo, len(tools))
	copy(out, tools)
	if rn.listing {
		return out
	}
	calls := map[string]bool{}
	for _, t := range rn.wf.Spec.Tasks {
		if t.With.Server == remote {
			calls[t.With.Tool] = true
		}
	}
	for i, t := range out {
		if !calls[t.Name] {
			out[i] = vocab.ToolInfo{Name: t.Name, Digest: t.Digest, Title: t.Title, Description: t.Description}
		}
	}
	return out
}
