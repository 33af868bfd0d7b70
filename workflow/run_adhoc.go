package workflow

import (
	"context"
	"encoding/json"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// ListTools records a one-task run that opens a session with remote and
// lists its tools (`agentctl mcp tools`). Like Run, a non-nil error means
// nothing was recorded; otherwise Result says how it ended.
func (r *Runner) ListTools(ctx context.Context, wf *spec.Workflow, remote string) (*Result, *transport.Catalog, error) {
	newID := r.NewRunID
	if newID == nil {
		newID = func() string { return NewRunID("run") }
	}
	rn := newRun(r, wf, newID(), nil)
	created := projector.RunCreated{RunID: rn.id, Workflow: wf.Metadata.Name, File: wf.File, Digest: wf.Digest, Source: string(wf.Source),
		Inputs: map[string]any{}, Mode: "adhoc", Servers: map[string]string{remote: wf.Spec.MCPServers[remote].URL}, Command: "mcp tools"}
	if err := rn.append(events.Record{Stream: "run", Type: projector.TypeRunCreated, Payload: created}); err != nil {
		return nil, nil, err
	}
	const taskID = "tools"
	stream := taskStream(taskID, 1)
	if err := rn.append(events.Record{Stream: stream, Type: projector.TypeTaskStarted, Payload: projector.TaskStarted{TaskID: taskID, Attempt: 1, Server: remote, Action: "mcp.tools"}}); err != nil {
		return nil, nil, err
	}
	rs, err := rn.openSession(ctx, remote, taskID, 1)
	fin := projector.TaskFinished{TaskID: taskID, Attempt: 1, State: StateSucceeded}
	var fail *Error
	if err != nil {
		code := exitFor(err)
		fin.State, fin.Error, fin.ErrorKind = stateForExit(code), err.Error(), string(transport.KindOf(err))
		fail = &Error{RunID: rn.id, Code: code, Err: err}
	} else {
		names := make([]string, 0, len(rs.catalog.Tools))
		for _, t := range rs.catalog.Tools {
			names = append(names, t.Name)
		}
		fin.Output, _ = json.Marshal(map[string]any{"tools": names})
	}
	if aerr := rn.append(events.Record{Stream: stream, Type: projector.TypeTaskFinished, Payload: fin}); aerr != nil {
		fail = rn.storageFail(aerr)
	}
	res := rn.finish(nil, fail)
	if rs == nil {
		return res, nil, nil
	}
	return res, rs.catalog, nil
}
