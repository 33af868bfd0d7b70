// Package events is agentctl's append-only event log in SQLite: the only
// source of truth for what a run sent, received and decided.
//
// The caller's duties:
//
//  1. Open the database once per process with [Open]; it migrates a fresh
//     or older file and refuses a newer one untouched.
//  2. Append every protocol step with [DB.Append] BEFORE acting on it (the
//     request frame before its bytes are sent, each received frame before
//     the next one is read). One Append commits or fails as a whole: the
//     events of one step and the projection updates they cause commit
//     together. Appends made concurrently (tasks, the runs of a worker)
//     share commits (group commit); each returns only once its own events
//     are durable. [DB.CommitStats] counts both.
//  3. Read a run back with [DB.Events] or [DB.Scan]; check it with [Verify].
//
// Rows are never updated or deleted: triggers in the schema abort any
// UPDATE or DELETE on events. Each row carries a hash chained to the
// previous row of the same run, so a copy of the log can be verified offline.
package events
