// Command producer queues runs for the peer benchmark (bench/peers): it is
// the "submit" half of agentctl's many-runs shapes, one process that
// queues N runs of a workflow file through workflow.Runner.Submit (what
// `agentctl submit` calls), K at once, on agentctl's database.
//
//	producer -db DSN -wf FILE -n N -conc K
//
// It is a module of its own that requires agentctl alone, so it is built
// with exactly agentctl's dependency versions, as the agentctl binary is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("producer", flag.ContinueOnError)
	db := fs.String("db", "", "agentctl's database (a SQLite path or a postgres:// URL)")
	file := fs.String("wf", "", "the workflow file")
	n := fs.Int("n", 1, "runs to queue")
	conc := fs.Int("conc", 1, "submits at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" || *file == "" || *n < 1 || *conc < 1 {
		return errors.New("-db and -wf are required; -n and -conc must be at least 1")
	}
	ctx := context.Background()
	wf, err := spec.Load(*file)
	if err != nil {
		return err
	}
	edb, err := events.Open(ctx, *db, events.Options{})
	if err != nil {
		return err
	}
	defer edb.Close()
	r := &workflow.Runner{DB: edb}
	var next atomic.Int64
	errs := make(chan error, *conc)
	var wg sync.WaitGroup
	for range min(*conc, *n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*n) {
				if _, err := r.Submit(ctx, wf, map[string]any{}, workflow.RunOptions{Command: "submit"}); err != nil {
					errs <- err
					next.Store(int64(*n))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(<-errs); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	return edb.Close()
}
