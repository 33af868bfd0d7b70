#!/usr/bin/env bash
# startup-ab.sh: a process's fixed cost, two agentctl binaries side by side.
#
#   scripts/startup-ab.sh BASE_BIN HEAD_BIN [RUNS]
#   go build -o /tmp/base/agentctl ./cmd/agentctl   # at the base commit
#   go build -o /tmp/head/agentctl ./cmd/agentctl   # at the head
#   scripts/startup-ab.sh /tmp/base/agentctl /tmp/head/agentctl 21
#
# For each command it runs the two binaries alternately (base, head, base, …)
# RUNS times each, under bash's time, and prints the median wall time and the
# median CPU (user+system, from the child's rusage) of each, in ms: `version` (package init only),
# `submit` of a one-call workflow on SQLite and, when AGENTCTL_TEST_POSTGRES is
# set, on PostgreSQL (a schema of its own, dropped at the end), and a one-call
# `run` on SQLite against `agentctl demo serve` on 127.0.0.1. Each binary has a
# database of its own, created (and warmed) by one unmeasured process first.
set -euo pipefail
shopt -u patsub_replacement 2>/dev/null || true # a URL's & is not the match
TIMEFORMAT='%3R %3U %3S' # bash's time: wall, user, system (the child's rusage), in s
[ $# -ge 2 ] || { echo "usage: $0 BASE_BIN HEAD_BIN [RUNS]" >&2; exit 2; }
base=$1 head=$2 runs=${3:-15}
port=${STARTUP_AB_PORT:-18765}
tmp=$(mktemp -d -t agentctl-startup-ab.XXXXXX)
pg=${AGENTCTL_TEST_POSTGRES:-}
schema=startup_ab_$$
cleanup() {
  [ -n "${demo:-}" ] && kill "$demo" 2>/dev/null || true
  [ -n "$pg" ] && psql -q "$pg" -c "DROP SCHEMA IF EXISTS ${schema}_base CASCADE; DROP SCHEMA IF EXISTS ${schema}_head CASCADE" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

"$head" demo serve --addr "127.0.0.1:$port" >"$tmp/demo.log" 2>&1 &
demo=$!
for _ in $(seq 50); do grep -q . "$tmp/demo.log" && break; sleep 0.1; done
cat >"$tmp/one.yaml" <<EOF
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: one-call }
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: { allowedSchemes: [http], allowPrivate: true }
  mcpServers:
    local: { url: "http://127.0.0.1:$port/mcp", protocolVersion: "2025-11-25" }
  actions:
    lookup: { kind: mcp.call, idempotency: idempotent }
  tasks:
    - id: find
      uses: action:lookup
      with: { server: local, tool: search, arguments: { q: mcp } }
EOF

pgurl() { # the test server's URL with search_path set to schema $1
  case "$pg" in *\?*) echo "$pg&search_path=$1" ;; *) echo "$pg?search_path=$1" ;; esac
}

# measure NAME ARGS...: ARGS with @DB@ replaced by each side's database.
measure() {
  local name=$1; shift
  local side bin db
  for side in base head; do
    : >"$tmp/$name.$side"
  done
  for i in $(seq 0 "$runs"); do
    for side in base head; do
      if [ "$side" = base ]; then bin=$base; else bin=$head; fi
      db=$(cat "$tmp/db.$side" 2>/dev/null || true)
      { time "$bin" "${@//@DB@/$db}" >/dev/null 2>"$tmp/err"; } 2>"$tmp/time" || {
        echo "$name ($side) failed:"; cat "$tmp/err"; exit 1; }
      [ "$i" = 0 ] && continue # warm-up: page cache, database created
      tail -1 "$tmp/time" >>"$tmp/$name.$side"
    done
  done
  for side in base head; do
    sort -n -k1 "$tmp/$name.$side" | awk -v n="$name" -v s="$side" '{w[NR]=$1*1000} END {m=int((NR+1)/2); printf "%-16s %-4s wall %6.0f ms", n, s, w[m]}'
    awk '{print ($2+$3)*1000}' "$tmp/$name.$side" | sort -n | awk '{c[NR]=$1} END {m=int((NR+1)/2); printf "  cpu %6.0f ms  (median of %d)\n", c[m], NR}'
  done
}

echo "startup-ab: base $base vs head $head, $runs interleaved runs each; load:$(cut -d' ' -f1-3 /proc/loadavg)"
measure version version
for side in base head; do echo "$tmp/$side.db" >"$tmp/db.$side"; done
measure submit-sqlite --db @DB@ submit "$tmp/one.yaml"
measure run-1call-sqlite --db @DB@ run "$tmp/one.yaml"
if [ -n "$pg" ]; then
  for side in base head; do
    psql -q "$pg" -c "CREATE SCHEMA ${schema}_$side" >/dev/null
    pgurl "${schema}_$side" >"$tmp/db.$side"
  done
  "$base" db migrate --db "$(cat "$tmp/db.base")" >/dev/null
  "$head" db migrate --db "$(cat "$tmp/db.head")" >/dev/null
  measure submit-postgres --db @DB@ submit "$tmp/one.yaml"
  measure run-1call-postgres --db @DB@ run "$tmp/one.yaml"
fi
echo "load at the end:$(cut -d' ' -f1-3 /proc/loadavg)"
