# agentctl: the README's commands.
GO ?= go
FUZZTIME ?= 10000x

.PHONY: test demo lint cross fuzz-smoke bench bench-ab bench-peers build interop conformance

# The whole test suite: every package, race detector on, real peers on 127.0.0.1
# (go-sdk server in-process, reference TypeScript server from interop/). It
# first prints what will run and what is skipped, and why (scripts/test-plan.sh).
test: interop
	@GO=$(GO) bash scripts/test-plan.sh
	$(GO) test -race -count=1 -timeout=30m ./...

# The reference TypeScript server, installed reproducibly from the committed lockfile.
interop: interop/node_modules/.package-lock.json

interop/node_modules/.package-lock.json: interop/package.json interop/package-lock.json
	npm ci --prefix interop --no-audit --no-fund

demo:
	$(GO) run ./cmd/agentctl demo

build:
	$(GO) build -o agentctl ./cmd/agentctl

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# The module builds for Windows and vets for macOS (no C cross-compiler here,
# so CGO_ENABLED=0: go-sqlite3 is a stub there; events/sqlite_nocgo.go). The
# tests are Unix-only (signals, rusage), so Windows builds the non-test code.
cross:
	GOOS=windows CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./...

# Each fuzz target briefly (an execution count: a duration can trip golang/go#75804
# on Go 1.26); run longer with e.g. `make fuzz-smoke FUZZTIME=10m`.
fuzz-smoke:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

# The performance suite (BENCHMARKS.md): every benchmark 5 times, then the
# medians. About 5.5 minutes on 2 cores; AGENTCTL_BENCH_1M=1 adds the 1M-event
# inspect/replay point (a minute or two more). benchstat runs through `go run`
# at a pinned version (override with BENCHSTAT=benchstat).
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
bench:
	@echo "machine: $$(nproc) cores, $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load:$$(cut -d' ' -f1-3 /proc/loadavg)"
	$(GO) test -run='^$$' -bench=. -benchmem -count=5 -timeout=30m ./... | tee bench.txt
	$(BENCHSTAT) bench.txt

# A benchmark side by side with a base commit, interleaved (scripts/bench-ab.sh):
#   make bench-ab BASE=38c923f PKG=./workflow/ BENCH='CallStorage$$' COUNT=8
BASE ?= HEAD~1
PKG ?= ./workflow/
BENCH ?= CallStorage$$
COUNT ?= 6
bench-ab:
	GO=$(GO) bash scripts/bench-ab.sh '$(BASE)' '$(PKG)' '$(BENCH)' '$(COUNT)'

# The peer benchmark (issue 34; BENCHMARKS.md, "Peer benchmark"): the bare go-sdk
# client, DBOS Transact + go-sdk (each call a step) and agentctl make the same echo
# calls against one `agentctl demo serve`, in interleaved rounds, medians. It needs
# PostgreSQL: the cluster of $AGENTCTL_TEST_POSTGRES (loopback only), where it creates
# and owns the database agentctl_peers (DBOS's schema and agentctl's side by side);
# agentctl also runs on a SQLite file, against the bare go-sdk client (-sqlite=false: not).
# A module of its own (bench/peers/go.mod), so DBOS never becomes a dependency of
# agentctl; its producer (bench/peers/producer, which queues agentctl's runs) is
# another, requiring agentctl alone. PEERS passes its flags, e.g. a tiny round:
#   make bench-peers PEERS='-rounds 1 -seq-calls 10 -conc-calls 16 -runs 10 -conc-runs 16'
# The defaults (6 rounds of 200 / 400 / 200 / 400 calls) take 4–6 minutes.
PEERS ?=
bench-peers:
	@bin=$$(mktemp -d) && trap 'rm -rf "$$bin"' EXIT && \
	$(GO) build -o "$$bin/agentctl" ./cmd/agentctl && \
	(cd bench/peers/producer && $(GO) build -o "$$bin/producer" .) && \
	cd bench/peers && $(GO) run . -agentctl "$$bin/agentctl" -producer "$$bin/producer" $(PEERS)

# The official MCP conformance suite's client scenarios, both requirement sets
# (2025-11-25 and 2026-07-28), against agentctl's real CLI through the driver in
# interop/conformance/client; each set is held to its baseline of known failures
# (interop/conformance/baseline-*.yml). About two minutes. docs/INTEROP.md has the table.
conformance:
	GO=$(GO) bash interop/conformance/run.sh
