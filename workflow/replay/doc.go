// Package replay (docs/ARCHITECTURE.md, "Replay") re-runs a recorded
// workflow against its own evidence: [Prepare] reads a finished run's
// workflow and inputs, and its [Dialer] answers the run loop's requests
// from the run's log. The run loop (package workflow) does not import it:
// it sees a [workflow.Dialer] that also implements [workflow.ReplaySource],
// and its sessions implement [workflow.Recorded]; cmd/agentctl wires them.
//
// The source run is indexed once: sessions by (remote, generation), calls by
// (task, attempt, ordinal), and each call's sends ("dispatches") in order,
// each with the frames it produced and its outcome (a result, or the error
// with the trigger the state machine fired). The run loop then drives a
// normal run whose Dialer is a [Dialer]: every Connect, ListTools and
// CallTool is answered from the index, and a recorded failure comes back as
// the same failure, so the state machine takes the same decisions. Nothing
// here opens a socket or resolves a secret.
//
// Evidence is referenced, not copied: where a live run records frames, the
// replay records one replay.frames event per group of recorded frames (a
// session's initialize, its tools/list, one send of a call), naming the run
// that holds them, their seq spans, their count and the chain hash of the
// last one. Indexing reads each frame's members up to its body (responses
// whole, they rebuild results), so a replay costs a read of the source and a
// few writes, whatever the size of the evidence; inspect shows the
// referenced frames as the replay's own.
//
// A replay of a replay indexes the replay's references (reading the
// referenced responses); its own references name the run that holds the
// frames, while its source links (sourceRunId, sourceEffectId) name the
// replay, one hop at a time.
//
// Files:
//   - replay.go: [Prepare] and [Dialer];
//   - index.go reads the source run into an index (one indexer method per
//     event type), task_index.go indexes the requests about MCP tasks;
//   - session.go answers a session's initialize, tools/list and tools/call
//     from the index, task.go the requests about tasks;
//   - follow.go tells the run loop how the source continued a task after
//     its attempt ended (an operator's reconcile, a resume).
package replay
