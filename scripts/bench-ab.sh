#!/usr/bin/env bash
# bench-ab.sh: a benchmark of this tree measured side by side with a base
# commit, interleaved, so the drift of a shared VM falls on both sides alike.
#
#   scripts/bench-ab.sh BASE PKG BENCH [COUNT]
#   scripts/bench-ab.sh 38c923f ./workflow/ 'CallStorage$' 8
#
# It builds the package's test binary twice (BASE, from a temporary git
# worktree, and the working tree), then runs them alternately COUNT times each
# (base, head, base, head, …) with -test.count=1, and prints benchstat's
# comparison of the two. Raw output: bench-ab.base.txt and bench-ab.head.txt in
# the current directory. Environment (AGENTCTL_TEST_POSTGRES, …) reaches both
# binaries unchanged. BENCHSTAT overrides the pinned benchstat.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 BASE PKG BENCH [COUNT]" >&2; exit 2; }
base=$1 pkg=$2 bench=$3 count=${4:-6}
GO=${GO:-go}
BENCHSTAT=${BENCHSTAT:-"$GO run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d -t agentctl-bench-ab.XXXXXX)
cleanup() { git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
git -C "$root" worktree add --detach -q "$tmp/base" "$base"
(cd "$tmp/base" && $GO test -c -o "$tmp/base.test" "$pkg")
(cd "$root" && $GO test -c -o "$tmp/head.test" "$pkg")
dir=$(cd "$root" && $GO list -f '{{.Dir}}' "$pkg")
bdir="$tmp/base/${dir#"$root"/}"
: >bench-ab.base.txt
: >bench-ab.head.txt
echo "bench-ab: base $(git -C "$root" rev-parse --short "$base") vs head $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo '+dirty'); $pkg -bench '$bench', $count interleaved runs each; load:$(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$count"); do
  (cd "$bdir" && "$tmp/base.test" -test.run='^$' -test.bench="$bench" -test.benchmem -test.count=1 -test.timeout=30m) | tee -a bench-ab.base.txt | grep '^Benchmark' || true
  (cd "$dir" && "$tmp/head.test" -test.run='^$' -test.bench="$bench" -test.benchmem -test.count=1 -test.timeout=30m) | tee -a bench-ab.head.txt | grep '^Benchmark' || true
done
echo "load at the end:$(cut -d' ' -f1-3 /proc/loadavg)"
$BENCHSTAT base=bench-ab.base.txt head=bench-ab.head.txt
