#!/usr/bin/env bash
# Groups at scale (contract 26): 100,000 partitions over 100 members, the
# time from a join or leave to a stable assignment and the statements and
# WAL per member per round, side by side with the recipe groups replaced.
# Starts a throwaway cluster with leaderlock and pg_stat_statements
# preloaded (default settings but max_connections, fsync on), runs
# bench/groups.py. Arguments are passed on (--partitions P --members N
# --json FILE ...); --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench groups.py "shared_preload_libraries = 'leaderlock,pg_stat_statements'" \
  "pg_stat_statements.track = all" "max_connections = 300" -- "$@"
