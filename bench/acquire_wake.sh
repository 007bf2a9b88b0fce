#!/usr/bin/env bash
# Blocking acquire (contract 9): sets up, starts a throwaway cluster with
# leaderlock preloaded (default settings, fsync on, room for the waiters),
# runs bench/acquire_wake.py. Arguments are passed on, e.g. --handovers 1000
# --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then
  use_pg "$2"
  shift 2
fi
trap remove_throwaway_cluster EXIT
start_throwaway_cluster "fsync = on"
/usr/bin/python3 "$REPO_ROOT/bench/acquire_wake.py" "$PORT" "$@"
