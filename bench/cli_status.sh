#!/usr/bin/env bash
# `leaderlock status` on a database with many leases: sets up, builds the
# CLI, starts a throwaway cluster with leaderlock preloaded (default
# settings, fsync on), runs bench/cli_status.py. Arguments are passed on,
# e.g. --keys 10000 --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then
  use_pg "$2"
  shift 2
fi
trap remove_throwaway_cluster EXIT
start_throwaway_cluster "fsync = on"
build_cli
/usr/bin/python3 "$REPO_ROOT/bench/cli_status.py" "$PORT" "$CLI_BIN" "$@"
