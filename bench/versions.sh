#!/usr/bin/env bash
# The benchmarks' headline figures on several PostgreSQL versions, side by
# side, from one run on one machine:
#
#   ./bench/versions.sh                     15 and 18, full runs; writes bench/results/versions.md
#   ./bench/versions.sh --pg 14 --pg 17     other versions
#   ./bench/versions.sh --quick             tiny durations, to a temporary directory
#
# For each version, one after the other (never at the same time): a
# throwaway cluster with that version's defaults, bench/run.sh and
# bench/worker_lag.sh. Every figure of every version lands in
# OUT/pgN/ (results.json, worker_lag.json); OUT/versions.md and
# OUT/versions.json hold the headline figures side by side.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

VERSIONS=() QUICK=() OUT="$REPO_ROOT/bench/results"
while [ $# -gt 0 ]; do
  case "$1" in
    --pg) use_pg "$2"; VERSIONS+=("$2"); shift ;;
    --quick) QUICK=(--quick); OUT=$(mktemp -d /tmp/leaderlock-bench-versions.XXXXXX) ;;
    *) echo "usage: $0 [--pg N]... [--quick]" >&2; exit 2 ;;
  esac
  shift
done
[ "${#VERSIONS[@]}" -gt 0 ] || VERSIONS=(15 18)
LAG_ARGS=()
[ "${#QUICK[@]}" -gt 0 ] && LAG_ARGS=(--live 500 --expiring 20 --window 2 --idle 1 --renew-rate 20)

for v in "${VERSIONS[@]}"; do
  mkdir -p "$OUT/pg$v"
  log "PostgreSQL $v: bench/run.sh"
  "$REPO_ROOT/bench/run.sh" --pg "$v" --out "$OUT/pg$v" "${QUICK[@]}"
  log "PostgreSQL $v: bench/worker_lag.sh"
  "$REPO_ROOT/bench/worker_lag.sh" --pg "$v" "${LAG_ARGS[@]}" --json "$OUT/pg$v/worker_lag.json"
done
dirs=()
for v in "${VERSIONS[@]}"; do dirs+=("$OUT/pg$v"); done
/usr/bin/python3 "$REPO_ROOT/bench/versions.py" "$OUT" "${dirs[@]}"
