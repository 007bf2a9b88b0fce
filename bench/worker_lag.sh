#!/usr/bin/env bash
# Worker expiry lag benchmark: sets up, starts a throwaway cluster with
# leaderlock preloaded (default settings), runs bench/worker_lag.py.
# Arguments are passed on, e.g. --live 10000 --expiring 1000 --window 20;
# --pg N (first) picks the PostgreSQL version (14 to 18, default 15).
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then
  use_pg "$2"
  shift 2
fi
trap remove_throwaway_cluster EXIT
# PostgreSQL and leaderlock defaults (fsync on), unlike the test clusters.
# max_worker_processes: room for a worker per database with --databases (up to 14).
start_throwaway_cluster "fsync = on" "max_worker_processes = 16"
/usr/bin/python3 "$REPO_ROOT/bench/worker_lag.py" "$PORT" "$@"
