// Package projector folds the event log into the views people and commands
// read: the runs, tasks, protocol_sessions and protocol_calls tables, and the
// inspect document.
//
// The caller's duties: pass [Apply] as the events.Applier of every append, so
// each view changes in the same transaction as the events that cause it;
// call [Rebuild] to recompute a run's views from the log alone. A fold reads
// only the events (timestamps come from created_at), so rebuilt rows equal
// incrementally maintained rows byte for byte.
package projector
