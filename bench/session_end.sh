#!/usr/bin/env bash
# Session-bound leases (contract 10): sets up, starts a throwaway cluster with
# leaderlock preloaded (default settings, fsync on),
# runs bench/session_end.py. Arguments are passed on, e.g. --rounds 200
# --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then
  use_pg "$2"
  shift 2
fi
trap remove_throwaway_cluster EXIT
start_throwaway_cluster "fsync = on"
/usr/bin/python3 "$REPO_ROOT/bench/session_end.py" "$PORT" "$@"
