#!/usr/bin/env bash
# How many SQL statements each path of a call runs inside the extension
# (pg_stat_statements, track = all), on a throwaway cluster (leaderlock
# and pg_stat_statements preloaded, default settings); runs bench/paths.py.
# Arguments are passed on (--rounds N, --json FILE); --pg N (first) picks
# the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench paths.py "shared_preload_libraries = 'leaderlock,pg_stat_statements'" \
  "pg_stat_statements.track = all" -- "$@"
