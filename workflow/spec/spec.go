package spec

import (
	"encoding/json"

	"github.com/agentctl/agentctl/transport"
)

// The types in this file are the workflow file format (docs/WORKFLOWS.md). The yaml
// tags name the keys accepted by the decoder; the json and jsonschema tags
// drive JSONSchema. Keep the three in step: a key added here is accepted by
// Parse and described by JSONSchema at once.

// APIVersion is the only accepted value of a workflow file's apiVersion.
const APIVersion = "agentctl.dev/v1alpha1"

// Kind is the only accepted value of a workflow file's kind.
const Kind = "Workflow"

// ProtocolVersion is the MCP protocol version a server is spoken to in
// when its protocolVersion is not set.
const ProtocolVersion = "2025-11-25"

// ProtocolPins are the values of a server's protocolVersion: a revision,
// or auto (probed once per run, recorded, kept for the run).
var ProtocolPins = []string{"2025-11-25", "2026-07-28", "auto"}

// ActionKindMCPCall is the only action kind: one tools/call on a remote.
const ActionKindMCPCall = "mcp.call"

// Idempotency classes an action may declare (docs/ARCHITECTURE.md).
const (
	IdempotencyPure       = "pure"
	IdempotencyIdempotent = "idempotent"
	IdempotencyKeyed      = "keyed"
	IdempotencyAtMostOnce = "at_most_once"
	IdempotencyUnknown    = "unknown"
)

// Workflow is a parsed, checked workflow file.
type Workflow struct {
	APIVersion string   `yaml:"apiVersion" json:"apiVersion" jsonschema:"required,enum=agentctl.dev/v1alpha1" jsonschema_description:"File format version; must be agentctl.dev/v1alpha1."`
	Kind       string   `yaml:"kind" json:"kind" jsonschema:"required,enum=Workflow" jsonschema_description:"Always Workflow."`
	Metadata   Metadata `yaml:"metadata" json:"metadata" jsonschema:"required" jsonschema_description:"Name and description of the workflow."`
	Spec       Spec     `yaml:"spec" json:"spec" jsonschema:"required" jsonschema_description:"Inputs, policy, remotes, actions, tasks and outputs."`

	File   string `yaml:"-" json:"-"` // path as given to Load or Parse
	Source []byte `yaml:"-" json:"-"` // exact bytes read
	Digest string `yaml:"-" json:"-"` // "sha256:<hex>" of Source

	pos positions // where each field path was found in Source
}

// Metadata names and describes a workflow.
type Metadata struct {
	Name        string `yaml:"name" json:"name" jsonschema:"required,minLength=1" jsonschema_description:"Workflow name; required."`
	Description string `yaml:"description" json:"description,omitempty" jsonschema_description:"Free text for humans."`
}

// Spec is the body of a workflow.
type Spec struct {
	Inputs     map[string]InputSpec  `yaml:"inputs" json:"inputs,omitempty" jsonschema_description:"Declared inputs by name. When absent, templates may name any input."`
	Policy     PolicySpec            `yaml:"policy" json:"policy,omitzero" jsonschema_description:"Network and secret policy applied to every remote."`
	MCPServers map[string]ServerSpec `yaml:"mcpServers" json:"mcpServers,omitempty" jsonschema_description:"Remote MCP servers by name; tasks name them in with.server."`
	Actions    map[string]ActionSpec `yaml:"actions" json:"actions,omitempty" jsonschema_description:"Actions by name; tasks use them as action:<name>."`
	Tasks      []TaskSpec            `yaml:"tasks" json:"tasks" jsonschema:"required,minItems=1" jsonschema_description:"Tasks in file order; each runs after the tasks it needs."`
	Outputs    map[string]any        `yaml:"outputs" json:"outputs,omitempty" jsonschema_description:"Run outputs; values may contain templates naming any task."`
	// Concurrency is how many tasks may be in flight at once; 0 (absent) means DefaultConcurrency.
	Concurrency int `yaml:"concurrency" json:"concurrency,omitempty" jsonschema:"minimum=1" jsonschema_description:"Tasks in flight at once, among those whose needs are met; default 4. 1 runs tasks one at a time in file order."`
}

// DefaultConcurrency is the number of tasks in flight when spec.concurrency is absent.
const DefaultConcurrency = 4

// TaskConcurrency returns spec.concurrency, or DefaultConcurrency when it is absent.
func (w *Workflow) TaskConcurrency() int {
	if w.Spec.Concurrency < 1 {
		return DefaultConcurrency
	}
	return w.Spec.Concurrency
}

// InputSpec declares one workflow input.
type InputSpec struct {
	Type        string `yaml:"type" json:"type,omitempty" jsonschema:"enum=string,enum=number,enum=integer,enum=boolean,enum=object,enum=array" jsonschema_description:"JSON type of the value; absent means any type."`
	Default     any    `yaml:"default" json:"default,omitempty" jsonschema_description:"Value used when the input is not given."`
	Description string `yaml:"description" json:"description,omitempty" jsonschema_description:"Free text for humans."`
	Required    *bool  `yaml:"required" json:"required,omitempty" jsonschema_description:"Whether the input must be given; default: required iff there is no default."`
}

// IsRequired reports whether the input must be given by the caller.
func (in InputSpec) IsRequired() bool {
	if in.Required != nil {
		return *in.Required
	}
	return in.Default == nil
}

// PolicySpec is the network and secret policy of a workflow.
type PolicySpec struct {
	NetworkAllowlist     []string    `yaml:"networkAllowlist" json:"networkAllowlist,omitempty" jsonschema_description:"Hosts remotes may use: exact names, IP literals or *.suffix. Empty allows any host (private addresses still need allowPrivate)."`
	EnvironmentAllowlist []string    `yaml:"environmentAllowlist" json:"environmentAllowlist,omitempty" jsonschema_description:"Environment variables secret references may read; a variable not listed cannot be read."`
	SecretFileRoots      []string    `yaml:"secretFileRoots" json:"secretFileRoots,omitempty" jsonschema_description:"Absolute directories secret files must lie under; a file outside them cannot be read."`
	CommandAllowlist     []string    `yaml:"commandAllowlist" json:"commandAllowlist,omitempty" jsonschema_description:"Programs stdio servers may run, compared with command[0] as written. Empty allows none."`
	Network              NetworkSpec `yaml:"network" json:"network,omitzero" jsonschema_description:"Schemes, ports, private ranges and limits."`
}

// NetworkSpec holds the transport limits of a workflow.
type NetworkSpec struct {
	AllowedSchemes        []string `yaml:"allowedSchemes" json:"allowedSchemes,omitempty" jsonschema_description:"URL schemes remotes may use (http or https); default [https]."`
	AllowedPorts          []int    `yaml:"allowedPorts" json:"allowedPorts,omitempty" jsonschema_description:"Ports remotes may use; empty allows any port."`
	AllowPrivate          bool     `yaml:"allowPrivate" json:"allowPrivate,omitempty" jsonschema_description:"Allow loopback, private and link-local addresses."`
	ConnectTimeoutSeconds int      `yaml:"connectTimeoutSeconds" json:"connectTimeoutSeconds,omitempty" jsonschema:"minimum=0" jsonschema_description:"Connect timeout in seconds; 0 means the transport default."`
	MaxResponseBytes      int64    `yaml:"maxResponseBytes" json:"maxResponseBytes,omitempty" jsonschema:"minimum=0" jsonschema_description:"Cap on bytes read per response; 0 means the transport default."`
}

// ServerSpec declares one remote MCP server.
type ServerSpec struct {
	URL             string                   `yaml:"url" json:"url,omitempty" jsonschema:"minLength=1" jsonschema_description:"Streamable HTTP endpoint of the server; exclusive with command."`
	Command         []string                 `yaml:"command" json:"command,omitempty" jsonschema:"minItems=1" jsonschema_description:"A local server speaking MCP over stdio: [PROGRAM, ARG...]; exclusive with url. PROGRAM must be in spec.policy.commandAllowlist, as written; it is resolved on PATH once."`
	Env             map[string]EnvValueSpec  `yaml:"env" json:"env,omitempty" jsonschema_description:"Environment of a stdio server: NAME: \"literal\" or a secret reference {env: VAR} / {file: PATH}. The child gets only these plus PATH, HOME, LANG, TERM, USER, SHELL, TMPDIR."`
	Cwd             string                   `yaml:"cwd" json:"cwd,omitempty" jsonschema:"minLength=1" jsonschema_description:"Working directory of a stdio server; default: agentctl's."`
	ShutdownGrace   int                      `yaml:"shutdownGraceSeconds" json:"shutdownGraceSeconds,omitempty" jsonschema:"minimum=1" jsonschema_description:"Seconds a stdio server has to exit after its stdin is closed, and again after SIGTERM, before SIGKILL; default 2."`
	Headers         map[string]SecretRefSpec `yaml:"headers" json:"headers,omitempty" jsonschema_description:"Extra request headers; every value is a secret reference."`
	Auth            *AuthSpec                `yaml:"auth" json:"auth,omitempty" jsonschema_description:"How agentctl authorizes itself to a url server: {oauth: {…}} (MCP authorization, OAuth 2.1)."`
	TimeoutSeconds  int                      `yaml:"timeoutSeconds" json:"timeoutSeconds,omitempty" jsonschema:"minimum=1" jsonschema_description:"Inactivity timeout per request, restarted by every frame."`
	MaxSeconds      int                      `yaml:"maxSeconds" json:"maxSeconds,omitempty" jsonschema:"minimum=1" jsonschema_description:"Bound on the whole request."`
	ProtocolVersion string                   `yaml:"protocolVersion" json:"protocolVersion,omitempty" jsonschema:"enum=2025-11-25,enum=2026-07-28,enum=auto" jsonschema_description:"MCP protocol revision: 2025-11-25 (default; initialize and sessions), 2026-07-28 (stateless), or auto (server/discover once, falling back to initialize; the version found is recorded and kept for the run)."`
	UseTasks        string                   `yaml:"useTasks" json:"useTasks,omitempty" jsonschema:"enum=optional,enum=always,enum=never" jsonschema_description:"MCP tasks for this server's tools: optional (default: a task for a tool that requires one, or whose action says task: true), always (also for every tool that allows one), never (a tool that requires a task fails before sending)."`
}

// The values of ServerSpec.UseTasks.
const (
	UseTasksOptional = "optional"
	UseTasksAlways   = "always"
	UseTasksNever    = "never"
)

// TasksPolicy returns the server's useTasks, or "optional" when absent.
func (s ServerSpec) TasksPolicy() string {
	if s.UseTasks == "" {
		return UseTasksOptional
	}
	return s.UseTasks
}

// SecretRefSpec names where a secret comes from: exactly one of Env or File.
type SecretRefSpec struct {
	Env  string `yaml:"env" json:"env,omitempty" jsonschema:"oneof_required=env,minLength=1" jsonschema_description:"Environment variable holding the value."`
	File string `yaml:"file" json:"file,omitempty" jsonschema:"oneof_required=file,minLength=1" jsonschema_description:"File holding the value (trailing newline trimmed)."`
}

// ActionSpec declares an action tasks can use.
type ActionSpec struct {
	Kind        string     `yaml:"kind" json:"kind" jsonschema:"required,enum=mcp.call" jsonschema_description:"Action kind; only mcp.call."`
	Idempotency string     `yaml:"idempotency" json:"idempotency,omitempty" jsonschema:"enum=pure,enum=idempotent,enum=keyed,enum=at_most_once,enum=unknown" jsonschema_description:"Whether a resend is safe; default unknown (never resent)."`
	Retry       *RetrySpec `yaml:"retry" json:"retry,omitempty" jsonschema_description:"Retry policy: new attempts after a definitive failure only, never after uncertain."`
	// Task asks for an MCP task when the tool allows one (taskSupport
	// optional); a tool that requires one gets one regardless.
	Task           bool `yaml:"task" json:"task,omitempty" jsonschema_description:"Call the tool as an MCP task when it allows one (execution.taskSupport optional); a tool that requires a task always gets one."`
	TaskTTLSeconds int  `yaml:"taskTtlSeconds" json:"taskTtlSeconds,omitempty" jsonschema:"minimum=1" jsonschema_description:"How long the server should keep the task (params.task.ttl); default 3600."`
	// Elicitation answers the server's requests for user input during the
	// call; absent, agentctl declares no elicitation capability for it.
	Elicitation *ElicitationSpec `yaml:"elicitation" json:"elicitation,omitempty" jsonschema_description:"How to answer the server's elicitation requests (user input) during the call; absent means the capability is not declared."`
}

// ElicitationSpec says how an action answers elicitation/create: nobody is
// there to ask, so the author decides ahead.
type ElicitationSpec struct {
	Mode   string         `yaml:"mode" json:"mode" jsonschema:"required,enum=decline,enum=defaults,enum=values" jsonschema_description:"decline; defaults (accept with the requested schema's defaults); or values (accept with the values below over the defaults). A request whose required fields cannot all be filled is declined."`
	Values map[string]any `yaml:"values" json:"values,omitempty" jsonschema_description:"Answers by field name, for mode values (string, number, integer or boolean)."`
}

// Policy is the transport's form of the spec; nil for a nil spec.
func (e *ElicitationSpec) Policy() *transport.ElicitationPolicy {
	if e == nil {
		return nil
	}
	p := &transport.ElicitationPolicy{Mode: e.Mode}
	if len(e.Values) > 0 {
		// As JSON reads them (numbers float64), whatever YAML decoded.
		if b, err := json.Marshal(e.Values); err == nil {
			_ = json.Unmarshal(b, &p.Values)
		}
	}
	return p
}

// DefaultTaskTTLSeconds is the task ttl asked for when taskTtlSeconds is absent.
const DefaultTaskTTLSeconds = 3600

// TaskTTL returns taskTtlSeconds, or DefaultTaskTTLSeconds when absent.
func (a ActionSpec) TaskTTL() int {
	if a.TaskTTLSeconds < 1 {
		return DefaultTaskTTLSeconds
	}
	return a.TaskTTLSeconds
}

// RetrySpec is an action's retry policy (Temporal's names). A retry is a new
// attempt with a new effect identity, made only after a definitive failure.
type RetrySpec struct {
	MaxAttempts            int     `yaml:"maxAttempts" json:"maxAttempts" jsonschema:"required,minimum=1" jsonschema_description:"Attempts in all, the first included."`
	InitialIntervalSeconds float64 `yaml:"initialIntervalSeconds" json:"initialIntervalSeconds,omitempty" jsonschema:"minimum=0" jsonschema_description:"Wait before the second attempt; default 1."`
	BackoffFactor          float64 `yaml:"backoffFactor" json:"backoffFactor,omitempty" jsonschema:"minimum=1" jsonschema_description:"Each wait is the previous one times this; default 2."`
	MaxIntervalSeconds     float64 `yaml:"maxIntervalSeconds" json:"maxIntervalSeconds,omitempty" jsonschema:"minimum=0" jsonschema_description:"Cap on one wait; default 100 times the initial interval."`
}

// Class returns the declared idempotency, or "unknown" when none was declared.
func (a ActionSpec) Class() string {
	if a.Idempotency == "" {
		return IdempotencyUnknown
	}
	return a.Idempotency
}

// TaskSpec is one step of a workflow.
type TaskSpec struct {
	ID           string         `yaml:"id" json:"id" jsonschema:"required,pattern=^[A-Za-z_][A-Za-z0-9_-]*$" jsonschema_description:"Unique task id."`
	Uses         string         `yaml:"uses" json:"uses" jsonschema:"required,pattern=^action:" jsonschema_description:"The action to run, as action:<name>."`
	With         TaskWith       `yaml:"with" json:"with" jsonschema:"required" jsonschema_description:"Server, tool and arguments of the call."`
	Needs        []string       `yaml:"needs" json:"needs,omitempty" jsonschema_description:"Tasks that must succeed first; absent means the previous task."`
	OutputSchema map[string]any `yaml:"outputSchema" json:"outputSchema,omitempty" jsonschema_description:"JSON Schema the task output must satisfy."`
	// ContinueOnError lets the run go on when the task fails; its output is then null.
	ContinueOnError bool `yaml:"continueOnError" json:"continueOnError,omitempty" jsonschema_description:"When the task fails, go on with the run (its output is null) instead of skipping the tasks not yet started."`
	// TimeoutSeconds bounds the task's attempts together (retry waits included); 0 means none.
	TimeoutSeconds int `yaml:"timeoutSeconds" json:"timeoutSeconds,omitempty" jsonschema:"minimum=1" jsonschema_description:"Bound on all attempts of the task together, retry waits included."`

	Line int `yaml:"-" json:"-"` // line of the task in the file
}

// TaskWith holds the call a task makes.
type TaskWith struct {
	Server    string         `yaml:"server" json:"server" jsonschema:"required,minLength=1" jsonschema_description:"Name of a remote under spec.mcpServers."`
	Tool      string         `yaml:"tool" json:"tool" jsonschema:"required,minLength=1" jsonschema_description:"Tool name on that server."`
	Arguments map[string]any `yaml:"arguments" json:"arguments,omitempty" jsonschema_description:"Tool arguments; strings may contain templates."`
}

// ActionName returns the action a task uses: the part of Uses after "action:".
func (t TaskSpec) ActionName() string {
	const p = "action:"
	if len(t.Uses) > len(p) && t.Uses[:len(p)] == p {
		return t.Uses[len(p):]
	}
	return ""
}

// Action returns the action the task uses; the zero ActionSpec if it is not declared.
func (w *Workflow) Action(task TaskSpec) ActionSpec {
	return w.Spec.Actions[task.ActionName()]
}

// Task returns the task with the given id.
func (w *Workflow) Task(id string) (TaskSpec, bool) {
	for _, t := range w.Spec.Tasks {
		if t.ID == id {
			return t, true
		}
	}
	return TaskSpec{}, false
}
