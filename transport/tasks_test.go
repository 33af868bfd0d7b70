package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// taskServer is a raw MCP server for task tests: it speaks just enough
// JSON-RPC over POST for initialize, tools/list, tools/call with params.task
// and tasks/*, follows a script, and records what it saw with server-side
// timestamps.
type taskServer struct {
	// Script, set before the first request.
	caps         string   // capabilities JSON; "" = tasks for tools/call
	pollInterval int      // ms, in every task object; 0 = omitted
	statuses     []string // status answered by the n-th tasks/get (the last repeats)
	getError     string   // a JSON-RPC error object answering every tasks/get, e.g. unknown task
	getStatus    int      // an HTTP status answering every tasks/get
	callError    string   // a JSON-RPC error object answering tools/call
	callSSE      string   // raw SSE events sent before the tools/call response
	direct       bool     // answer tools/call with a CallToolResult despite params.task
	createTask   string   // raw task object answering tools/call ("" = a valid one)
	result       string   // tasks/result result; "" = a text result
	cancelStatus string   // status answered by tasks/cancel; "" = cancelled

	mu       sync.Mutex
	methods  []string
	callAt   time.Time
	getsAt   []time.Time
	sessions []string // MCP-Session-Id of every request after initialize
	params   map[string]json.RawMessage
}

const taskID = "task-7f3a"

func startTaskServer(t *testing.T, ts *taskServer) string {
	t.Helper()
	ts.params = map[string]json.RawMessage{}
	srv := httptest.NewServer(ts)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (ts *taskServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ts.mu.Lock()
	now := time.Now()
	ts.methods = append(ts.methods, req.Method)
	ts.params[req.Method] = req.Params
	sid := r.Header.Get("Mcp-Session-Id")
	if req.Method != "initialize" {
		ts.sessions = append(ts.sessions, sid)
	}
	n := 0
	switch req.Method {
	case "tools/call":
		ts.callAt = now
	case methodTasksGet:
		ts.getsAt = append(ts.getsAt, now)
		n = len(ts.getsAt)
	}
	ts.mu.Unlock()

	if req.Method != "initialize" && sid != "sess-1" {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if req.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := func(member, v string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%q:%s}`, req.ID, member, v)
	}
	switch req.Method {
	case "initialize":
		caps := ts.caps
		if caps == "" {
			caps = `{"tools":{"listChanged":true},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}}`
		}
		w.Header().Set("Mcp-Session-Id", "sess-1")
		reply("result", `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"serverInfo":{"name":"tasks","version":"1"}}`)
	case "tools/list":
		reply("result", `{"tools":[{"name":"research","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}`)
	case "tools/call":
		switch {
		case ts.callError != "":
			reply("error", ts.callError)
		case ts.direct:
			reply("result", `{"content":[{"type":"text","text":"direct"}]}`)
		case ts.callSSE != "":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "%sdata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"task\":%s}}\n\n", ts.callSSE, req.ID, ts.task("working"))
		case ts.createTask != "":
			reply("result", `{"task":`+ts.createTask+`}`)
		default:
			reply("result", `{"task":`+ts.task("working")+`}`)
		}
	case methodTasksGet:
		switch {
		case ts.getStatus != 0:
			w.WriteHeader(ts.getStatus)
		case ts.getError != "":
			reply("error", ts.getError)
		default:
			st := "working"
			if len(ts.statuses) > 0 {
				st = ts.statuses[min(n, len(ts.statuses))-1]
			}
			reply("result", ts.task(st))
		}
	case methodTasksResult:
		res := ts.result
		if res == "" {
			res = `{"content":[{"type":"text","text":"report"}],"structuredContent":{"stages":4},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + taskID + `"}}}`
		}
		reply("result", res)
	case methodTasksCancel:
		st := ts.cancelStatus
		if st == "" {
			st = "cancelled"
		}
		reply("result", ts.task(st))
	default:
		reply("error", `{"code":-32601,"message":"method not found"}`)
	}
}

// task renders the task object with status st.
func (ts *taskServer) task(st string) string {
	pi := ""
	if ts.pollInterval > 0 {
		pi = fmt.Sprintf(`,"pollInterval":%d`, ts.pollInterval)
	}
	return fmt.Sprintf(`{"taskId":%q,"status":%q,"statusMessage":"stage %s","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:30:01Z","ttl":60000%s}`,
		taskID, st, st, pi)
}

func (ts *taskServer) seen() (methods []string, callAt time.Time, gets []time.Time, sessions []string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.methods), ts.callAt, slices.Clone(ts.getsAt), slices.Clone(ts.sessions)
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

func research() CallRequest {
	return CallRequest{Tool: "research", Arguments: json.RawMessage(`{"topic":"mcp"}`)}
}

// TestTask_CompletesAfterPolls: one tools/call, tasks/get until completed,
// with the server's pollInterval honoured between every two requests
// (server-side timestamps), then tasks/result; every frame reaches the sink.
func TestTask_CompletesAfterPolls(t *testing.T) {
	const interval = 40 // ms
	ts := &taskServer{pollInterval: interval, statuses: []string{"working", "working", "working", "completed"}}
	s := connect(t, newClient(t, startTaskServer(t, ts), nil), nil)
	if !s.ToolCallTasks() {
		t.Fatal("ToolCallTasks = false for a server advertising tasks.requests.tools.call")
	}
	var rec recorder
	ctx := context.Background()
	tc, err := s.CallToolTask(ctx, research(), time.Hour, rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	if tc.Result != nil || tc.Task == nil || tc.Task.ID != taskID || tc.Task.Status != TaskWorking ||
		tc.Task.PollInterval != interval*time.Millisecond || tc.Task.TTL != time.Minute || tc.Task.StatusMessage != "stage working" {
		t.Fatalf("CallToolTask = %+v (task %+v); want task %s working, pollInterval %dms, ttl 1m", tc, tc.Task, taskID, interval)
	}
	var observed []TaskStatus
	last, err := s.PollTask(ctx, tc.Task, rec.sink, func(t *Task) error {
		observed = append(observed, t.Status)
		return nil
	})
	if err != nil || last.Status != TaskCompleted {
		t.Fatalf("PollTask = %+v, %v; want completed", last, err)
	}
	if got := fmt.Sprint(observed); got != "[working working working completed]" {
		t.Errorf("observed %s", got)
	}
	res, err := s.TaskResult(ctx, last.ID, rec.sink)
	if err != nil || res.IsError || string(res.StructuredContent) != `{"stages":4}` {
		t.Fatalf("TaskResult = %+v, %v", res, err)
	}

	methods, callAt, gets, _ := ts.seen()
	if count(methods, "tools/call") != 1 || len(gets) != 4 || count(methods, methodTasksResult) != 1 {
		t.Errorf("server saw %v; want one tools/call, 4 tasks/get, one tasks/result", methods)
	}
	prev := callAt
	for i, at := range gets {
		if gap := at.Sub(prev); gap < interval*time.Millisecond {
			t.Errorf("tasks/get %d came %v after the previous request; pollInterval is %dms", i+1, gap, interval)
		}
		prev = at
	}
	var task struct {
		Task struct {
			TTL int64 `json:"ttl"`
		} `json:"task"`
	}
	ts.mu.Lock()
	_ = json.Unmarshal(ts.params["tools/call"], &task)
	ts.mu.Unlock()
	if task.Task.TTL != 3600000 {
		t.Errorf("params.task.ttl = %d; want 3600000", task.Task.TTL)
	}
	var outs []string
	for _, f := range rec.all() {
		if f.Dir == "out" {
			outs = append(outs, f.Method)
		}
	}
	if want := "[tools/call tasks/get tasks/get tasks/get tasks/get tasks/result]"; fmt.Sprint(outs) != want {
		t.Errorf("out frames %v; want %s", outs, want)
	}
}

// TestTask_Outcomes: a task that fails, is cancelled by the server, or wants
// input ends polling with that status; a failed task's result is isError.
func TestTask_Outcomes(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   TaskStatus
	}{
		{"failed", TaskFailed},
		{"cancelled", TaskCancelled},
		{"input_required", TaskInputRequired},
	} {
		t.Run(tc.status, func(t *testing.T) {
			ts := &taskServer{pollInterval: 10, statuses: []string{"working", tc.status},
				result: `{"content":[{"type":"text","text":"rate limited"}],"isError":true}`}
			s := connect(t, newClient(t, startTaskServer(t, ts), nil), nil)
			ctx := context.Background()
			call, err := s.CallToolTask(ctx, research(), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			last, err := s.PollTask(ctx, call.Task, nil, nil)
			if err != nil || last.Status != tc.want {
				t.Fatalf("PollTask = %+v, %v; want %s", last, err, tc.want)
			}
			if methods, _, gets, _ := ts.seen(); len(gets) != 2 || count(methods, "tools/call") != 1 {
				t.Errorf("server saw %v; want one tools/call and 2 tasks/get", methods)
			}
			if tc.want == TaskFailed {
				res, err := s.TaskResult(ctx, last.ID, nil)
				if err != nil || !res.IsError {
					t.Errorf("TaskResult of a failed task = %+v, %v; want isError", res, err)
				}
			}
			var task struct{ Task json.RawMessage }
			ts.mu.Lock()
			_ = json.Unmarshal(ts.params["tools/call"], &task)
			ts.mu.Unlock()
			if string(task.Task) != "{}" {
				t.Errorf("params.task = %s with ttl 0; want {}", task.Task)
			}
		})
	}
}

// TestTask_CancelConfirmed: tasks/cancel returns the task as cancelled.
func TestTask_CancelConfirmed(t *testing.T) {
	ts := &taskServer{}
	s := connect(t, newClient(t, startTaskServer(t, ts), nil), nil)
	got, err := s.CancelTask(context.Background(), taskID, nil)
	if err != nil || got.Status != TaskCancelled {
		t.Fatalf("CancelTask = %+v, %v; want cancelled", got, err)
	}
	ts.mu.Lock()
	p := string(ts.params[methodTasksCancel])
	ts.mu.Unlock()
	if p != `{"taskId":"`+taskID+`"}` {
		t.Errorf("tasks/cancel params %s", p)
	}
}

// TestTask_Lost: an unknown or expired task id (-32602) and a 404 for the
// session are TaskLost, never PollAgain; a 5xx, a timeout or a malformed
// answer are PollAgain.
func TestTask_Lost(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name            string
		ts              *taskServer
		lost, pollAgain bool
		kind            Kind
	}{
		{"unknown id", &taskServer{getError: `{"code":-32602,"message":"Failed to retrieve task: Task not found"}`}, true, false, KindRemoteError},
		{"expired", &taskServer{getError: `{"code":-32602,"message":"Failed to retrieve task: Task has expired"}`}, true, false, KindRemoteError},
		{"internal error", &taskServer{getError: `{"code":-32603,"message":"boom"}`}, false, false, KindRemoteError},
		{"503", &taskServer{getStatus: http.StatusServiceUnavailable}, false, true, KindHTTPStatus},
		{"malformed", &taskServer{statuses: []string{"sleeping"}}, false, true, KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := connect(t, newClient(t, startTaskServer(t, tc.ts), nil), nil)
			_, err := s.GetTask(ctx, taskID, nil)
			wantKind(t, err, tc.kind)
			if TaskLost(err) != tc.lost || PollAgain(err) != tc.pollAgain {
				t.Errorf("TaskLost = %v, PollAgain = %v; want %v, %v (%v)", TaskLost(err), PollAgain(err), tc.lost, tc.pollAgain, err)
			}
		})
	}
	t.Run("session gone", func(t *testing.T) {
		ts := &taskServer{}
		c := newClient(t, startTaskServer(t, ts), nil)
		s, err := c.Reattach("sess-0")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.GetTask(ctx, taskID, nil)
		wantKind(t, err, KindSessionExpired)
		if !TaskLost(err) || PollAgain(err) {
			t.Errorf("404 on a reattached session: TaskLost = %v, PollAgain = %v; want true, false", TaskLost(err), PollAgain(err))
		}
	})
	t.Run("not a task op", func(t *testing.T) {
		if TaskLost(&Error{Op: "tools/call", Kind: KindSessionExpired, Sent: true}) {
			t.Error("a 404 on tools/call is not a lost task")
		}
	})
}

// TestTask_Reattach: after a restart the recorded session is used as is:
// no initialize, the session header and protocol version on every request.
func TestTask_Reattach(t *testing.T) {
	ts := &taskServer{pollInterval: 10, statuses: []string{"working", "completed"}}
	url := startTaskServer(t, ts)
	first := connect(t, newClient(t, url, nil), nil)
	call, err := first.CallToolTask(context.Background(), research(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	recorded := first.SessionID()
	if recorded != "sess-1" || first.IDDigest() == "" || strings.Contains(first.IDDigest(), recorded) {
		t.Fatalf("SessionID = %q, IDDigest = %q", recorded, first.IDDigest())
	}
	// A new process: a new client, the recorded session id and task id.
	s, err := newClient(t, url, nil).Reattach(recorded)
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.PollTask(context.Background(), &Task{ID: call.Task.ID, Status: TaskWorking, PollInterval: 10 * time.Millisecond}, nil, nil)
	if err != nil || last.Status != TaskCompleted {
		t.Fatalf("PollTask after reattach = %+v, %v", last, err)
	}
	if _, err := s.TaskResult(context.Background(), last.ID, nil); err != nil {
		t.Fatal(err)
	}
	methods, _, _, sessions := ts.seen()
	if count(methods, "initialize") != 1 || count(methods, "tools/call") != 1 {
		t.Errorf("server saw %v; want one initialize and one tools/call in all", methods)
	}
	for i, sid := range sessions {
		if sid != "sess-1" {
			t.Errorf("request %d carried session %q", i, sid)
		}
	}
	for _, bad := range []string{"", "a b", "sess\n"} {
		if _, err := newClient(t, url, nil).Reattach(bad); err == nil {
			t.Errorf("Reattach(%q) accepted", bad)
		}
	}
}

// TestTask_CallAnswers: a server may answer params.task with a direct
// result; a CreateTaskResult without a task id, or with an unknown status,
// is malformed and ambiguous (a task may exist).
func TestTask_CallAnswers(t *testing.T) {
	ctx := context.Background()
	s := connect(t, newClient(t, startTaskServer(t, &taskServer{direct: true}), nil), nil)
	tc, err := s.CallToolTask(ctx, research(), 0, nil)
	if err != nil || tc.Task != nil || tc.Result == nil || !strings.Contains(string(tc.Result.Content), "direct") {
		t.Fatalf("direct answer: %+v, %v", tc, err)
	}
	for _, task := range []string{`{"status":"working"}`, `{"taskId":"","status":"working"}`, `{"taskId":"x","status":"done"}`, `"x"`, `{"taskId":7,"status":"working"}`,
		`{"taskId":"x","taskId":"y","status":"working"}`} {
		s := connect(t, newClient(t, startTaskServer(t, &taskServer{createTask: task}), nil), nil)
		_, err := s.CallToolTask(ctx, research(), 0, nil)
		if e := wantKind(t, err, KindMalformed); !e.Ambiguous() {
			t.Errorf("task %s: %v not ambiguous", task, err)
		}
	}
}

// TestTask_Support reads capabilities and execution.taskSupport.
func TestTask_Support(t *testing.T) {
	for caps, want := range map[string]bool{
		`{"tasks":{"requests":{"tools":{"call":{}}}}}`:             true,
		`{"tasks":{"list":{},"cancel":{}}}`:                        false,
		`{"tasks":{"requests":{"tools":{"call":true}}}}`:           false,
		`{"tasks":{"requests":{"sampling":{"createMessage":{}}}}}`: false,
		`{"tools":{}}`: false,
	} {
		s := connect(t, newClient(t, startTaskServer(t, &taskServer{caps: caps}), nil), nil)
		if s.ToolCallTasks() != want {
			t.Errorf("capabilities %s: ToolCallTasks = %v", caps, !want)
		}
	}
	for exec, want := range map[string]TaskSupport{
		``:                                 TaskSupportForbidden,
		`{}`:                               TaskSupportForbidden,
		`{"taskSupport":"required"}`:       TaskSupportRequired,
		`{"taskSupport":"optional"}`:       TaskSupportOptional,
		`{"taskSupport":"forbidden"}`:      TaskSupportForbidden,
		`{"taskSupport":"Required"}`:       TaskSupportForbidden,
		`{"taskSupport":1}`:                TaskSupportForbidden,
		`{"taskSupport":"required","x":1}`: TaskSupportRequired,
	} {
		if got := (Tool{Name: "t", Execution: json.RawMessage(exec)}).TaskSupport(); got != want {
			t.Errorf("execution %s: TaskSupport = %s, want %s", exec, got, want)
		}
	}
}

// TestURLElicitationRequired: -32042 is classified with the URLs' hosts,
// sanitised; anything else is not.
func TestURLElicitationRequired(t *testing.T) {
	ts := &taskServer{callError: `{"code":-32042,"message":"authorize first","data":{"elicitations":[` +
		`{"mode":"url","elicitationId":"e1","url":"https://Auth.Example.com/connect?state=x","message":"connect"},` +
		`{"mode":"url","elicitationId":"e2","url":"https://auth.example.com/other"},` +
		`{"mode":"url","elicitationId":"e3","url":"javascript:alert(1)"},` +
		`{"mode":"url","elicitationId":"e4","url":"https://evil\u001b[31m.example/"}]}}`}
	s := connect(t, newClient(t, startTaskServer(t, ts), nil), nil)
	_, err := s.CallTool(context.Background(), research(), nil)
	hosts, ok := URLElicitationHosts(err)
	if !ok || fmt.Sprint(hosts) != "[auth.example.com]" {
		t.Errorf("URLElicitationHosts = %v, %v; want [auth.example.com], true (err %v)", hosts, ok, err)
	}
	if strings.Contains(err.Error(), "connect?state") {
		t.Errorf("error text prints the remote URL: %v", err)
	}
	if _, ok := URLElicitationHosts(&Error{Kind: KindRemoteError, Code: -32602}); ok {
		t.Error("-32602 classified as URL elicitation")
	}
}

// TestToolsListChanged: a notifications/tools/list_changed on a call's
// stream is recorded by the sink and surfaced until the next ListTools.
func TestToolsListChanged(t *testing.T) {
	ts := &taskServer{callSSE: "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"}
	s := connect(t, newClient(t, startTaskServer(t, ts), nil), nil)
	if s.ToolsChanged() {
		t.Fatal("ToolsChanged before any notification")
	}
	var rec recorder
	if _, err := s.CallToolTask(context.Background(), research(), 0, rec.sink); err != nil {
		t.Fatal(err)
	}
	if !s.ToolsChanged() {
		t.Error("ToolsChanged = false after notifications/tools/list_changed")
	}
	n := 0
	for _, f := range rec.all() {
		if f.Dir == "in" && f.Kind == "notification" && f.Method == methodToolsListChanged {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d list_changed frames reached the sink; want 1", n)
	}
	if _, err := s.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if s.ToolsChanged() {
		t.Error("ToolsChanged still true after ListTools")
	}
}

// TestPollTask_Cancelled: the caller's cancel stops the wait at once.
func TestPollTask_Cancelled(t *testing.T) {
	ts := &taskServer{pollInterval: 60000}
	s := connect(t, newClient(t, startTaskServer(t, ts), func(c *Config) { c.MaxPollInterval = time.Hour }), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.PollTask(ctx, &Task{ID: taskID, Status: TaskWorking, PollInterval: time.Minute}, nil, nil)
	wantKind(t, err, KindCancelled)
	if _, _, gets, _ := ts.seen(); len(gets) != 0 {
		t.Errorf("%d tasks/get after cancel", len(gets))
	}
}
