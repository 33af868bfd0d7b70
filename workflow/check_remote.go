package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/canonjson"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// ModeCheck is the mode of a run recorded by `agentctl check --remote`: it
// opens a session with each remote the tasks use and lists its tools, and
// calls none. A worker never takes it up (its queues select mode run), and
// resume refuses it.
const ModeCheck = "check"

// CheckCommand is the command recorded in a check run's run.created.
const CheckCommand = "check --remote"

// Kinds of Finding: stable names for scripts.
const (
	FindingUnknownTool      = "unknown_tool"      // with.tool is not on the server
	FindingInvalidArguments = "invalid_arguments" // static arguments break the tool's inputSchema
	FindingOutputPath       = "output_path"       // a template path the tool's output cannot have
	FindingTaskSupport      = "task_support"      // the call's task use conflicts with execution.taskSupport
	FindingUnsetSecret      = "unset_secret"      // a secret reference resolves empty
)

// Finding is one problem `check --remote` found, at the node of the
// workflow file at fault.
type Finding struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Field   string `json:"field"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// String formats the finding as "file:line:col: kind: message".
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", f.File, f.Line, f.Col, f.Kind, f.Message)
}

// CheckedServer is one remote a check listed.
type CheckedServer struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	Tools int    `json:"tools"`
}

// CheckResult is how a remote check ended: the findings, and the run that
// recorded the evidence (Result.ExitCode 2 when there are findings; a
// remote that could not be reached ends it as it would end a run).
type CheckResult struct {
	Result
	Findings []Finding
	Servers  []CheckedServer
}

// CheckRemote checks wf against its servers (`agentctl check --remote`):
// under the file's own policy it opens a session with each remote the
// tasks use and lists its tools, recorded as a run of mode check, then
// reports unknown tools, static arguments that break a tool's
// inputSchema, template paths a tool's output cannot have, task-support
// conflicts and unset secrets. Like Run, a non-nil error means nothing was
// recorded.
func (r *Runner) CheckRemote(ctx context.Context, wf *spec.Workflow, opts RunOptions) (*CheckResult, error) {
	opts.Mode, opts.Command = ModeCheck, CheckCommand
	newID := r.NewRunID
	if newID == nil {
		newID = func() string { return NewRunID("run") }
	}
	rn := newRun(r, wf, newID(), map[string]any{})
	unlock, err := r.DB.LockNewRun(rn.id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := rn.append(events.Record{Stream: "run", Type: vocab.TypeRunCreated, Payload: runCreated(rn.id, wf, map[string]any{}, opts)}); err != nil {
		return nil, err
	}
	ck := &checker{rn: rn, wf: wf, catalogs: map[string]*remoteState{}}
	fail := ck.run(ctx)
	sort.SliceStable(ck.findings, func(i, j int) bool {
		a, b := ck.findings[i], ck.findings[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return a.Kind < b.Kind
	})
	if fail == nil && len(ck.findings) > 0 {
		fail = &Error{RunID: rn.id, Code: ExitInvalid, Err: fmt.Errorf("check: %d finding(s) in %s", len(ck.findings), wf.File)}
	}
	findings := ck.findings
	if findings == nil {
		findings = []Finding{}
	}
	res := rn.finish(map[string]any{"findings": findings}, fail)
	return &CheckResult{Result: *res, Findings: findings, Servers: ck.servers}, nil
}

// checker is one remote check in progress.
type checker struct {
	rn       *run
	wf       *spec.Workflow
	catalogs map[string]*remoteState // remote → its session, once listed
	servers  []CheckedServer
	findings []Finding
}

func (ck *checker) add(field, kind, format string, args ...any) {
	line, col := ck.wf.Position(field)
	ck.addAt(field, line, col, kind, format, args...)
}

func (ck *checker) addAt(field string, line, col int, kind, format string, args ...any) {
	ck.findings = append(ck.findings, Finding{File: ck.wf.File, Line: line, Col: col, Field: field, Kind: kind, Message: fmt.Sprintf(format, args...)})
}

// run lists every remote the tasks use (a remote whose secrets are unset is
// reported, not contacted), then checks each task against its catalog. A
// remote that cannot be listed ends the check as it would end a run.
func (ck *checker) run(ctx context.Context) *Error {
	getenv := ck.rn.r.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	skip := map[string]bool{}
	for _, d := range ck.wf.UnsetSecrets(getenv) {
		ck.findings = append(ck.findings, Finding{File: d.File, Line: d.Line, Col: d.Col, Field: d.Field, Kind: FindingUnsetSecret, Message: d.Message})
		if name, ok := serverOfField(d.Field); ok {
			skip[name] = true
		}
	}
	var remotes []string
	seen := map[string]bool{}
	for _, t := range ck.wf.Spec.Tasks {
		if !seen[t.With.Server] {
			seen[t.With.Server] = true
			remotes = append(remotes, t.With.Server)
		}
	}
	sort.Strings(remotes)
	for _, remote := range remotes {
		if skip[remote] {
			continue
		}
		if fail := ck.list(ctx, remote); fail != nil {
			return fail
		}
	}
	for i, t := range ck.wf.Spec.Tasks {
		ck.task(i, t)
	}
	ck.outputPaths()
	return nil
}

// pinHint says, for a version refusal, which protocolVersion of remote
// would work: the newest revision agentctl speaks that the server offers.
func pinHint(remote string, err error) string {
	var te *transport.Error
	if !errors.As(err, &te) || te.Kind != transport.KindVersionMismatch || te.Supported == nil {
		return ""
	}
	for _, v := range transport.ProtocolVersions {
		if slices.Contains(te.Supported, v) {
			return fmt.Sprintf(" (pin spec.mcpServers.%s.protocolVersion: %q, which the server offers, or \"auto\")", remote, v)
		}
	}
	return fmt.Sprintf(" (the server offers no revision agentctl speaks: %s)", strings.Join(transport.ProtocolVersions, ", "))
}

// serverOfField returns the remote of a field under spec.mcpServers.<name>.
func serverOfField(field string) (string, bool) {
	rest, ok := strings.CutPrefix(field, "spec.mcpServers.")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, ".")
	return name, name != ""
}

// checkTaskID is the task id under which a check lists remote.
func checkTaskID(remote string) string { return "check-" + remote }

// list opens a session with remote and lists its tools, recorded as a
// task of the check run (task.started, the session's events, task.finished).
func (ck *checker) list(ctx context.Context, remote string) *Error {
	rn, id := ck.rn, checkTaskID(remote)
	stream := taskStream(id, 1)
	if err := rn.append(events.Record{Stream: stream, Type: vocab.TypeTaskStarted, Payload: vocab.TaskStarted{TaskID: id, Attempt: 1, Server: remote, Action: "mcp.tools"}}); err != nil {
		return rn.storageFail(err)
	}
	rs, err := rn.openSession(ctx, remote, id, 1)
	fin := vocab.TaskFinished{TaskID: id, Attempt: 1, State: StateSucceeded}
	var fail *Error
	if err != nil {
		code := exitFor(err)
		if ctx.Err() != nil {
			code = ExitCancelled
		}
		fin.State, fin.Error, fin.ErrorKind = stateFor(code, err), err.Error(), string(transport.KindOf(err))
		fail = &Error{RunID: rn.id, Code: code, Err: fmt.Errorf("check: remote %s: %w%s", remote, err, pinHint(remote, err))}
	} else {
		ck.catalogs[remote] = rs
		ck.servers = append(ck.servers, CheckedServer{Name: remote, URL: ck.wf.Spec.MCPServers[remote].Endpoint(), Tools: len(rs.catalog.Tools)})
		fin.Output, _ = json.Marshal(map[string]any{"tools": len(rs.catalog.Tools)})
	}
	if aerr := rn.append(events.Record{Stream: stream, Type: vocab.TypeTaskFinished, Payload: fin}); aerr != nil {
		return rn.storageFail(aerr)
	}
	return fail
}

// tool returns the listed tool task t calls; ok is false when its remote
// was not listed (unset secrets) or the tool is not on it.
func (ck *checker) tool(t spec.TaskSpec) (transport.Tool, bool) {
	rs := ck.catalogs[t.With.Server]
	if rs == nil {
		return transport.Tool{}, false
	}
	return rs.catalog.Find(t.With.Tool)
}

// task checks the i-th task's tool, static arguments and task support.
func (ck *checker) task(i int, t spec.TaskSpec) {
	rs := ck.catalogs[t.With.Server]
	if rs == nil {
		return
	}
	tool, ok := rs.catalog.Find(t.With.Tool)
	if !ok {
		names := make([]string, 0, len(rs.catalog.Tools))
		for _, x := range rs.catalog.Tools {
			names = append(names, x.Name)
		}
		msg := fmt.Sprintf("tool %q is not on server %s", t.With.Tool, t.With.Server)
		if c := spec.Closest(t.With.Tool, names); c != "" {
			msg += fmt.Sprintf("; did you mean %q?", c)
		} else {
			msg += "; tools: " + toolNames(rs.catalog)
		}
		ck.add(spec.TaskField(i, "with.tool"), FindingUnknownTool, "%s", msg)
		return
	}
	ck.arguments(i, t, tool)
	ck.taskSupport(i, t, tool, rs)
}

// arguments validates the task's static arguments against the tool's
// inputSchema (templated values are known only at run time: skipped).
func (ck *checker) arguments(i int, t spec.TaskSpec, tool transport.Tool) {
	args, templated := ck.wf.StaticArguments(i)
	raw, err := canonjson.Marshal(args)
	if err != nil {
		ck.add(spec.TaskField(i, "with.arguments"), FindingInvalidArguments, "arguments cannot be encoded as JSON: %v", err)
		return
	}
	vs, err := transport.ArgumentViolations(tool, raw, templated)
	if err != nil {
		ck.add(spec.TaskField(i, "with.tool"), FindingInvalidArguments, "%v", err)
		return
	}
	for _, v := range vs {
		where := v.Location
		if where == "" {
			where = "/"
		}
		ck.add(ck.wf.ArgumentField(i, v.Location), FindingInvalidArguments, "tool %q, argument %s: %s", tool.Name, where, v.Message)
	}
}

// taskSupport reports a call whose use of MCP tasks conflicts with the
// tool's execution.taskSupport, as the run loop would decide it.
func (ck *checker) taskSupport(i int, t spec.TaskSpec, tool transport.Tool, rs *remoteState) {
	action := ck.wf.Action(t)
	srv := ck.wf.Spec.MCPServers[t.With.Server]
	support := tool.TaskSupport()
	use, refuse := useTask(support, action.Task, srv.TasksPolicy())
	field := spec.TaskField(i, "with.tool")
	switch {
	case refuse != "":
		ck.add(field, FindingTaskSupport, "tool %q %s (spec.mcpServers.%s.useTasks); the call would fail before sending", tool.Name, refuse, t.With.Server)
	case use && support == transport.TaskSupportRequired && !advertisesTasks(rs):
		ck.add(field, FindingTaskSupport, "tool %q requires a task (execution.taskSupport = required) but server %s does not advertise tasks for tools/call; the call would fail before sending", tool.Name, t.With.Server)
	case action.Task && support == transport.TaskSupportForbidden:
		ck.add(field, FindingTaskSupport, "action %q asks for a task (task: true) but tool %q does not support tasks (execution.taskSupport absent or forbidden); it would be called directly, without a task", t.ActionName(), tool.Name)
	case action.Task && use && !advertisesTasks(rs):
		ck.add(field, FindingTaskSupport, "action %q asks for a task (task: true) but server %s does not advertise tasks for tools/call; it would be called directly, without a task", t.ActionName(), t.With.Server)
	}
}

func advertisesTasks(rs *remoteState) bool {
	ts, ok := rs.sess.(TaskSession)
	return ok && ts.ToolCallTasks()
}

// outputPaths reports templates whose path into a task's output the tool
// cannot produce: against its outputSchema, or, without one, against the
// content array a text-only tool returns.
func (ck *checker) outputPaths() {
	for _, ref := range ck.wf.OutputRefs() {
		t, ok := ck.wf.Task(ref.Task)
		if !ok {
			continue
		}
		tool, ok := ck.tool(t)
		if !ok {
			continue
		}
		var problem string
		if len(tool.OutputSchema) == 0 {
			problem = spec.ContentPathProblem(ref.Path)
		} else {
			var schema map[string]any
			if err := json.Unmarshal(tool.OutputSchema, &schema); err != nil {
				continue // not an object schema: nothing to walk
			}
			problem = spec.OutputPathProblem(schema, ref.Path)
		}
		if problem != "" {
			ck.addAt(ref.Field, ref.Line, ref.Col, FindingOutputPath, "template %s: tool %q of task %s: %s", ref.Text, tool.Name, t.ID, problem)
		}
	}
}
