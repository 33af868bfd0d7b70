package workflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport"
)

// Frame event types of a stdio server's process (transport "local" frames).
const (
	typeProcessStarted = vocab.FramePrefix + "process"
	typeProcessExited  = vocab.FramePrefix + "process_exit"
)

// killRecordedServers terminates every stdio server this run started
// whose end is not recorded and which is still alive: the process with
// the recorded pid AND start time (a pid reused by another process is
// never signalled). Its parent-death signal normally killed it with the
// writer; this covers a wrapper's children and platforms without one. It
// returns the pids it signalled.
func killRecordedServers(ctx context.Context, db *events.DB, runID string) ([]int, error) {
	type started struct {
		pid   int
		start uint64
	}
	live := map[string]started{} // by session stream
	err := db.Scan(ctx, runID, 0, func(e events.Event) error {
		if e.Type != typeProcessStarted && e.Type != typeProcessExited {
			return nil
		}
		if e.Type == typeProcessExited {
			delete(live, e.Stream)
			return nil
		}
		f, err := vocab.DecodeFrame(e)
		if err != nil {
			return err
		}
		var info transport.ProcessInfo
		if err := json.Unmarshal(f.Body, &info); err != nil {
			return fmt.Errorf("seq %d: process frame: %w", e.Seq, err)
		}
		live[e.Stream] = started{info.PID, info.StartTime}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read stdio servers of run %s: %w", runID, err)
	}
	var killed []int
	for _, p := range live {
		ok, err := transport.KillRecorded(p.pid, p.start)
		if err != nil {
			return killed, err
		}
		if ok {
			killed = append(killed, p.pid)
		}
	}
	return killed, nil
}
