package workflow

import (
	"context"
	"encoding/json"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// ListTools records a one-task run that opens a session with remote and
// lists its tools (`agentctl mcp tools`). Like Run, a non-nil error means
// nothing was recorded; otherwise Result says how it ended.
func (r *Runner) ListTools(ctx context.Context, wf *spec.Workflow, remote string) (*Result, *transport.Catalog, error) {
	return r.ListToolsWith(ctx, wf, remote, RunOptions{Mode: "adhoc", Command: "mcp tools"})
}

// ListToolsWith is ListTools with the run's options: a replay of a
// listing (Mode "replay", Runner.Dialer a replay.Dialer) lists from the
// source's recorded session, as a replay of a workflow calls from it.
func (r *Runner) ListToolsWith(ctx context.Context, wf *spec.Workflow, remote string, opts RunOptions) (*Result, *transport.Catalog, error) {
	newID := r.NewRunID
	if newID == nil {
		prefix := "run"
		if opts.Mode == "replay" {
			prefix = "replay"
		}
		newID = func() string { return NewRunID(prefix) }
	}
	rn := newRun(r, wf, newID(), nil)
	rn.replay = opts.Mode == "replay"
	created := vocab.RunCreated{RunID: rn.id, Workflow: wf.Metadata.Name, File: wf.File, Digest: wf.Digest, Source: string(wf.Source),
		Inputs: map[string]any{}, Mode: opts.Mode, SourceRunID: opts.SourceRunID, Servers: map[string]string{remote: wf.Spec.MCPServers[remote].Endpoint()}, Command: opts.Command}
	if err := rn.append(events.Record{Stream: "run", Type: vocab.TypeRunCreated, Payload: created}); err != nil {
		return nil, nil, err
	}
	return rn.listTools(ctx, remote, 1)
}

// listToolsTask is the task id of a listing run.
const listToolsTask = "tools"

// listTools is the listing's one task, attempt n, then run.finished.
func (rn *run) listTools(ctx context.Context, remote string, attempt int) (*Result, *transport.Catalog, error) {
	rn.listing = true
	stream := taskStream(listToolsTask, attempt)
	if err := rn.append(events.Record{Stream: stream, Type: vocab.TypeTaskStarted, Payload: vocab.TaskStarted{TaskID: listToolsTask, Attempt: attempt, Server: remote, Action: "mcp.tools"}}); err != nil {
		return nil, nil, err
	}
	rs, err := rn.openSession(ctx, remote, listToolsTask, attempt)
	fin := vocab.TaskFinished{TaskID: listToolsTask, Attempt: attempt, State: StateSucceeded}
	var fail *Error
	if err != nil {
		code := exitFor(err)
		if ctx.Err() != nil {
			code = ExitCancelled // stopped (Ctrl-C, a closed stdout): resume lists again
		}
		fin.State, fin.Error, fin.ErrorKind = stateFor(code, err), err.Error(), string(transport.KindOf(err))
		fail = &Error{RunID: rn.id, Code: code, Err: err}
	} else {
		names := make([]string, 0, len(rs.catalog.Tools))
		for _, t := range rs.catalog.Tools {
			names = append(names, t.Name)
		}
		fin.Output, _ = json.Marshal(map[string]any{"tools": names})
	}
	if aerr := rn.append(events.Record{Stream: stream, Type: vocab.TypeTaskFinished, Payload: fin}); aerr != nil {
		fail = rn.storageFail(aerr)
	}
	res := rn.finish(nil, fail)
	if rs == nil {
		return res, nil, nil
	}
	return res, rs.catalog, nil
}
