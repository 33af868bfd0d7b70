// Package worker executes queued runs, several at once in one process,
// and resumes runs whose process died: `agentctl worker`. It decides which
// runs to take and when; running one is package workflow's job
// ([workflow.Runner.RunQueued] for a queued run, [workflow.Runner.Resume]
// for an orphan), and stopping one before its next task is
// [workflow.Runner.Stop].
//
//   - worker.go: [Worker] and [Worker.Run], the loop that lists or claims
//     runs, executes up to Concurrency at once and stops on its context.
//   - queue.go: [Queue], which runs may be taken, and [LocalQueue], the
//     answer of one database on one machine (the runs projection and the
//     per-run kernel lock).
//   - lease.go: [ClaimingQueue] and [LeaseQueue], the PostgreSQL queue a
//     fleet of workers shares through leases (events.ClaimRuns).
package worker
