#!/usr/bin/env bash
# Worker expiry lag benchmark: sets up, starts a throwaway cluster with
# leaderlock preloaded (default settings), runs bench/worker_lag.py.
# Arguments are passed on, e.g. --live 10000 --expiring 1000 --window 20;
# --pg N (first) picks the PostgreSQL version (14 to 18, default 15).
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
# PostgreSQL and leaderlock defaults (fsync on), unlike the test clusters.
# max_worker_processes: room for a worker per database with --databases (up to 14).
run_bench worker_lag.py "max_worker_processes = 16" -- "$@"
