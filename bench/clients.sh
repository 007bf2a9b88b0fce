#!/usr/bin/env bash
# Every client side by side (handover, CPU per renewal): sets up, builds the
# CLI, the Go candidate and the Node.js client, starts a throwaway cluster
# with leaderlock preloaded (default settings, fsync on), runs
# bench/clients.py. Arguments are passed on (--rounds N --seconds S --json
# FILE); --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
GO_CANDIDATE=$(mktemp /tmp/leaderlock-go-candidate.XXXXXX)
"$REPO_ROOT/clients/go/test.sh" --candidate "$GO_CANDIDATE"
# (installed and built already when the test command runs it)
(cd "$REPO_ROOT/clients/node" && { [ -d node_modules ] && [ -f dist/cjs/index.js ] \
  || { npm ci --no-audit --no-fund --loglevel=error && npm run build --silent; }; })
export GO_CANDIDATE PY_CLIENT_PYTHON="$PY_CLIENT_VENV/bin/python"
run_bench --cli clients.py -- "$@"
