#!/usr/bin/env bash
# leaderlock benchmarks side by side with the usual alternatives.
#
#   ./bench/run.sh                 full run (about 25 minutes); writes bench/results/
#   ./bench/run.sh --quick         tiny durations, writes to a temporary directory (CI)
#   ./bench/run.sh --port 5432     reuse a running cluster (leaderlock preloaded,
#                                  extension created in database postgres)
#
# Without --port it sets everything up and starts a throwaway cluster with
# PostgreSQL and leaderlock defaults (fsync on) on a free port.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

QUICK=() PORT="" OUT="$REPO_ROOT/bench/results"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=(--quick); OUT=$(mktemp -d /tmp/leaderlock-bench-quick.XXXXXX) ;;
    --port) PORT=$2; shift ;;
    *) echo "usage: $0 [--quick] [--port PORT]" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "$PORT" ]; then
  trap remove_throwaway_cluster EXIT
  # PostgreSQL and leaderlock defaults (fsync on), unlike the test clusters.
  start_throwaway_cluster "fsync = on"
fi

cd "$REPO_ROOT/bench"
PG_BIN=$PG_BIN /usr/bin/python3 bench.py "$PORT" "$OUT" "${QUICK[@]}"
