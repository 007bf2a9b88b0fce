#!/usr/bin/env bash
# Worker expiry lag benchmark: sets up, starts a throwaway cluster with
# leaderlock preloaded (default settings), runs bench/worker_lag.py.
# Arguments are passed on, e.g. --live 10000 --expiring 1000 --window 20.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
"$REPO_ROOT/scripts/setup.sh" >/dev/null
install_extension
DIR=$(mktemp -d /tmp/leaderlock-bench.XXXXXX)
chown postgres:postgres "$DIR"
PORT=$(free_port)
trap 'stop_cluster "$DIR/data" fast; rm -rf "$DIR"' EXIT
# PostgreSQL and leaderlock defaults (fsync on), unlike the test clusters.
start_cluster "$DIR/data" "$PORT" "fsync = on"
psql_at "$PORT" -d postgres -c "CREATE EXTENSION leaderlock"
/usr/bin/python3 "$REPO_ROOT/bench/worker_lag.py" "$PORT" "$@"
