// Command peers is agentctl's peer benchmark (issue 34): the same MCP tool
// calls made by the bare go-sdk client, by the go-sdk client inside DBOS
// Transact workflows (each call a step), and by agentctl, against one
// `agentctl demo serve` process and its echo tool, with DBOS's system
// database and agentctl's log on the same PostgreSQL cluster.
//
// It runs four shapes in interleaved rounds (every system once per shape
// per round, the order rotated each round) and reports medians: wall time
// per call, calls per second, the client's CPU per call, the server's CPU
// per call and the rows each durable system added to its schema per call.
//
//	make bench-peers PEERS='-rounds 6'   # builds agentctl and the producer, then runs this
//
// agentctl is measured as users run it: one `agentctl run` process for
// the two one-run shapes, and for the two many-runs shapes one `agentctl
// run one.yaml --inputs FILE --runs-in-flight K` process, which executes
// the runs in its process directly, as dbos.RunWorkflow + GetResult does
// for DBOS. A second agentctl system, "Go API in one process", runs the
// same through workflow.Runner inside the producer (bench/peers/producer,
// -mode run and -mode runs), timing only that part (no process start), as
// DBOS is timed after its Launch. The producer first runs one.yaml once,
// untimed (-warm): DBOS serves every round from the one process launched
// at setup, its connections and its session warm, and the Go API is timed
// as warm: the database connection's backend has run agentctl's
// statements, and the timed runs borrow the warm-up's MCP session, as
// DBOS's shared variant uses its connected one. The many-runs shapes also measure
// agentctl's queued path, a fleet's, as systems of their own ("queued"):
// a producer process queueing the runs through the Go API that `agentctl
// submit` calls (workflow.Runner.Submit) followed by `agentctl worker
// --drain` (CLI), or Runner.Submit then worker.Worker in the producer (Go
// API). The cost of `agentctl submit` as a process of its own is sampled
// separately.
//
// This is a module of its own so that DBOS never becomes a dependency of
// agentctl; it imports no agentctl package (it drives the binaries), and
// the producer, a module of its own too, requires agentctl alone, so both
// agentctl binaries are built with agentctl's own dependency versions.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	dsn        string // the cluster: any database on it (AGENTCTL_TEST_POSTGRES)
	database   string // the dedicated database this benchmark creates and owns
	agentctl   string // the agentctl binary to measure and to serve the echo tool
	producer   string // bench/peers/producer: queues agentctl runs from one process
	rounds     int
	seqCalls   int // shape 1: calls in one sequential run
	concCalls  int // shape 2: calls in one run, inFlight at once
	runs       int // shape 3: one-call runs, one at a time
	concRuns   int // shape 4: one-call runs, inFlight at once
	inFlight   int
	cliSubmits int // `agentctl submit` processes sampled per round
	warmup     bool
	sqlite     bool   // also agentctl on SQLite (issue 34: the same shapes against bare go-sdk)
	out        string // also write the report (markdown) here
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.StringVar(&cfg.dsn, "dsn", os.Getenv("AGENTCTL_TEST_POSTGRES"), "PostgreSQL URL of the cluster, on loopback (default $AGENTCTL_TEST_POSTGRES); its role needs CREATEDB")
	fs.StringVar(&cfg.database, "database", "agentctl_peers", "the database this benchmark creates on that cluster and owns (its schemas peers_agentctl, peers_submit and peers_dbos are dropped and recreated)")
	fs.StringVar(&cfg.agentctl, "agentctl", "", "the agentctl binary (make bench-peers builds it); required")
	fs.StringVar(&cfg.producer, "producer", "", "the producer binary, bench/peers/producer (make bench-peers builds it); required")
	fs.IntVar(&cfg.rounds, "rounds", 6, "interleaved rounds")
	fs.IntVar(&cfg.seqCalls, "seq-calls", 200, "shape 1: sequential calls in one run / workflow")
	fs.IntVar(&cfg.concCalls, "conc-calls", 400, "shape 2: calls in one run / workflow, -in-flight at once")
	fs.IntVar(&cfg.runs, "runs", 200, "shape 3: one-call runs / workflows, one at a time")
	fs.IntVar(&cfg.concRuns, "conc-runs", 400, "shape 4: one-call runs / workflows, -in-flight at once")
	fs.IntVar(&cfg.inFlight, "in-flight", 8, "calls or runs in flight in shapes 2 and 4")
	fs.IntVar(&cfg.cliSubmits, "cli-submits", 5, "`agentctl submit` processes timed per round (0: none)")
	fs.BoolVar(&cfg.warmup, "warmup", true, "run every system and shape once at a small size before the rounds, unrecorded")
	fs.BoolVar(&cfg.sqlite, "sqlite", true, "also run agentctl on SQLite (a database file, default durability FULL), against the bare go-sdk client")
	fs.StringVar(&cfg.out, "out", "", "also write the report to this file")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func (c config) check() error {
	switch {
	case c.dsn == "":
		return errors.New("no PostgreSQL URL: pass -dsn or set AGENTCTL_TEST_POSTGRES")
	case c.agentctl == "" || c.producer == "":
		return errors.New("-agentctl and -producer: the binaries to measure are required (make bench-peers builds them)")
	case c.rounds < 1 || c.seqCalls < 1 || c.concCalls < 1 || c.runs < 1 || c.concRuns < 1 || c.inFlight < 1 || c.cliSubmits < 0:
		return errors.New("rounds, sizes and -in-flight must be at least 1 (-cli-submits at least 0)")
	}
	return nil
}

// shape is one of the four workloads.
type shape struct {
	name       string
	label      string
	calls      int  // tool calls in total
	inFlight   int  // at once
	oneCall    bool // one call per run / workflow (else one run of `calls` calls)
	throughput bool // reported as calls/s (else ms per call)
}

func shapes(c config) []shape {
	return []shape{
		{"seq", fmt.Sprintf("one run / workflow of %d sequential calls", c.seqCalls), c.seqCalls, 1, false, false},
		{"conc", fmt.Sprintf("%d calls, %d in flight, inside one run / workflow", c.concCalls, c.inFlight), c.concCalls, c.inFlight, false, true},
		{"runs", fmt.Sprintf("%d one-call runs / workflows, one process", c.runs), c.runs, 1, true, false},
		{"concruns", fmt.Sprintf("%d one-call runs / workflows, %d in flight", c.concRuns, c.inFlight), c.concRuns, c.inFlight, true, true},
	}
}

// The systems measured, in the order of the first round.
const (
	sysBareShared = "go-sdk, shared session"
	sysBarePerRun = "go-sdk, session per run"
	sysDBOSShared = "DBOS + go-sdk, shared session"
	sysDBOSPerWF  = "DBOS + go-sdk, session per workflow"
	sysAgentctl   = "agentctl"
	sysAgentAPI   = "agentctl, Go API in one process"
	sysLite       = "agentctl on SQLite"
	sysLiteAPI    = "agentctl on SQLite, Go API in one process"
	// The queued path of the many-runs shapes (a fleet's): submit, then
	// worker --drain.
	sysAgentQ    = "agentctl, queued: submit + worker --drain"
	sysAgentAPIQ = "agentctl, queued, Go API in one process"
	sysLiteQ     = "agentctl on SQLite, queued: submit + worker --drain"
	sysLiteAPIQ  = "agentctl on SQLite, queued, Go API in one process"
)

// systems are the systems cfg measures: every PostgreSQL one, and the
// agentctl-on-SQLite ones unless -sqlite=false.
func systems(cfg config) []string {
	all := []string{sysBareShared, sysBarePerRun, sysDBOSShared, sysDBOSPerWF, sysAgentctl, sysAgentAPI, sysAgentQ, sysAgentAPIQ}
	if cfg.sqlite {
		all = append(all, sysLite, sysLiteAPI, sysLiteQ, sysLiteAPIQ)
	}
	return all
}

// queuedSystem reports whether sys is agentctl's queued path, measured on
// the many-runs shapes only (a one-run shape has nothing to queue apart).
func queuedSystem(sys string) bool {
	switch sys {
	case sysAgentQ, sysAgentAPIQ, sysLiteQ, sysLiteAPIQ:
		return true
	}
	return false
}

// systemsFor are the systems measured on shape sh.
func systemsFor(cfg config, sh shape) []string {
	var out []string
	for _, sys := range systems(cfg) {
		if sh.oneCall || !queuedSystem(sys) {
			out = append(out, sys)
		}
	}
	return out
}

// results holds every recorded sample by shape and system.
type results struct {
	rounds    int
	samples   map[string][]sample // key shape + "\x00" + system
	cliSubmit []sample
}

func (r *results) add(sh, sys string, s sample) {
	r.samples[sh+"\x00"+sys] = append(r.samples[sh+"\x00"+sys], s)
}

func (r *results) get(sh, sys string) []sample { return r.samples[sh+"\x00"+sys] }

// rotate returns xs rotated left by k.
func rotate(xs []string, k int) []string {
	k %= len(xs)
	return append(append([]string{}, xs[k:]...), xs[:k]...)
}

func run(ctx context.Context, cfg config) error {
	env, err := setup(ctx, cfg)
	if err != nil {
		return err
	}
	defer env.close()
	fmt.Fprintf(os.Stderr, "peers: %s\n", env.describe())
	res := &results{samples: map[string][]sample{}}
	if cfg.warmup {
		small := cfg
		small.seqCalls, small.concCalls, small.runs, small.concRuns = 10, 2*cfg.inFlight, 10, 2*cfg.inFlight
		if err := env.writeWorkflows(small); err != nil {
			return err
		}
		for _, sh := range shapes(small) {
			for _, sys := range systemsFor(cfg, sh) {
				if _, err := env.measure(ctx, sys, sh); err != nil {
					return fmt.Errorf("warm-up, %s, %s: %w", sh.name, sys, err)
				}
			}
		}
	}
	if err := env.writeWorkflows(cfg); err != nil {
		return err
	}
	start := time.Now()
	load0 := loadavg()
	for round := range cfg.rounds {
		for _, sh := range shapes(cfg) {
			for _, sys := range rotate(systemsFor(cfg, sh), round) {
				s, err := env.measure(ctx, sys, sh)
				if err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", round+1, sh.name, sys, err)
				}
				res.add(sh.name, sys, s)
				fmt.Fprintf(os.Stderr, "round %d  %-8s  %-52s  %8s ms/call  %7.0f calls/s  cpu %s ms/call\n",
					round+1, sh.name, sys, ms(s.perCall(s.Wall)), s.rate(), ms(s.perCall(s.CPU)))
			}
		}
		for range cfg.cliSubmits {
			s, err := env.cliSubmit(ctx)
			if err != nil {
				return fmt.Errorf("round %d, agentctl submit: %w", round+1, err)
			}
			res.cliSubmit = append(res.cliSubmit, s)
		}
		res.rounds++
	}
	var w io.Writer = os.Stdout
	var f *os.File
	if cfg.out != "" {
		if f, err = os.Create(cfg.out); err != nil {
			return fmt.Errorf("-out: %w", err)
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	fmt.Fprintf(w, "Measured %s – %s UTC; %s; load average %s → %s.\n",
		start.UTC().Format("2006-01-02 15:04:05"), time.Now().UTC().Format("15:04:05"), env.describe(), load0, loadavg())
	report(w, cfg, res)
	if f != nil {
		return f.Close()
	}
	return nil
}

// loadavg returns the 1-, 5- and 15-minute load averages as the kernel
// prints them, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// machine describes the CPU count and Go version.
func machine() string {
	return fmt.Sprintf("%d cores, %s", runtime.NumCPU(), runtime.Version())
}
