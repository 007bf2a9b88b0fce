#!/usr/bin/env bash
# Handover between two `leaderlock run` processes: sets up, builds the CLI,
# starts a throwaway cluster with leaderlock preloaded (default settings,
# fsync on), runs bench/cli_handover.py. Arguments are passed on, e.g.
# --rounds 200 --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then
  use_pg "$2"
  shift 2
fi
trap remove_throwaway_cluster EXIT
start_throwaway_cluster "fsync = on"
build_cli
/usr/bin/python3 "$REPO_ROOT/bench/cli_handover.py" "$PORT" "$CLI_BIN" "$@"
