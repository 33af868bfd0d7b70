package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// measure runs shape sh once on system sys and returns its sample.
func (e *env) measure(ctx context.Context, sys string, sh shape) (sample, error) {
	schema := ""
	switch sys {
	case sysDBOSShared, sysDBOSPerWF:
		schema = schemaDBOS
	case sysAgentctl, sysAgentAPI, sysAgentQ, sysAgentAPIQ:
		schema = schemaAgentctl
	}
	rows0, err := e.countRows(ctx, schema)
	if err != nil {
		return sample{}, err
	}
	runtime.GC() // the garbage of the last measurement is not this one's
	srv0, self0 := procCPU(e.server.Process.Pid), selfCPU()
	start := time.Now()
	var agent agentSample
	switch sys {
	case sysBareShared, sysBarePerRun:
		err = e.bareShape(ctx, sh, sys == sysBarePerRun)
	case sysDBOSShared, sysDBOSPerWF:
		err = e.dbosShape(sh, sys == sysDBOSPerWF)
	case sysAgentctl:
		agent, err = e.agentctlShape(ctx, sh, e.agentDSN)
	case sysAgentAPI, sysAgentAPIQ:
		agent, err = e.agentAPIShape(ctx, sh, e.agentDSN, sys == sysAgentAPIQ)
	case sysAgentQ:
		agent, err = e.agentctlQueuedShape(ctx, sh, e.agentDSN)
	case sysLite:
		agent, err = e.agentctlShape(ctx, sh, e.liteDB)
	case sysLiteAPI, sysLiteAPIQ:
		agent, err = e.agentAPIShape(ctx, sh, e.liteDB, sys == sysLiteAPIQ)
	case sysLiteQ:
		agent, err = e.agentctlQueuedShape(ctx, sh, e.liteDB)
	default:
		err = fmt.Errorf("unknown system %q", sys)
	}
	s := sample{Wall: time.Since(start), ServerCP: procCPU(e.server.Process.Pid) - srv0, Calls: sh.calls, Rows: -1, Runs: 1}
	if sh.oneCall {
		s.Runs = sh.calls
	}
	if err != nil {
		return sample{}, err
	}
	s.CPU = selfCPU() - self0
	if agent.parts != nil {
		// agentctl's processes (not this one), without the run count
		// checked around them; or the part the producer timed.
		s.Wall, s.CPU, s.Parts = agent.wall, agent.cpu, agent.parts
	}
	if schema != "" {
		rows1, err := e.countRows(ctx, schema)
		if err != nil {
			return sample{}, err
		}
		warm, err := e.runRows(ctx, schema, agent.warmRun)
		if err != nil {
			return sample{}, err
		}
		s.Rows, s.RowsBy = 0, map[string]int{}
		for t, n := range rows1 {
			if d := n - rows0[t] - warm[t]; d != 0 {
				s.RowsBy[t] = d
				s.Rows += d
			}
		}
	}
	return s, nil
}

// runRows counts the rows of run runID in every table of schema that has
// a run_id column, by table (none for runID "").
func (e *env) runRows(ctx context.Context, schema, runID string) (map[string]int, error) {
	if runID == "" {
		return map[string]int{}, nil
	}
	return e.count(ctx, schema, "SELECT table_name FROM information_schema.columns WHERE table_schema = $1 AND column_name = 'run_id'",
		" WHERE run_id = $1", runID)
}

// countRows counts the rows of every table in schema, by table (none for
// "").
func (e *env) countRows(ctx context.Context, schema string) (map[string]int, error) {
	if schema == "" {
		return map[string]int{}, nil
	}
	return e.count(ctx, schema, "SELECT tablename FROM pg_tables WHERE schemaname = $1", "")
}

// count counts, in each table of schema that list names, the rows where
// (a condition on args, or nothing) holds.
func (e *env) count(ctx context.Context, schema, list, where string, args ...any) (map[string]int, error) {
	rows, err := e.admin.Query(ctx, list, schema)
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", schema, err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", schema, err)
	}
	counts := map[string]int{}
	for _, t := range tables {
		var n int
		if err := e.admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, t}.Sanitize()+where, args...).Scan(&n); err != nil {
			return nil, fmt.Errorf("count %s.%s%s: %w", schema, t, where, err)
		}
		counts[t] = n
	}
	return counts, nil
}

// callEcho makes one echo call on cs; an isError result is an error.
func callEcho(ctx context.Context, cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": echoMessage}})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, errors.New("echo answered isError")
	}
	return res, nil
}

// parallel calls fn(i) for i in [0, n) from k goroutines and returns the
// first error.
func parallel(n, k int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(k, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// bareShape runs sh with the go-sdk client alone: on the shared session,
// or (ownSession) on a session opened per run inside the timed section
// (for the one-run shapes, one session for the run).
func (e *env) bareShape(ctx context.Context, sh shape, ownSession bool) error {
	if sh.oneCall {
		return parallel(sh.calls, sh.inFlight, func(int) error {
			cs := e.bare
			if ownSession {
				var err error
				if cs, err = e.connect(ctx); err != nil {
					return err
				}
				defer cs.Close()
			}
			_, err := callEcho(ctx, cs)
			return err
		})
	}
	cs := e.bare
	if ownSession {
		var err error
		if cs, err = e.connect(ctx); err != nil {
			return err
		}
		defer cs.Close()
	}
	return parallel(sh.calls, sh.inFlight, func(int) error {
		_, err := callEcho(ctx, cs)
		return err
	})
}

// peerEnv is the environment the DBOS workflow functions reach for the
// shared session and the server's address (a workflow's input must be
// serialisable, a session is not).
var peerEnv *env

// wfInput is the input of the DBOS workflows.
type wfInput struct {
	Calls      int  `json:"calls"`
	InFlight   int  `json:"inFlight"`
	OwnSession bool `json:"ownSession"`
}

// session returns the session a workflow uses: the shared one, or one it
// opens itself, and the function that closes it.
func (in wfInput) session(ctx context.Context) (*mcp.ClientSession, func(), error) {
	if !in.OwnSession {
		return peerEnv.dbosShared, func() {}, nil
	}
	cs, err := peerEnv.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return cs, func() { _ = cs.Close() }, nil
}

// echoStep is one echo call as a DBOS step: its result is checkpointed.
func echoStep(cs *mcp.ClientSession) dbos.Step[*mcp.CallToolResult] {
	return func(ctx context.Context) (*mcp.CallToolResult, error) { return callEcho(ctx, cs) }
}

// seqWorkflow makes in.Calls echo calls in sequence, each a step.
func seqWorkflow(ctx dbos.Context, in wfInput) (int, error) {
	cs, done, err := in.session(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	for range in.Calls {
		if _, err := dbos.RunAsStep(ctx, echoStep(cs), dbos.WithStepName("echo")); err != nil {
			return 0, err
		}
	}
	return in.Calls, nil
}

// concWorkflow makes in.Calls echo calls, in.InFlight at once, each a
// step started with dbos.Go (steps are started in order, so their ids are
// deterministic; a new one starts as soon as one in flight ends).
func concWorkflow(ctx dbos.Context, in wfInput) (int, error) {
	cs, done, err := in.session(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	slots := make(chan struct{}, in.InFlight)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range in.Calls {
		slots <- struct{}{}
		ch, err := dbos.Go(ctx, echoStep(cs), dbos.WithStepName("echo"))
		if err != nil {
			<-slots
			mu.Lock()
			first = errors.Join(first, err)
			mu.Unlock()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := <-ch
			if o.Err != nil {
				mu.Lock()
				first = errors.Join(first, o.Err)
				mu.Unlock()
			}
			<-slots
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return in.Calls, nil
}

// oneCallWorkflow makes one echo call as a step.
func oneCallWorkflow(ctx dbos.Context, in wfInput) (int, error) {
	cs, done, err := in.session(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	if _, err := dbos.RunAsStep(ctx, echoStep(cs), dbos.WithStepName("echo")); err != nil {
		return 0, err
	}
	return 1, nil
}

// dbosShape runs sh as DBOS workflows, started and awaited from this
// process (dbos.RunWorkflow, then GetResult).
func (e *env) dbosShape(sh shape, ownSession bool) error {
	if !sh.oneCall {
		fn := seqWorkflow
		if sh.inFlight > 1 {
			fn = concWorkflow
		}
		return runWorkflow(e.dbos, fn, wfInput{Calls: sh.calls, InFlight: sh.inFlight, OwnSession: ownSession}, sh.calls)
	}
	return parallel(sh.calls, sh.inFlight, func(int) error {
		return runWorkflow(e.dbos, oneCallWorkflow, wfInput{Calls: 1, InFlight: 1, OwnSession: ownSession}, 1)
	})
}

// runWorkflow runs fn to its end and checks that it made want calls.
func runWorkflow(dc dbos.Context, fn dbos.Workflow[wfInput, int], in wfInput, want int) error {
	h, err := dbos.RunWorkflow(dc, fn, in)
	if err != nil {
		return fmt.Errorf("dbos: start workflow: %w", err)
	}
	got, err := h.GetResult()
	if err != nil {
		return fmt.Errorf("dbos: workflow %s: %w", h.GetWorkflowID(), err)
	}
	if got != want {
		return fmt.Errorf("dbos: workflow %s made %d calls, want %d", h.GetWorkflowID(), got, want)
	}
	return nil
}
