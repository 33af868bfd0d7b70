// Package workflow runs workflows: it executes the tasks of a parsed
// [spec.Workflow], calls tools on remote MCP servers through package
// transport, drives each call through the state machine of package fsm, and
// records every step in the event log (package events) before acting on it.
// It is the one package that wires those together. The workflow language
// itself (types, parse, check, templates, inputs, JSON Schema) is package
// [github.com/agentctl/agentctl/workflow/spec].
//
// Where a reader starts:
//
//   - run.go: [Runner] and [Runner.Run], the run loop: record run.created,
//     run the tasks in order, render the outputs, record run.finished.
//   - run_task.go: one task attempt (sessions with remotes, the call);
//     run_call.go: one tools/call through the fsm, decide → append →
//     send → append the outcome; run_contract.go: the output contract.
//   - run_remote.go: the [Dialer], [Conn] and [Session] interfaces the loop
//     talks to, and [NetworkDialer], their implementation over transport.
//   - resume.go, resume_call.go, resume_log.go: [Runner.Resume] reads a run
//     back from its log and continues it; an interrupted call is settled
//     from its recorded state, never sent blindly again.
//   - reconcile.go: [Reconcile], an operator's verdict on an uncertain call.
//   - replay.go: [PrepareReplay] and [ReplayDialer] run a workflow again
//     against the recorded answers of a source run, without the network;
//     replay_index.go reads the source run into an index (one indexer
//     method per event type), replay_session.go answers from it, and
//     replay_follow.go continues a task as its source's reconcile and
//     resume did.
//   - run_adhoc.go: [Runner.ListTools], the one-task run of `mcp tools`.
//   - auth.go: a remote's auth block as an oauth.Client ([OAuthConfig]),
//     its steps as auth.step events, and [MissingLogins] before a run;
//     credentials.go: [CredentialStore], the database's oauth.Store.
package workflow
