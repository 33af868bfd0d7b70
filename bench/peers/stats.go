package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sample is one measurement of one system on one shape in one round.
type sample struct {
	Wall     time.Duration  // the timed section, start to last result
	CPU      time.Duration  // the client's CPU (user + system) in that section
	ServerCP time.Duration  // the MCP server process's CPU in that section
	Calls    int            // tool calls made (and, for the run shapes, runs)
	Runs     int            // runs / workflows (1 for the one-run shapes)
	Rows     int            // rows the system added to its PostgreSQL schema; -1 = not counted
	RowsBy   map[string]int // the same by table (tables that grew only)
	// Parts are named sub-timings (agentctl's queue path: "submit",
	// "drain"), wall time each.
	Parts map[string]time.Duration
}

// perCall returns d divided by the sample's calls.
func (s sample) perCall(d time.Duration) time.Duration {
	if s.Calls == 0 {
		return 0
	}
	return d / time.Duration(s.Calls)
}

// rate returns calls per second of wall time.
func (s sample) rate() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.Calls) / s.Wall.Seconds()
}

// median returns the median of xs (the mean of the middle two for an even
// count) and 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianOf returns the median of f over the samples.
func medianOf(ss []sample, f func(sample) float64) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = f(s)
	}
	return median(xs)
}

// selfCPU returns this process's CPU time so far (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the CPU time (user + system) of process pid so far, from
// /proc/PID/stat, or 0 if it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after it start
	// past the last ')'. utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// ratio formats a/b with two decimals, or "—" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}

// report writes the results: the four-shape summary table (agentctl
// against DBOS's faster variant) and, per shape, every system's medians.
func report(w io.Writer, cfg config, res *results) {
	fmt.Fprintf(w, "\n## Peer benchmark: %d round(s), medians\n\n", res.rounds)
	fmt.Fprintf(w, "| shape | bare go-sdk | DBOS + go-sdk (shared / per workflow) | agentctl | agentctl ÷ DBOS (shared / per workflow) | agentctl, Go API in one process |\n|---|---|---|---|---|---|\n")
	for _, sh := range shapes(cfg) {
		bare := res.get(sh.name, sysBareShared)
		dShared, dPer := res.get(sh.name, sysDBOSShared), res.get(sh.name, sysDBOSPerWF)
		summaryRow(w, sh, sh.label, bare, dShared, dPer, res.get(sh.name, sysAgentctl), res.get(sh.name, sysAgentAPI))
		if sh.oneCall {
			summaryRow(w, sh, sh.label+", agentctl queued: submit + worker --drain", bare, dShared, dPer, res.get(sh.name, sysAgentQ), res.get(sh.name, sysAgentAPIQ))
		}
	}
	fmt.Fprintf(w, "\nRatio: agentctl's speed over DBOS's (calls/s ÷ calls/s, or DBOS's ms per call ÷ agentctl's); ≥ 1.00 means agentctl is as fast or faster.\n")
	fmt.Fprintf(w, "\nIn the many-runs shapes, the agentctl column is the equivalent of DBOS's `dbos.RunWorkflow` + `GetResult`: one\n"+
		"process executes the runs directly, K at once (CLI: one `agentctl run one.yaml --inputs FILE --runs-in-flight K`\n"+
		"process, its start included; Go API: `Runner.Run` per run with one shared session pool, `producer -mode runs`).\n"+
		"The Go API column is timed in a program as warm as DBOS's, which bench/peers launches once for every round:\n"+
		"the producer first runs one.yaml once, untimed (`-warm`), and its timed runs borrow that run's MCP session.\n"+
		"The \"queued\" rows are a fleet's path, which DBOS's direct runs do not take: a producer submits the runs (a\n"+
		"commit each), then `agentctl worker --drain --concurrency K` claims and executes them (Go API: `Runner.Submit`\n"+
		"then `worker.Worker` with Drain, `producer -mode queue`). The CLI times are the processes' wall and CPU, the\n"+
		"check of the run count around them left out.\n")
	if cfg.sqlite {
		liteReport(w, cfg, res)
	}
	fmt.Fprintf(w, "\n### Every system, per shape (medians of the rounds)\n\n")
	fmt.Fprintf(w, "| shape | system | wall ms/call | calls/s | client CPU ms/call | server CPU ms/call | rows/call | parts (ms/call) |\n|---|---|---|---|---|---|---|---|\n")
	for _, sh := range shapes(cfg) {
		for _, sys := range systems(cfg) {
			ss := res.get(sh.name, sys)
			if len(ss) == 0 {
				continue
			}
			per := func(f func(sample) time.Duration) float64 {
				return medianOf(ss, func(s sample) float64 { return float64(s.perCall(f(s))) })
			}
			rows := "—"
			if ss[0].Rows >= 0 {
				rows = strconv.FormatFloat(medianOf(ss, func(s sample) float64 { return float64(s.Rows) / float64(s.Calls) }), 'f', 1, 64)
			}
			var parts []string
			for _, name := range partNames(ss) {
				d := per(func(s sample) time.Duration { return s.Parts[name] })
				parts = append(parts, name+" "+ms(time.Duration(d)))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.0f | %s | %s | %s | %s |\n", sh.label, sys,
				ms(time.Duration(per(func(s sample) time.Duration { return s.Wall }))),
				medianOf(ss, sample.rate),
				ms(time.Duration(per(func(s sample) time.Duration { return s.CPU }))),
				ms(time.Duration(per(func(s sample) time.Duration { return s.ServerCP }))),
				rows, strings.Join(parts, ", "))
		}
	}
	fmt.Fprintf(w, "\n### Rows added per run / workflow, by table (the last round; every round adds the same)\n\n")
	fmt.Fprintf(w, "| shape | system | rows per run / workflow | by table |\n|---|---|---|---|\n")
	for _, sh := range shapes(cfg) {
		for _, sys := range systems(cfg) {
			ss := res.get(sh.name, sys)
			if len(ss) == 0 || ss[0].Rows < 0 {
				continue
			}
			last := ss[len(ss)-1]
			tables := slices.Sorted(maps.Keys(last.RowsBy))
			by := make([]string, len(tables))
			for i, t := range tables {
				by[i] = fmt.Sprintf("%s %s", t, perRun(last.RowsBy[t], last.Runs))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", sh.label, sys, perRun(last.Rows, last.Runs), strings.Join(by, ", "))
		}
	}
	if len(res.cliSubmit) > 0 {
		wall := medianOf(res.cliSubmit, func(s sample) float64 { return float64(s.Wall) })
		cpu := medianOf(res.cliSubmit, func(s sample) float64 { return float64(s.CPU) })
		fmt.Fprintf(w, "\n`agentctl submit` as a process of its own (%d samples): median %s ms wall, %s ms CPU per submit.\n",
			len(res.cliSubmit), ms(time.Duration(wall)), ms(time.Duration(cpu)))
	}
}

// summaryRow writes one row of the summary table: agentctl's samples ag
// (CLI) and api (Go API) against DBOS's two variants.
func summaryRow(w io.Writer, sh shape, label string, bare, dShared, dPer, ag, api []sample) {
	if sh.throughput {
		b, s, p, a, g := medianOf(bare, sample.rate), medianOf(dShared, sample.rate), medianOf(dPer, sample.rate), medianOf(ag, sample.rate), medianOf(api, sample.rate)
		fmt.Fprintf(w, "| %s, calls/s | %.0f | %.0f / %.0f | %.0f | %s / %s | %.0f (%s / %s) |\n", label, b, s, p, a, ratio(a, s), ratio(a, p), g, ratio(g, s), ratio(g, p))
		return
	}
	wall := func(s sample) float64 { return float64(s.perCall(s.Wall)) }
	b, s, p, a, g := medianOf(bare, wall), medianOf(dShared, wall), medianOf(dPer, wall), medianOf(ag, wall), medianOf(api, wall)
	fmt.Fprintf(w, "| %s, ms per call | %s | %s / %s | %s | %s / %s | %s (%s / %s) |\n", label, ms(time.Duration(b)), ms(time.Duration(s)), ms(time.Duration(p)), ms(time.Duration(a)), ratio(s, a), ratio(p, a), ms(time.Duration(g)), ratio(s, g), ratio(p, g))
}

// perRun formats n / runs, with one decimal unless whole.
func perRun(n, runs int) string {
	if runs <= 0 {
		runs = 1
	}
	if n%runs == 0 {
		return strconv.Itoa(n / runs)
	}
	return strconv.FormatFloat(float64(n)/float64(runs), 'f', 1, 64)
}

// partNames lists the part names of the samples, sorted.
func partNames(ss []sample) []string {
	var names []string
	for _, s := range ss {
		for k := range s.Parts {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	slices.Sort(names)
	return names
}

// liteReport is the SQLite table: agentctl on a database file (durability
// FULL, its default) against the bare go-sdk client, which records nothing.
func liteReport(w io.Writer, cfg config, res *results) {
	fmt.Fprintf(w, "\n### agentctl on SQLite against the bare go-sdk client\n\n")
	fmt.Fprintf(w, "| shape | bare go-sdk (shared / session per run) | agentctl on SQLite | agentctl ÷ bare (shared / per run) | agentctl on SQLite, Go API in one process |\n|---|---|---|---|---|\n")
	for _, sh := range shapes(cfg) {
		bare, per := res.get(sh.name, sysBareShared), res.get(sh.name, sysBarePerRun)
		liteRow(w, sh, sh.label, bare, per, res.get(sh.name, sysLite), res.get(sh.name, sysLiteAPI))
		if sh.oneCall {
			liteRow(w, sh, sh.label+", agentctl queued: submit + worker --drain", bare, per, res.get(sh.name, sysLiteQ), res.get(sh.name, sysLiteAPIQ))
		}
	}
	fmt.Fprintf(w, "\nAs above, the agentctl column of the many-runs shapes executes the runs directly in one process (`run --inputs`,\n"+
		"`producer -mode runs`); the \"queued\" rows submit them, then drain them with a worker.\n")
}

// liteRow writes one row of the SQLite table: agentctl's samples lite
// (CLI) and api (Go API) against the bare go-sdk client's two variants.
func liteRow(w io.Writer, sh shape, label string, bare, per, lite, api []sample) {
	if sh.throughput {
		b, p, a, g := medianOf(bare, sample.rate), medianOf(per, sample.rate), medianOf(lite, sample.rate), medianOf(api, sample.rate)
		fmt.Fprintf(w, "| %s, calls/s | %.0f / %.0f | %.0f | %s / %s | %.0f (%s / %s) |\n", label, b, p, a, ratio(a, b), ratio(a, p), g, ratio(g, b), ratio(g, p))
		return
	}
	wall := func(s sample) float64 { return float64(s.perCall(s.Wall)) }
	b, p, a, g := medianOf(bare, wall), medianOf(per, wall), medianOf(lite, wall), medianOf(api, wall)
	fmt.Fprintf(w, "| %s, ms per call | %s / %s | %s | %s / %s | %s (%s / %s) |\n", label, ms(time.Duration(b)), ms(time.Duration(p)), ms(time.Duration(a)), ratio(b, a), ratio(p, a), ms(time.Duration(g)), ratio(b, g), ratio(p, g))
}
