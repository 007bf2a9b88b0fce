#!/usr/bin/env bash
# leaderlock benchmarks side by side with the usual alternatives.
#
#   ./bench/run.sh                 full run (about 25 minutes); writes bench/results/
#   ./bench/run.sh --quick         tiny durations, writes to a temporary directory (CI)
#   ./bench/run.sh --port 5432     reuse a running cluster (leaderlock preloaded,
#                                  extension created in database postgres)
#   ./bench/run.sh --pg 18         on PostgreSQL 18 (14 to 18; default 15)
#   ./bench/run.sh --out DIR       write the results to DIR
#   ./bench/versions.sh            headline figures of two versions side by side
#
# Without --port it sets everything up and starts a throwaway cluster with
# PostgreSQL and leaderlock defaults (fsync on) on a free port.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

QUICK=() PORT="" OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=(--quick) ;;
    --port) PORT=$2; shift ;;
    --pg) use_pg "$2"; shift ;;
    --out) OUT=$2; shift ;;
    *) echo "usage: $0 [--quick] [--port PORT] [--pg N] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$OUT" ]; then
  if [ "${#QUICK[@]}" -gt 0 ]; then OUT=$(mktemp -d /tmp/leaderlock-bench-quick.XXXXXX)
  else OUT="$REPO_ROOT/bench/results"; fi
fi

if [ -z "$PORT" ]; then
  trap remove_throwaway_cluster EXIT
  # PostgreSQL and leaderlock defaults (fsync on), unlike the test clusters.
  start_throwaway_cluster "fsync = on"
fi

cd "$REPO_ROOT/bench"
PG_BIN=$PG_BIN /usr/bin/python3 bench.py "$PORT" "$OUT" "${QUICK[@]}"
