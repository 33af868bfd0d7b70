// Package workflow runs workflows: it executes the tasks of a parsed
// [spec.Workflow], calls tools on remote MCP servers through package
// transport, drives each call through the state machine of package fsm, and
// records every step in the event log (package events) before acting on it.
// It is the one package that wires those together. The workflow language
// itself (types, parse, check, templates, inputs, JSON Schema) is package
// [github.com/agentctl/agentctl/workflow/spec]; the queue worker that
// executes submitted runs is package
// [github.com/agentctl/agentctl/workflow/worker].
//
// Where a reader starts:
//
//   - run.go: [Runner] and [Runner.Run]: record run.created, execute the
//     task graph, render the outputs, record run.finished.
//   - run_graph.go: the task graph's scheduler. A task starts once every
//     task it needs has ended, up to spec.concurrency tasks at once, the
//     ready ones in file order (with concurrency 1, one after another in
//     file order); a failure without continueOnError starts nothing more,
//     lets the tasks in flight finish and records the rest skipped. It also
//     decides which commit carries a finished task's last records.
//   - run_task.go: one task attempt (sessions with remotes, the call, the
//     retry loop); run_retry.go: when a failed attempt is tried again and
//     after what wait; run_contract.go: the output contract.
//   - run_call.go: one tools/call through the fsm, decide → append → send
//     → append the outcome; run_call_input.go: input-required results
//     (elicitation); run_call_task.go: a call the server runs as an MCP
//     task (accepted, polled, cancelled); task_bounds.go: how long a task
//     call may last and how much of its polling is recorded.
//   - run_remote.go: the [Dialer], [Conn] and [Session] interfaces the loop
//     talks to, and [NetworkDialer], their implementation over transport.
//   - run_adhoc.go: [Runner.ListTools], the one-task run of `mcp tools`
//     (`mcp call` runs a generated workflow); check_remote.go: [Runner.CheckRemote], `check
//     --remote` (tools listed, none called, findings recorded).
//   - queue.go: [Runner.Submit] records a run as queued; [Runner.RunQueued]
//     claims and executes it; [Runner.Stop] ends a run before its next task.
//   - resume.go: [Runner.Resume] reads a run back from its log and continues
//     it; an interrupted call is settled from its recorded state, never sent
//     blindly again. resume_log.go folds the log into what resume needs,
//     resume_call.go rebuilds an interrupted call, resume_task.go an
//     interrupted MCP task, resume_stdio.go a stdio server's process.
//   - reconcile.go: [Reconcile], an operator's verdict on an uncertain call.
//   - replay.go and replay_follow.go: the run loop's side of a replay
//     (package workflow/replay runs a workflow again against the recorded
//     answers of a source run, without the network, through a [Dialer]
//     that is a [ReplaySource]): the failures a replay hands back
//     ([DivergenceError], [ReplayedError]), and a task continued as its
//     source's reconcile and resume did.
//   - exit.go: the exit codes and the one table of error classes ([Class],
//     [Classes]): each class's code, name and hint, which the CLI reports.
//   - run_adhoc.go: [Runner.ListTools], the one-task run of `mcp tools`.
//   - auth.go: a remote's auth block as an oauth.Client ([OAuthConfig]),
//     its steps as auth.step events, and [MissingLogins] before a run;
//     credentials.go: [CredentialStore], the database's oauth.Store.
package workflow
