#!/usr/bin/env bash
# The preamble of `make test`: which suites will run, which are skipped or
# will fail, and why, before the race-enabled build and run stay quiet for
# a few minutes. It only looks around (the environment, PATH); it changes
# nothing and always exits 0. Uses bash builtins and $GO only.
GO=${GO:-go}
here=${0%/*} # the script's directory (bash only: no dirname)
if [ "$here" = "$0" ]; then here=.; fi
cd "$here/.." || exit 0

mapfile -t pkgs < <("$GO" list ./... 2>/dev/null)
echo "make test: go test -race -count=1 over ${#pkgs[@]} packages, every suite on 127.0.0.1."
echo "  It builds with the race detector first, then prints one line per package as it ends (ok or FAIL);"
echo "  about 10-15 minutes on 2 cores, most of it before the first line."

ci=""
if [ -n "${CI:-}" ]; then ci=1; fi

if [ -n "${AGENTCTL_TEST_POSTGRES:-}" ]; then
	dsn=${AGENTCTL_TEST_POSTGRES}
	if [[ $dsn =~ ^([a-z]+://[^:/@]*):[^@]*@(.*)$ ]]; then dsn="${BASH_REMATCH[1]}:***@${BASH_REMATCH[2]}"; fi
	echo "  run   PostgreSQL suites (every backend-neutral test twice, fleet, leases): AGENTCTL_TEST_POSTGRES=$dsn"
elif [ -n "$ci" ]; then
	echo "  FAIL  PostgreSQL suites: AGENTCTL_TEST_POSTGRES is not set and CI is (CI must run them; bash .ci/postgres prints a URL)"
else
	echo "  skip  PostgreSQL suites: AGENTCTL_TEST_POSTGRES is not set (export AGENTCTL_TEST_POSTGRES=\$(bash .ci/postgres), or see docs/POSTGRES.md)"
fi

browser=""
for b in chromium chromium-browser google-chrome-stable google-chrome; do
	if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [ -n "$browser" ]; then
	echo "  run   the HTML report's browser test: $browser"
elif [ -n "$ci" ]; then
	echo "  FAIL  the HTML report's browser test: no chromium, and CI is set (apt-get install -y chromium)"
else
	echo "  skip  the HTML report's browser test: no chromium on PATH (apt-get install -y chromium)"
fi

if command -v node >/dev/null 2>&1; then
	echo "  run   the TypeScript reference server suites: node $(node --version 2>/dev/null)"
else
	echo "  FAIL  the TypeScript reference server suites: node is not on PATH (they never skip; install Node.js, then npm ci --prefix interop)"
fi
exit 0
